package flr_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/flr"
	"github.com/vmvault/vmvault/flr/flrtest"
)

// TestEncryptedAndUnknownListed: LUKS, BitLocker, swap and blank
// partitions are listed with their kind and a reason, never an error for
// the point; Open says why it cannot browse them.
func TestEncryptedAndUnknownListed(t *testing.T) {
	flrtest.Need(t, false, "sgdisk", "mkswap", "dd")
	dir := t.TempDir()
	img := filepath.Join(dir, "d.img")
	flrtest.GPT(t, img, 24, flrtest.Part{SizeMiB: 4, Type: "8309"}, flrtest.Part{SizeMiB: 4, Type: "0700"},
		flrtest.Part{SizeMiB: 4, Type: "8200"}, flrtest.Part{SizeMiB: 4, Type: "8300"})
	luks := filepath.Join(dir, "luks")
	os.WriteFile(luks, append([]byte("LUKS\xba\xbe\x00\x02"), bytes.Repeat([]byte{7}, 4096)...), 0o644)
	flrtest.CopyAt(t, img, luks, 1<<20)
	bl := make([]byte, 512)
	copy(bl, "\xeb\x58\x90-FVE-FS-")
	os.WriteFile(filepath.Join(dir, "bl"), bl, 0o644)
	flrtest.CopyAt(t, img, filepath.Join(dir, "bl"), 5<<20)
	sw := filepath.Join(dir, "swap")
	os.WriteFile(sw, nil, 0o644)
	os.Truncate(sw, 4<<20)
	flrtest.Run(t, "mkswap", sw)
	flrtest.CopyAt(t, img, sw, 9<<20)

	disks := []flr.Disk{diskOf(t, img)}
	vols, err := flr.Volumes(context.Background(), disks)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"d0p1": flr.KindLUKS, "d0p2": flr.KindBitLocker, "d0p3": flr.KindSwap, "d0p4": flr.KindUnknown}
	if len(vols) != 4 {
		t.Fatalf("volumes %+v", vols)
	}
	for _, v := range vols {
		if v.FS != want[v.ID] || v.Browsable || v.Reason == "" || v.Size != 4<<20 || v.Partition == nil {
			t.Errorf("%+v: want fs %s, not browsable, with a reason", v, want[v.ID])
		}
		_, err := flr.Open(context.Background(), disks, v.ID)
		if !errors.Is(err, flr.ErrNotBrowsable) || !strings.Contains(err.Error(), v.Reason) {
			t.Errorf("Open(%s) = %v", v.ID, err)
		}
	}
	if _, err := flr.Open(context.Background(), disks, "d7p1"); !errors.Is(err, flr.ErrNoVolume) {
		t.Errorf("Open(missing) = %v", err)
	}
}

// TestCancelStopsReads: once Open's context is cancelled, the FS fails
// every read with the context's error.
func TestCancelStopsReads(t *testing.T) {
	flrtest.Need(t, false, "mkfs.ext4")
	src := t.TempDir()
	flrtest.MakeTree(t, src, flrtest.Options{})
	img := filepath.Join(t.TempDir(), "fs.img")
	flrtest.Ext4(t, img, src, 16)
	disks := []flr.Disk{diskOf(t, img)}
	ctx, cancel := context.WithCancel(context.Background())
	f, err := flr.Open(ctx, disks, "d0")
	if err != nil {
		t.Fatal(err)
	}
	fl, err := f.OpenFile("data/random-1m.bin")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := fl.ReadAt(make([]byte, 10), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadAt after cancel: %v", err)
	}
	if _, err := f.ReadDir("etc"); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadDir after cancel: %v", err)
	}
	if _, err := flr.Volumes(ctx, disks); !errors.Is(err, context.Canceled) {
		t.Errorf("Volumes after cancel: %v", err)
	}
}
