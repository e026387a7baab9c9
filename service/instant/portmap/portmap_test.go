package portmap

import (
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

var table = []Mapping{{100005, 3, ProtoTCP, 2049}, {100003, 3, ProtoTCP, 2049}}

func call(xid, prog, vers, proc uint32, args ...uint32) []byte {
	b := be(nil, xid, msgCall, 2, prog, vers, proc, 1, 8, 0, 0, 0, 0) // AUTH_SYS with an 8-byte body, null verf
	return be(b, args...)
}

func words(t *testing.T, b []byte) []uint32 {
	t.Helper()
	if len(b)%4 != 0 {
		t.Fatalf("reply of %d bytes", len(b))
	}
	var w []uint32
	for i := 0; i < len(b); i += 4 {
		w = append(w, binary.BigEndian.Uint32(b[i:]))
	}
	return w
}

func TestHandle(t *testing.T) {
	s := New(table)
	for name, tc := range map[string]struct {
		msg  []byte
		want []uint32
	}{
		"null":         {call(1, Program, 2, ProcNull), []uint32{1, 1, 0, 0, 0, 0}},
		"getport":      {call(2, Program, 2, ProcGetPort, 100005, 3, ProtoTCP, 0), []uint32{2, 1, 0, 0, 0, 0, 2049}},
		"getport none": {call(3, Program, 2, ProcGetPort, 100005, 1, ProtoUDP, 0), []uint32{3, 1, 0, 0, 0, 0, 0}},
		"dump": {call(4, Program, 2, ProcDump), []uint32{4, 1, 0, 0, 0, 0,
			1, 100005, 3, ProtoTCP, 2049, 1, 100003, 3, ProtoTCP, 2049, 0}},
		"set refused":     {call(5, Program, 2, ProcSet, 1, 1, 6, 1), []uint32{5, 1, 0, 0, 0, 3}},
		"callit refused":  {call(6, Program, 2, ProcCallIt, 1, 1, 1, 0), []uint32{6, 1, 0, 0, 0, 3}},
		"rpcbind v4":      {call(7, Program, 4, 3), []uint32{7, 1, 0, 0, 0, 2, 2, 2}},
		"other program":   {call(8, 100003, 3, 0), []uint32{8, 1, 0, 0, 0, 1}},
		"short getport":   {call(9, Program, 2, ProcGetPort, 100005), []uint32{9, 1, 0, 0, 0, 4}},
		"rpc version 3":   {be(nil, 10, msgCall, 3, Program, 2, 0, 0, 0, 0, 0), []uint32{10, 1, 1, 0, 2, 2}},
		"huge credential": {be(nil, 11, msgCall, 2, Program, 2, 0, 1, 1<<30), []uint32{11, 1, 0, 0, 0, 4}},
	} {
		got := words(t, s.Handle(tc.msg))
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
	if s.Handle([]byte{1, 2, 3}) != nil || s.Handle(be(nil, 1, msgReply, 0)) != nil {
		t.Error("answered a non-call")
	}
}

func TestOverTCPAndUDP(t *testing.T) {
	s := New(table)
	var allowed atomic.Bool
	allowed.Store(true)
	s.Allow = func(net.Addr) bool { return allowed.Load() }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := s.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := call(42, Program, 2, ProcGetPort, 100003, 3, ProtoTCP, 0)
	// Two fragments: the server joins them.
	frag := be(nil, 8)
	frag = append(frag, msg[:8]...)
	frag = be(frag, uint32(len(msg)-8)|1<<31)
	frag = append(frag, msg[8:]...)
	c.Write(frag)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rec, err := ReadRecord(c, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if w := words(t, rec); len(w) != 7 || w[0] != 42 || w[6] != 2049 {
		t.Fatalf("tcp getport: %v", w)
	}

	u, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write(call(43, Program, 2, ProcGetPort, 100005, 3, ProtoTCP, 0))
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, err := u.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if w := words(t, buf[:n]); len(w) != 7 || w[0] != 43 || w[6] != 2049 {
		t.Fatalf("udp getport: %v", w)
	}

	allowed.Store(false)
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Write(be(nil, uint32(len(msg))|1<<31))
	c2.Write(msg)
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := ReadRecord(c2, 1<<16); err == nil {
		t.Fatal("a client outside the allow list got an answer")
	}
}
