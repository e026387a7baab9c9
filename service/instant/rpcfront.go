package instant

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"

	"github.com/vmvault/vmvault/service/instant/portmap"
)

// The RPC front: go-nfs dispatches on program and procedure only, so a
// call of another version (NFS v4's COMPOUND is procedure 1, GETATTR in
// v3), another credential flavour or an unregistered MOUNT procedure would
// be mis-answered. rpcConn sits between the socket and go-nfs: it reads
// each record (joining fragments, which go-nfs does not), answers itself
// what go-nfs would get wrong, and hands the rest on as one fragment.
//
// Answered here:
//   - RPC version other than 2: MSG_DENIED RPC_MISMATCH 2..2;
//   - programs other than NFS and MOUNT: PROG_UNAVAIL; versions other
//     than 3: PROG_MISMATCH 3..3;
//   - credentials other than AUTH_NULL and AUTH_SYS: MSG_DENIED
//     AUTH_ERROR AUTH_TOOWEAK;
//   - NFS procedures past COMMIT (21): PROC_UNAVAIL;
//   - MOUNT DUMP and EXPORT: empty lists (the export paths are secrets:
//     a client must be told one, never list them), UMNTALL: void; MOUNT
//     procedures past EXPORT: PROC_UNAVAIL.
//
// Rewritten on the way out: FSINFO's transfer sizes (patchFSInfo) and
// go-nfs's mis-numbered error stats (fixAcceptStat).
const (
	procNFSCommit = 21
	procMountDump = 2
	procMountAll  = 4
	procMountExp  = 5
	authNull      = 0
	authSys       = 1
	authTooWeak   = 5
	procNFSFSInfo = 19
	procNFSRead   = 6
	// xferMax is the READ and WRITE size FSINFO advertises (go-nfs says
	// 1 GiB, which would let one call pin that much memory).
	xferMax       = 1 << 20
	maxCallRecord = 4 * xferMax // a WRITE and its header, with room for clients that round up
	acceptOK      = 0
	acceptProgUn  = 1
	acceptProgMis = 2
	acceptProcUn  = 3
	acceptGarbage = 4
)

type rpcConn struct {
	net.Conn

	rbuf []byte // what go-nfs reads next

	fsinfoMu sync.Mutex
	fsinfo   map[uint32]bool // xids of FSINFO calls handed to go-nfs

	wmu sync.Mutex // held from the start of a record written to the end
	// the writer's parse of go-nfs's output (only its one writer goroutine
	// calls Write)
	hdr    []byte
	remain int
	last   bool
	locked bool
}

func u32s(b []byte, vs ...uint32) []byte {
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

func acceptedReply(xid, stat uint32, body ...uint32) []byte {
	return u32s(nil, append([]uint32{xid, 1, 0, 0, 0, stat}, body...)...)
}

// intercept returns the reply to a call go-nfs must not see, or nil.
func intercept(rec []byte) []byte {
	c, err := portmap.ParseCall(rec)
	if err != nil {
		if len(rec) >= 8 && binary.BigEndian.Uint32(rec[4:]) == 0 {
			return acceptedReply(binary.BigEndian.Uint32(rec), acceptGarbage)
		}
		return []byte{} // not a call: drop it
	}
	switch {
	case c.RPCVers != 2:
		return u32s(nil, c.XID, 1, 1, 0, 2, 2)
	case c.Prog != ProgNFS && c.Prog != ProgMount:
		return acceptedReply(c.XID, acceptProgUn)
	case c.Vers != 3:
		return acceptedReply(c.XID, acceptProgMis, 3, 3)
	case c.CredFlavor != authNull && c.CredFlavor != authSys:
		return u32s(nil, c.XID, 1, 1, 1, authTooWeak)
	case c.Prog == ProgNFS && c.Proc > procNFSCommit:
		return acceptedReply(c.XID, acceptProcUn)
	case c.Prog == ProgMount:
		switch c.Proc {
		case procMountDump, procMountExp:
			return acceptedReply(c.XID, acceptOK, 0) // an empty list
		case procMountAll:
			return acceptedReply(c.XID, acceptOK)
		}
		if c.Proc > procMountExp {
			return acceptedReply(c.XID, acceptProcUn)
		}
	}
	return nil
}

func (c *rpcConn) Read(p []byte) (int, error) {
	for len(c.rbuf) == 0 {
		rec, err := portmap.ReadRecord(c.Conn, maxCallRecord)
		if err != nil {
			return 0, err
		}
		if reply := intercept(rec); reply != nil {
			if len(reply) > 0 {
				if err := c.reply(reply); err != nil {
					return 0, err
				}
			}
			continue
		}
		clampRead(rec)
		if len(rec) >= 24 && binary.BigEndian.Uint32(rec[12:]) == ProgNFS && binary.BigEndian.Uint32(rec[20:]) == procNFSFSInfo {
			c.fsinfoMu.Lock()
			if c.fsinfo == nil {
				c.fsinfo = map[uint32]bool{}
			}
			if len(c.fsinfo) < 64 {
				c.fsinfo[binary.BigEndian.Uint32(rec)] = true
			}
			c.fsinfoMu.Unlock()
		}
		c.rbuf = append(u32s(make([]byte, 0, 4+len(rec)), uint32(len(rec))|1<<31), rec...)
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

func (c *rpcConn) reply(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.Conn.Write(append(u32s(nil, uint32(len(b))|1<<31), b...))
	return err
}

// Write passes go-nfs's records through whole: a reply of ours never
// lands inside one.
func (c *rpcConn) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if !c.locked {
			c.wmu.Lock()
			c.locked = true
		}
		if c.remain == 0 && len(c.hdr) == 0 && len(p) >= 8 {
			v := binary.BigEndian.Uint32(p)
			n := int(v &^ (1 << 31))
			if v&(1<<31) != 0 && len(p) >= 4+n && n >= 4 && (c.takeFSInfo(binary.BigEndian.Uint32(p[4:])) || badAcceptStat(p[4:4+n])) {
				q := bytes.Clone(p[:4+n])
				patchFSInfo(q[4:])
				fixAcceptStat(q[4:])
				_, err := c.Conn.Write(q)
				c.unlock()
				if err != nil {
					return total - len(p), err
				}
				p = p[4+n:]
				continue
			}
		}
		var take int
		if c.remain == 0 {
			take = min(4-len(c.hdr), len(p))
			c.hdr = append(c.hdr, p[:take]...)
		} else {
			take = min(c.remain, len(p))
			c.remain -= take
		}
		if _, err := c.Conn.Write(p[:take]); err != nil {
			c.unlock()
			return total - len(p), err
		}
		p = p[take:]
		if len(c.hdr) == 4 {
			v := binary.BigEndian.Uint32(c.hdr)
			c.hdr = c.hdr[:0]
			c.remain, c.last = int(v&^(1<<31)), v&(1<<31) != 0
		}
		if c.remain == 0 && len(c.hdr) == 0 && c.last {
			c.unlock()
		}
	}
	return total, nil
}

func (c *rpcConn) unlock() {
	if c.locked {
		c.locked = false
		c.last = false
		c.wmu.Unlock()
	}
}

func (c *rpcConn) takeFSInfo(xid uint32) bool {
	c.fsinfoMu.Lock()
	defer c.fsinfoMu.Unlock()
	if !c.fsinfo[xid] {
		return false
	}
	delete(c.fsinfo, xid)
	return true
}

// patchFSInfo lowers the transfer sizes of an FSINFO3resok reply to
// xferMax; anything else is left alone.
func patchFSInfo(rec []byte) {
	be := binary.BigEndian
	// xid, REPLY, MSG_ACCEPTED, verifier (flavour, empty body), SUCCESS, NFS3_OK
	if len(rec) < 32 || be.Uint32(rec[8:]) != 0 || be.Uint32(rec[16:]) != 0 || be.Uint32(rec[20:]) != 0 || be.Uint32(rec[24:]) != 0 {
		return
	}
	o := 28
	if be.Uint32(rec[o:]) == 1 {
		o += 84 // fattr3
	}
	o += 4
	if len(rec) < o+24 {
		return
	}
	for _, f := range []int{0, 4, 12, 16} { // rtmax, rtpref, wtmax, wtpref
		if be.Uint32(rec[o+f:]) > xferMax {
			be.PutUint32(rec[o+f:], xferMax)
		}
	}
}

// go-nfs numbers accept_stat without PROG_MISMATCH (its "PROC_UNAVAIL"
// is 2, GARBAGE_ARGS 3, SYSTEM_ERR 4), so its error replies say
// PROG_MISMATCH without the version range (malformed: libnfs fails on
// it) or the wrong error. It never means PROG_MISMATCH (it has no notion
// of versions; the front answers those), so an accepted reply from it with
// stat 2, 3 or 4 and no body is shifted to the RFC 5531 value.
func badAcceptStat(rec []byte) bool {
	be := binary.BigEndian
	if len(rec) != 24 || be.Uint32(rec[4:]) != 1 || be.Uint32(rec[8:]) != 0 || be.Uint32(rec[16:]) != 0 {
		return false
	}
	st := be.Uint32(rec[20:])
	return st >= 2 && st <= 4
}

func fixAcceptStat(rec []byte) {
	if badAcceptStat(rec) {
		binary.BigEndian.PutUint32(rec[20:], binary.BigEndian.Uint32(rec[20:])+1)
	}
}

// clampRead lowers a READ's count to xferMax, what FSINFO advertises:
// go-nfs allocates the count a client asks for (up to 16 MiB) before
// reading. A shorter reply is a normal short read to the client.
func clampRead(rec []byte) {
	c, err := portmap.ParseCall(rec)
	if err != nil || c.Prog != ProgNFS || c.Vers != 3 || c.Proc != procNFSRead || len(c.Args) < 4 {
		return
	}
	fhLen := binary.BigEndian.Uint32(c.Args)
	if fhLen > 64 {
		return
	}
	o := 4 + int((fhLen+3)&^3) + 8 // handle, offset
	if len(c.Args) < o+4 {
		return
	}
	if binary.BigEndian.Uint32(c.Args[o:]) > xferMax {
		binary.BigEndian.PutUint32(c.Args[o:], xferMax)
	}
}
