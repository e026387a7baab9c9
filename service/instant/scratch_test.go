package instant

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vmvault/vmvault/repository"
)

// TestScratchFiles: what a hypervisor writes beside the disks (locks,
// logs, nvram, swap) lives in the session directory, survives a reopen
// with the same handles, is capped, and never shadows a point file.
func TestScratchFiles(t *testing.T) {
	r := repository.TestRepository(t)
	img := image(t, 2<<20, 9)
	p := backupImages(t, r, "vm", testConfig("vm", 1), img)
	dir := t.TempDir()
	s, err := Open(context.Background(), r, Options{Point: p.ID, Dir: dir, ScratchLimit: 256 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	fs := &exportFS{s: s}
	h := &handler{s: NewServer(ServerOptions{})}
	h.s.Add(s)

	f, err := fs.Create("vmware.log")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("world"))
	f.Close()
	fh := h.ToHandle(fs, []string{"vmware.log"})
	if fh == nil {
		t.Fatal("no handle for a scratch file")
	}
	if _, path, err := h.FromHandle(fh); err != nil || len(path) != 1 || path[0] != "vmware.log" {
		t.Fatalf("handle resolves to %v, %v", path, err)
	}
	// A forged scratch handle (flipped MAC bit) is stale.
	bad := bytes.Clone(fh)
	bad[len(bad)-1] ^= 1
	if _, _, err := h.FromHandle(bad); err == nil {
		t.Fatal("forged handle accepted")
	}

	tests := []struct {
		name string
		op   func() error
		want error
	}{
		{"slash in name", func() error { _, err := fs.Create("a/b"); return err }, os.ErrInvalid},
		{"dot dot", func() error { _, err := fs.Create(".."); return err }, os.ErrInvalid},
		{"over the flat file", func() error { _, err := fs.Create("vm-flat.vmdk"); return err }, os.ErrPermission},
		{"rename onto the descriptor", func() error { return fs.Rename("vmware.log", "vm.vmdk") }, os.ErrPermission},
		{"remove the descriptor", func() error { return fs.Remove("vm.vmdk") }, os.ErrPermission},
		{"missing", func() error { _, err := fs.Stat("nope"); return err }, os.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}

	// A sparse swap file costs nothing; writing past the cap is ENOSPC and
	// leaves the point's disk alone.
	sw, err := fs.Create("vm.vswp")
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Truncate(1 << 30); err != nil {
		t.Fatalf("sparse swap: %v", err)
	}
	if _, err := sw.Write(make([]byte, 300<<10)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the scratch cap: %v", err)
	}
	sw.Close()
	if err := fs.Rename("vmware.log", "vmware-1.log"); err != nil {
		t.Fatal(err)
	}
	ents, err := fs.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 5 { // vm.vmdk vm-flat.vmdk vm.vmx vm-1.log vm.vswp
		t.Fatalf("listing %v", names)
	}

	// Reopen (an appliance restart): same files, same handle for the same name.
	s.Close()
	h.s.Remove(s)
	s2, err := Open(context.Background(), r, Options{Point: p.ID, Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h.s.Add(s2)
	fs2 := &exportFS{s: s2}
	g, err := fs2.Open("vmware-1.log")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(g)
	g.Close()
	if string(b) != "hello world" {
		t.Fatalf("after reopen: %q", b)
	}
	if !bytes.Equal(h.ToHandle(fs2, []string{"vmware-1.log"}), h.ToHandle(fs, []string{"vmware-1.log"})) {
		t.Fatal("handle changed across a reopen")
	}
	if err := s2.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "scratch")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("scratch directory left: %v", err)
	}
}
