package storage

import (
	"bytes"
	"context"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLocalSpace measures a tmpfs of a known size, before and after a file
// fills part of it.
func TestLocalSpace(t *testing.T) {
	dir := t.TempDir()
	const size = 8 << 20
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8m"); err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("SKIPPED: mounting a tmpfs needs root (the tests run as root in make test): %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, 0) })
	l := NewLocal(dir, false)
	sp, err := l.Space(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sp.Total != size || sp.Free != size {
		t.Fatalf("empty 8 MiB tmpfs: total %d free %d, want %d and %d", sp.Total, sp.Free, size, size)
	}
	if err := l.Put(context.Background(), "data/x", bytes.NewReader(make([]byte, 3<<20)), 3<<20, Steps{}); err != nil {
		t.Fatal(err)
	}
	sp, err = l.Space(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if used := sp.Total - sp.Free; used < 3<<20 || used > 3<<20+64<<10 {
		t.Fatalf("after a 3 MiB file: %d bytes used", used)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Space(ctx); err == nil {
		t.Fatal("Space with a cancelled context succeeded")
	}
}
