package instant

import (
	"bytes"
	"context"
	"github.com/vmvault/vmvault/repository"
	"os"
	"path/filepath"
	"testing"
)

// FuzzIntercept: the RPC front decodes hostile call records without
// panicking; what it answers echoes the xid and is a reply.
func FuzzIntercept(f *testing.F) {
	f.Add(rawCall(1, ProgNFS, 4, 1, 1))
	f.Add(rawCall(2, ProgMount, 3, 5, 1))
	f.Add(rawCall(3, ProgNFS, 3, 19, 1, 4, 0))
	f.Add(rawCall(4, ProgNFS, 3, 1, 6))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0x86, 0xa3})
	f.Fuzz(func(t *testing.T, rec []byte) {
		clampRead(bytes.Clone(rec))
		reply := intercept(rec)
		if len(reply) == 0 {
			return
		}
		if len(reply) < 12 || len(reply)%4 != 0 || !bytes.Equal(reply[:4], rec[:4]) || reply[7] != 1 {
			t.Fatalf("reply %x to %x", reply, rec)
		}
	})
}

// FuzzPatchFSInfo: patching a reply of any shape never panics and never
// changes its length.
func FuzzPatchFSInfo(f *testing.F) {
	ok := u32s(nil, 9, 1, 0, 0, 0, 0, 0, 0)
	ok = u32s(ok, 1<<30, 1<<30, 4096, 1<<30, 1<<30, 4096, 8192)
	f.Add(ok)
	f.Add(u32s(nil, 9, 1, 0, 0, 0, 0, 0, 1))
	f.Fuzz(func(t *testing.T, rec []byte) {
		n := len(rec)
		patchFSInfo(rec)
		if len(rec) != n {
			t.Fatal("length changed")
		}
	})
}

// FuzzScratchNames: whatever name a client creates, renames to or
// removes, nothing appears outside the session's scratch directory, the
// point's files stay, and nothing panics.
func FuzzScratchNames(f *testing.F) {
	for _, s := range []string{"vmware.log", ".lck-0001", "../escape", "a/b", "..", ".", "", "vm.vmx", "x\x00y", "/abs", "\\\\server"} {
		f.Add(s, "renamed")
	}
	r := repository.TestRepository(f)
	p := backupImages(f, r, "vm", testConfig("vm", 1), image(f, 1<<20, 4))
	f.Fuzz(func(t *testing.T, name, to string) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "session")
		s, err := Open(context.Background(), r, Options{Point: p.ID, Dir: dir, ScratchLimit: 1 << 20, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fs := &exportFS{s: s}
		if file, err := fs.Create(name); err == nil {
			file.Write([]byte("x"))
			file.Close()
		}
		fs.Rename(name, to)
		fs.Remove(to)
		ents, err := os.ReadDir(parent)
		if err != nil || len(ents) != 1 || ents[0].Name() != "session" {
			t.Fatalf("something was created beside the session: %v %v", ents, err)
		}
		for _, n := range []string{"vm.vmdk", "vm-flat.vmdk", "vm.vmx"} {
			if _, err := fs.Stat(n); err != nil {
				t.Fatalf("the point's %s is gone: %v", n, err)
			}
		}
	})
}
