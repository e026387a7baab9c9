package instant

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	nfs "github.com/willscott/go-nfs"

	"github.com/vmvault/vmvault/service/instant/portmap"
)

func rawCall(xid, prog, vers, proc, flavor uint32, args ...uint32) []byte {
	b := u32s(nil, xid, 0, 2, prog, vers, proc, flavor, 0, 0, 0)
	return u32s(b, args...)
}

// TestRPCFront: what go-nfs would mis-answer is answered well-formed.
func TestRPCFront(t *testing.T) {
	_, srv, _, _ := exported(t, nil, 0)
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, tc := range map[string]struct {
		msg  []byte
		want []uint32
	}{
		"nfs v4":        {rawCall(1, ProgNFS, 4, 1, 1), []uint32{1, 1, 0, 0, 0, acceptProgMis, 3, 3}},
		"mount v1":      {rawCall(2, ProgMount, 1, 1, 1), []uint32{2, 1, 0, 0, 0, acceptProgMis, 3, 3}},
		"other program": {rawCall(3, 100021, 4, 0, 1), []uint32{3, 1, 0, 0, 0, acceptProgUn}},
		"rpcsec_gss":    {rawCall(4, ProgNFS, 3, 1, 6), []uint32{4, 1, 1, 1, authTooWeak}},
		"nfs proc 22":   {rawCall(5, ProgNFS, 3, 22, 1), []uint32{5, 1, 0, 0, 0, acceptProcUn}},
		"mount export":  {rawCall(6, ProgMount, 3, 5, 1), []uint32{6, 1, 0, 0, 0, acceptOK, 0}},
		"mount dump":    {rawCall(7, ProgMount, 3, 2, 0), []uint32{7, 1, 0, 0, 0, acceptOK, 0}},
		"mount umntall": {rawCall(8, ProgMount, 3, 4, 1), []uint32{8, 1, 0, 0, 0, acceptOK}},
		"mount proc 9":  {rawCall(9, ProgMount, 3, 9, 1), []uint32{9, 1, 0, 0, 0, acceptProcUn}},
		"nfs null":      {rawCall(10, ProgNFS, 3, 0, 0), []uint32{10, 1, 0, 0, 0, acceptOK}},
		"rpc version 3": {u32s(nil, 11, 0, 3, ProgNFS, 3, 0, 0, 0, 0, 0), []uint32{11, 1, 1, 0, 2, 2}},
		"stale handle":  {rawCall(12, ProgNFS, 3, 1, 1, 4, 1), []uint32{12, 1, 0, 0, 0, acceptOK, 70}},
	} {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(append(u32s(nil, uint32(len(tc.msg))|1<<31), tc.msg...)); err != nil {
			t.Fatal(err)
		}
		rec, err := portmap.ReadRecord(c, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []uint32
		for i := 0; i+4 <= len(rec) && len(got) < len(tc.want); i += 4 {
			got = append(got, binary.BigEndian.Uint32(rec[i:]))
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", name, got, tc.want)
				break
			}
		}
	}
}

// TestFSInfoTransferSizes: FSINFO advertises 1 MiB transfers, not
// go-nfs's 1 GiB, and a client that follows it writes and reads fine.
func TestFSInfoTransferSizes(t *testing.T) {
	s, srv, src, _ := exported(t, nil, 0)
	v, err := mount(t, srv, s.Export)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := v.FSInfo()
	if err != nil {
		t.Fatal(err)
	}
	if fi.RTMax != xferMax || fi.RTPref != xferMax || fi.WTMax != xferMax || fi.WTPref != xferMax || fi.RTMult != 4096 {
		t.Fatalf("fsinfo %+v", fi)
	}
	w, err := v.OpenFile("web01-flat.vmdk", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{0x5a}, 3<<20+100) // four WRITEs of at most 1 MiB
	if n, err := w.Write(big); err != nil || n != len(big) {
		t.Fatalf("write %d: %v", n, err)
	}
	got := make([]byte, len(src))
	copy(got, src)
	copy(got, big)
	back := make([]byte, len(src))
	f, _ := v.Open("web01-flat.vmdk")
	for off := 0; off < len(back); {
		n, err := f.ReadAt(back[off:], int64(off))
		if n == 0 {
			t.Fatalf("read at %d: %v", off, err)
		}
		off += n
	}
	if !bytes.Equal(back, got) {
		t.Fatal("read back differs")
	}
}

// TestGoNFSUnknownProcedure pins what go-nfs itself answers for a MOUNT
// procedure it lacks (EXPORT), without the front: accept_stat 2, which is
// PROG_MISMATCH without its version range (go-nfs's enum has no
// PROG_MISMATCH): malformed, and libnfs 4.0 (QEMU's NFS driver) fails its
// mount on it. The front answers EXPORT itself and shifts go-nfs's other
// error stats to their RFC 5531 values.
func TestGoNFSUnknownProcedure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go nfs.Serve(l, &handler{s: NewServer(ServerOptions{})})
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := rawCall(77, ProgMount, 3, 5, 1)
	c.Write(append(u32s(nil, uint32(len(msg))|1<<31), msg...))
	c.SetDeadline(time.Now().Add(5 * time.Second))
	rec, err := portmap.ReadRecord(c, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if want := u32s(nil, 77, 1, 0, 0, 0, 2); !bytes.Equal(rec, want) {
		t.Fatalf("go-nfs answered %x, want %x", rec, want)
	}
	// Through the front: a MNT whose argument does not decode is
	// SYSTEM_ERR (go-nfs's 4, GARBAGE_ARGS on its own wire).
	_, srv, _, _ := exported(t, nil, 0)
	fc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	msg = rawCall(78, ProgMount, 3, 1, 1, 1<<20) // a dirpath longer than the call
	fc.Write(append(u32s(nil, uint32(len(msg))|1<<31), msg...))
	fc.SetDeadline(time.Now().Add(5 * time.Second))
	if rec, err = portmap.ReadRecord(fc, 1<<16); err != nil {
		t.Fatal(err)
	}
	if want := u32s(nil, 78, 1, 0, 0, 0, 5); !bytes.Equal(rec, want) {
		t.Fatalf("through the front %x, want %x", rec, want)
	}
}

func TestClampRead(t *testing.T) {
	fh := bytes.Repeat([]byte{7}, 36)
	call := rawCall(1, ProgNFS, 3, procNFSRead, 1, 36)
	call = append(call, fh...)
	call = u32s(call, 0, 4096, 16<<20)
	clampRead(call)
	if got := binary.BigEndian.Uint32(call[len(call)-4:]); got != xferMax {
		t.Fatalf("count %d", got)
	}
	small := u32s(append(rawCall(2, ProgNFS, 3, procNFSRead, 1, 36), fh...), 0, 0, 8192)
	clampRead(small)
	if got := binary.BigEndian.Uint32(small[len(small)-4:]); got != 8192 {
		t.Fatalf("count %d", got)
	}
	for _, b := range [][]byte{nil, call[:50], rawCall(3, ProgNFS, 3, procNFSRead, 1, 1<<30)} {
		clampRead(b) // no panic
	}
}
