package guestfs_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestExtDamaged: a real ext4 image damaged with debugfs. An extent that
// points past the volume's end fails that file with ErrCorrupt; a
// directory hard-linked into itself makes a cycle that a walk must survive;
// the rest of the file system still reads.
func TestExtDamaged(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4", "debugfs")
	src := t.TempDir()
	guestfstest.MakeTree(t, src, guestfstest.Options{})
	img := filepath.Join(t.TempDir(), "fs.img")
	guestfstest.Ext4(t, img, src, 32)
	// First extent of the 1 MiB file: i_block[5] is ee_start_lo.
	guestfstest.Run(t, "debugfs", "-w", "-R", "sif /data/random-1m.bin block[5] 0x7ffffff0", img)
	guestfstest.Run(t, "debugfs", "-w", "-R", "ln /etc /etc/nginx/loop", img)
	// A size of 2^50, past the 16 TiB ext4 can address (audit 2, defect
	// 2: a download of it streamed zeros without end).
	guestfstest.Run(t, "debugfs", "-w", "-R", "sif /etc/hostname size 0x4000000000000", img)
	f := openOnly(t, []guestfs.Disk{diskOf(t, img)}, guestfs.KindExt4)
	if _, err := f.OpenFile("etc/hostname"); !errors.Is(err, guestfs.ErrCorrupt) {
		t.Errorf("a 1 PiB claim: %v, want ErrCorrupt", err)
	}
	if ents, err := f.ReadDir("etc"); err != nil || len(ents) < 2 {
		t.Errorf("the directory holding it still lists: %d entries, %v", len(ents), err)
	}
	if _, err := f.OpenFile("data/random-1m.bin"); !errors.Is(err, guestfs.ErrCorrupt) {
		t.Errorf("extent past the end: %v, want ErrCorrupt", err)
	}
	b, err := os.ReadFile(filepath.Join(src, "data/random-300k.bin"))
	if err != nil {
		t.Fatal(err)
	}
	fl, err := f.OpenFile("data/random-300k.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(fl)
	if err != nil || string(got) != string(b) {
		t.Errorf("undamaged file: %d bytes, %v", len(got), err)
	}
	// The cycle: etc/nginx/loop is etc. A deep path resolves (it is a
	// real directory each time) and a walk of it is bounded by its caller.
	deep := "etc" + strings.Repeat("/nginx/loop", 50) + "/nginx/nginx.conf"
	start := time.Now()
	if b, err := f.Open(deep); err != nil {
		t.Errorf("path through the cycle: %v", err)
	} else {
		b.Close()
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("50 laps of the cycle took %v", d)
	}
	if _, err := f.Stat("etc/nginx/loop" + strings.Repeat("/x", 10)); !errors.Is(err, guestfs.ErrNotExist) {
		t.Errorf("missing path under the cycle: %v", err)
	}
	_ = fmt.Sprint
}
