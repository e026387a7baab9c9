package portmap

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// RPC constants (RFC 5531) and the portmapper's (RFC 1833).
const (
	Program = 100000
	Version = 2

	ProcNull    = 0
	ProcSet     = 1
	ProcUnset   = 2
	ProcGetPort = 3
	ProcDump    = 4
	ProcCallIt  = 5

	ProtoTCP = 6
	ProtoUDP = 17

	msgCall  = 0
	msgReply = 1

	acceptSuccess      = 0
	acceptProgUnavail  = 1
	acceptProgMismatch = 2
	acceptProcUnavail  = 3
	acceptGarbageArgs  = 4

	replyAccepted     = 0
	replyDenied       = 1
	rejectRPCMismatch = 0

	maxAuthBody = 400
	// maxRecord bounds a TCP record (all fragments): a portmapper call is
	// well under 1 KiB.
	maxRecord = 64 << 10
)

// Mapping is one registration: program, version, protocol and port.
type Mapping struct {
	Prog, Vers, Prot, Port uint32
}

// Call is a decoded RPC call header and the argument bytes after it.
type Call struct {
	XID, RPCVers, Prog, Vers, Proc uint32
	CredFlavor, VerfFlavor         uint32
	Args                           []byte
}

// ErrShort: the bytes end before the structure does.
var ErrShort = errors.New("rpc: truncated message")

type reader struct {
	b   []byte
	err error
}

func (r *reader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.err = ErrShort
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

// opaque skips a variable-length opaque of at most max bytes (padded to 4).
func (r *reader) opaque(max uint32) {
	n := r.u32()
	if r.err != nil {
		return
	}
	if n > max {
		r.err = fmt.Errorf("rpc: opaque of %d bytes exceeds %d", n, max)
		return
	}
	padded := (uint64(n) + 3) &^ 3
	if uint64(len(r.b)) < padded {
		r.err = ErrShort
		return
	}
	r.b = r.b[padded:]
}

// ParseCall decodes an RPC call message (without TCP record marking).
func ParseCall(b []byte) (Call, error) {
	r := &reader{b: b}
	var c Call
	c.XID = r.u32()
	if t := r.u32(); r.err == nil && t != msgCall {
		return c, fmt.Errorf("rpc: message type %d is not a call", t)
	}
	c.RPCVers = r.u32()
	c.Prog = r.u32()
	c.Vers = r.u32()
	c.Proc = r.u32()
	c.CredFlavor = r.u32()
	r.opaque(maxAuthBody)
	c.VerfFlavor = r.u32()
	r.opaque(maxAuthBody)
	if r.err != nil {
		return c, r.err
	}
	c.Args = r.b
	return c, nil
}

// ParseMapping decodes PMAPPROC_GETPORT's argument.
func ParseMapping(b []byte) (Mapping, error) {
	r := &reader{b: b}
	m := Mapping{Prog: r.u32(), Vers: r.u32(), Prot: r.u32(), Port: r.u32()}
	return m, r.err
}

// Server answers portmapper calls from a fixed table.
type Server struct {
	maps []Mapping
	// Allow, when set, says which clients get an answer; the rest are
	// dropped (UDP) or disconnected (TCP).
	Allow func(net.Addr) bool

	mu    sync.Mutex
	lns   []net.Listener
	pcs   []net.PacketConn
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// New returns a server answering with maps.
func New(maps []Mapping) *Server {
	return &Server{maps: append([]Mapping(nil), maps...), conns: map[net.Conn]struct{}{}}
}

// Handle answers one call message; nil means no answer (not a call, or
// undecodable: RFC 5531 lets a server stay silent on garbage headers).
func (s *Server) Handle(msg []byte) []byte {
	c, err := ParseCall(msg)
	if err != nil {
		if len(msg) >= 8 && binary.BigEndian.Uint32(msg[4:]) == msgCall {
			// A call whose header does not decode: GARBAGE_ARGS.
			return accepted(binary.BigEndian.Uint32(msg), acceptGarbageArgs)
		}
		return nil
	}
	if c.RPCVers != 2 {
		b := header(c.XID)
		b = be(b, replyDenied, rejectRPCMismatch, 2, 2)
		return b
	}
	if c.Prog != Program {
		return accepted(c.XID, acceptProgUnavail)
	}
	if c.Vers != Version {
		return be(accepted(c.XID, acceptProgMismatch), Version, Version)
	}
	switch c.Proc {
	case ProcNull:
		return accepted(c.XID, acceptSuccess)
	case ProcGetPort:
		m, err := ParseMapping(c.Args)
		if err != nil {
			return accepted(c.XID, acceptGarbageArgs)
		}
		return be(accepted(c.XID, acceptSuccess), s.port(m))
	case ProcDump:
		b := accepted(c.XID, acceptSuccess)
		for _, m := range s.maps {
			b = be(b, 1, m.Prog, m.Vers, m.Prot, m.Port)
		}
		return be(b, 0)
	default: // SET, UNSET, CALLIT, unknown
		return accepted(c.XID, acceptProcUnavail)
	}
}

func (s *Server) port(q Mapping) uint32 {
	for _, m := range s.maps {
		if m.Prog == q.Prog && m.Vers == q.Vers && m.Prot == q.Prot {
			return m.Port
		}
	}
	return 0
}

func be(b []byte, vs ...uint32) []byte {
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

func header(xid uint32) []byte { return be(make([]byte, 0, 64), xid, msgReply) }

// accepted is an accepted reply with a null verifier and stat.
func accepted(xid, stat uint32) []byte {
	return be(header(xid), replyAccepted, 0, 0, stat)
}

// ServeTCP serves calls on l until Close.
func (s *Server) ServeTCP(l net.Listener) error {
	s.mu.Lock()
	s.lns = append(s.lns, l)
	s.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		if s.Allow != nil && !s.Allow(c.RemoteAddr()) {
			c.Close()
			continue
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// ReadRecord reads one RPC record (RFC 5531 record marking, fragments
// joined) of at most max bytes.
func ReadRecord(r io.Reader, max int) ([]byte, error) {
	var rec []byte
	for {
		var h [4]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return nil, err
		}
		v := binary.BigEndian.Uint32(h[:])
		n := int(v &^ (1 << 31))
		if len(rec)+n > max {
			return nil, fmt.Errorf("rpc: record over %d bytes", max)
		}
		start := len(rec)
		rec = append(rec, make([]byte, n)...)
		if _, err := io.ReadFull(r, rec[start:]); err != nil {
			return nil, err
		}
		if v&(1<<31) != 0 {
			return rec, nil
		}
	}
}

func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		rec, err := ReadRecord(br, maxRecord)
		if err != nil {
			return
		}
		reply := s.Handle(rec)
		if reply == nil {
			return
		}
		out := be(make([]byte, 0, 4+len(reply)), uint32(len(reply))|1<<31)
		if _, err := c.Write(append(out, reply...)); err != nil {
			return
		}
	}
}

// ServeUDP serves calls on pc until Close.
func (s *Server) ServeUDP(pc net.PacketConn) error {
	s.mu.Lock()
	s.pcs = append(s.pcs, pc)
	s.mu.Unlock()
	buf := make([]byte, 9000)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if s.Allow != nil && !s.Allow(addr) {
			continue
		}
		if reply := s.Handle(buf[:n]); reply != nil {
			_, _ = pc.WriteTo(reply, addr)
		}
	}
}

// Close stops the listeners and connections and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	var errs []error
	for _, l := range s.lns {
		errs = append(errs, l.Close())
	}
	for _, pc := range s.pcs {
		errs = append(errs, pc.Close())
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(errs...)
}

// Listen opens TCP and UDP on addr ("host:port"; port 0 picks one for TCP
// and uses the same for UDP) and serves both in the background until ctx
// ends or Close. It returns the TCP address.
func (s *Server) Listen(ctx context.Context, addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("portmapper: %w", err)
	}
	pc, err := net.ListenPacket("udp", l.Addr().String())
	if err != nil {
		l.Close()
		return "", fmt.Errorf("portmapper (udp): %w", err)
	}
	go s.ServeTCP(l)
	go s.ServeUDP(pc)
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	return l.Addr().String(), nil
}
