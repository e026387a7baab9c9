package portmap

import (
	"bytes"
	"testing"
)

// FuzzHandle feeds arbitrary call messages to the portmapper: it never
// panics, and any answer is a well-formed reply to the call's xid.
func FuzzHandle(f *testing.F) {
	f.Add(call(1, Program, 2, ProcGetPort, 100005, 3, ProtoTCP, 0))
	f.Add(call(2, Program, 2, ProcDump))
	f.Add(call(3, Program, 4, 3))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	s := New(table)
	f.Fuzz(func(t *testing.T, msg []byte) {
		reply := s.Handle(msg)
		if reply == nil {
			return
		}
		if len(reply) < 12 || len(reply)%4 != 0 || len(reply) > 1024 {
			t.Fatalf("reply of %d bytes", len(reply))
		}
		if !bytes.Equal(reply[:4], msg[:4]) || reply[7] != msgReply {
			t.Fatalf("reply %x to %x", reply, msg)
		}
		if c, err := ParseCall(msg); err == nil && c.RPCVers == 2 && c.Prog == Program && c.Vers == Version && c.Proc == ProcGetPort {
			if _, err := ParseMapping(c.Args); err == nil && len(reply) != 28 {
				t.Fatalf("getport reply of %d bytes", len(reply))
			}
		}
	})
}

// FuzzReadRecord: record marking from a hostile stream is bounded.
func FuzzReadRecord(f *testing.F) {
	f.Add([]byte{0x80, 0, 0, 4, 1, 2, 3, 4})
	f.Add([]byte{0, 0, 0, 2, 1, 2, 0x80, 0, 0, 2, 3, 4})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := ReadRecord(bytes.NewReader(b), 4096)
		if err == nil && len(rec) > 4096 {
			t.Fatalf("record of %d bytes", len(rec))
		}
	})
}
