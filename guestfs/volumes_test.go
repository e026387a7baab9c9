package guestfs_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestEncryptedAndUnknownListed: LUKS, BitLocker, swap and blank
// partitions are listed with their kind and a reason, never an error for
// the point; Open says why it cannot browse them.
func TestEncryptedAndUnknownListed(t *testing.T) {
	guestfstest.Need(t, false, "sgdisk", "mkswap", "dd")
	dir := t.TempDir()
	img := filepath.Join(dir, "d.img")
	guestfstest.GPT(t, img, 24, guestfstest.Part{SizeMiB: 4, Type: "8309"}, guestfstest.Part{SizeMiB: 4, Type: "0700"},
		guestfstest.Part{SizeMiB: 4, Type: "8200"}, guestfstest.Part{SizeMiB: 4, Type: "8300"})
	luks := filepath.Join(dir, "luks")
	os.WriteFile(luks, append([]byte("LUKS\xba\xbe\x00\x02"), bytes.Repeat([]byte{7}, 4096)...), 0o644)
	guestfstest.CopyAt(t, img, luks, 1<<20)
	bl := make([]byte, 512)
	copy(bl, "\xeb\x58\x90-FVE-FS-")
	os.WriteFile(filepath.Join(dir, "bl"), bl, 0o644)
	guestfstest.CopyAt(t, img, filepath.Join(dir, "bl"), 5<<20)
	sw := filepath.Join(dir, "swap")
	os.WriteFile(sw, nil, 0o644)
	os.Truncate(sw, 4<<20)
	guestfstest.Run(t, "mkswap", sw)
	guestfstest.CopyAt(t, img, sw, 9<<20)

	disks := []guestfs.Disk{diskOf(t, img)}
	vols, err := guestfs.Volumes(context.Background(), disks)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"d0p1": guestfs.KindLUKS, "d0p2": guestfs.KindBitLocker, "d0p3": guestfs.KindSwap, "d0p4": guestfs.KindUnknown}
	if len(vols) != 4 {
		t.Fatalf("volumes %+v", vols)
	}
	for _, v := range vols {
		if v.FS != want[v.ID] || v.Browsable || v.Reason == "" || v.Size != 4<<20 || v.Partition == nil {
			t.Errorf("%+v: want fs %s, not browsable, with a reason", v, want[v.ID])
		}
		_, err := guestfs.Open(context.Background(), disks, v.ID)
		if !errors.Is(err, guestfs.ErrNotBrowsable) || !strings.Contains(err.Error(), v.Reason) {
			t.Errorf("Open(%s) = %v", v.ID, err)
		}
	}
	if _, err := guestfs.Open(context.Background(), disks, "d7p1"); !errors.Is(err, guestfs.ErrNoVolume) {
		t.Errorf("Open(missing) = %v", err)
	}
}
