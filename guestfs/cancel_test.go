package guestfs_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestCancelStopsReads: once Open's context is cancelled, the FS fails
// every read with the context's error.
func TestCancelStopsReads(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4")
	src := t.TempDir()
	guestfstest.MakeTree(t, src, guestfstest.Options{})
	img := filepath.Join(t.TempDir(), "fs.img")
	guestfstest.Ext4(t, img, src, 16)
	disks := []guestfs.Disk{diskOf(t, img)}
	ctx, cancel := context.WithCancel(context.Background())
	f, err := guestfs.Open(ctx, disks, "d0")
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
	if _, err := guestfs.Volumes(ctx, disks); !errors.Is(err, context.Canceled) {
		t.Errorf("Volumes after cancel: %v", err)
	}
}
