package instant

import (
	"bytes"
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
