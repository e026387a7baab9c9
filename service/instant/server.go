package instant

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	billy "github.com/go-git/go-billy/v5"
	nfs "github.com/willscott/go-nfs"

	"github.com/vmvault/vmvault/service/instant/portmap"
)

// RPC program numbers the server answers.
const (
	ProgMount = 100005
	ProgNFS   = 100003
)

// handleLen: session id (16), node index (4), HMAC-SHA256 truncated (16).
const handleLen = 36

// ErrNotAllowed: the client's address is outside the allow list.
var ErrNotAllowed = errors.New("client not in the allow list")

// ServerOptions configure a Server.
type ServerOptions struct {
	// Listen is the NFS (and MOUNT) address, host:port.
	Listen string
	// Portmap is the portmapper's address ("" for none).
	Portmap string
	// Allow lists the client networks that get answers; empty allows
	// loopback only.
	Allow []netip.Prefix
}

// Server serves sessions over NFS v3.
type Server struct {
	opts ServerOptions

	mu       sync.RWMutex
	byExport map[string]*Session
	byHID    map[[16]byte]*Session

	nfsAddr, pmAddr string
	ln              *allowListener
	pm              *portmap.Server
	done            chan struct{}
}

// NewServer returns a server for opts; Start listens.
func NewServer(opts ServerOptions) *Server {
	if len(opts.Allow) == 0 {
		opts.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	return &Server{opts: opts, byExport: map[string]*Session{}, byHID: map[[16]byte]*Session{}}
}

// ParseAllow parses CIDRs ("10.0.0.0/24") or single addresses.
func ParseAllow(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("allow %q: not a CIDR or address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Allowed reports whether addr (a TCP or UDP address) is in the allow list.
func (s *Server) Allowed(addr net.Addr) bool {
	var ap netip.AddrPort
	switch a := addr.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		var err error
		if ap, err = netip.ParseAddrPort(addr.String()); err != nil {
			return false
		}
	}
	ip := ap.Addr().Unmap()
	for _, p := range s.opts.Allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Add serves a session (before or after Start).
func (s *Server) Add(sess *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byExport[sess.Export] = sess
	s.byHID[sess.hid] = sess
}

// Remove stops serving a session: its handles go stale.
func (s *Server) Remove(sess *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byExport, sess.Export)
	delete(s.byHID, sess.hid)
}

// Start listens for NFS and MOUNT (and the portmapper when configured) and
// serves in the background until ctx ends or Close.
func (s *Server) Start(ctx context.Context) error {
	l, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("nfs listen: %w", err)
	}
	s.ln = &allowListener{Listener: l, allow: s.Allowed, conns: map[net.Conn]struct{}{}}
	s.nfsAddr = l.Addr().String()
	if s.opts.Portmap != "" {
		_, portStr, _ := net.SplitHostPort(s.nfsAddr)
		port, _ := strconv.Atoi(portStr)
		p := uint32(port)
		s.pm = portmap.New([]portmap.Mapping{
			{Prog: ProgMount, Vers: 3, Prot: portmap.ProtoTCP, Port: p},
			{Prog: ProgNFS, Vers: 3, Prot: portmap.ProtoTCP, Port: p},
		})
		s.pm.Allow = s.Allowed
		if s.pmAddr, err = s.pm.Listen(ctx, s.opts.Portmap); err != nil {
			l.Close()
			return err
		}
	}
	srv := &nfs.Server{Handler: &handler{s: s}, Context: ctx}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = srv.Serve(s.ln)
	}()
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	return nil
}

// Addr is the NFS server's address; PortmapAddr the portmapper's ("" when none).
func (s *Server) Addr() string        { return s.nfsAddr }
func (s *Server) PortmapAddr() string { return s.pmAddr }

// Close stops listening and drops every connection.
func (s *Server) Close() error {
	var err error
	if s.ln != nil {
		err = s.ln.closeAll()
	}
	if s.pm != nil {
		err = errors.Join(err, s.pm.Close())
	}
	if s.done != nil {
		<-s.done
	}
	return err
}

// allowListener closes connections from outside the allow list at accept
// and tracks the rest so Close can drop them.
type allowListener struct {
	net.Listener
	allow func(net.Addr) bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (l *allowListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.allow(c.RemoteAddr()) {
			c.Close()
			continue
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return nil, net.ErrClosed
		}
		tc := &trackedConn{Conn: &rpcConn{Conn: c}, l: l}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		return tc, nil
	}
}

func (l *allowListener) closeAll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.Listener.Close()
	for c := range l.conns {
		c.(*trackedConn).Conn.Close()
	}
	return err
}

type trackedConn struct {
	net.Conn
	l    *allowListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// handler is go-nfs's view of the server's sessions.
type handler struct{ s *Server }

func (h *handler) Mount(ctx context.Context, conn net.Conn, req nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	if !h.s.Allowed(conn.RemoteAddr()) {
		return nfs.MountStatusErrAcces, nil, nil
	}
	if f := req.Header.Cred.Flavor; f != uint32(nfs.AuthFlavorNull) && f != uint32(nfs.AuthFlavorUnix) {
		return nfs.MountStatusErrAcces, nil, nil
	}
	dir := strings.TrimRight(string(req.Dirpath), "/")
	h.s.mu.RLock()
	sess := h.s.byExport[dir]
	h.s.mu.RUnlock()
	if sess == nil {
		// Not "no such entry": the export paths are secrets, and a wrong
		// one is refused like a forbidden one.
		return nfs.MountStatusErrAcces, nil, nil
	}
	return nfs.MountStatusOk, &exportFS{s: sess}, []nfs.AuthFlavor{nfs.AuthFlavorUnix, nfs.AuthFlavorNull}
}

// Change: only the times of the writable files change (chmod and chown
// are refused).
func (h *handler) Change(f billy.Filesystem) billy.Change {
	if ef, ok := f.(*exportFS); ok {
		return change{s: ef.s}
	}
	return nil
}

func (h *handler) FSStat(_ context.Context, f billy.Filesystem, st *nfs.FSStat) error {
	ef, ok := f.(*exportFS)
	if !ok {
		return nil
	}
	used, limit := ef.s.Overlays()
	used += ef.s.scratch.used.Load()
	limit += ef.s.scratch.limit
	st.TotalSize = uint64(limit)
	st.FreeSize = uint64(max(limit-used, 0))
	st.AvailableSize = st.FreeSize
	st.TotalFiles = uint64(len(ef.s.nodes))
	return nil
}

func mac(key []byte, hid [16]byte, idx uint32) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(hid[:])
	m.Write(binary.BigEndian.AppendUint32(nil, idx))
	return m.Sum(nil)[:16]
}

func (h *handler) ToHandle(f billy.Filesystem, path []string) []byte {
	ef, ok := f.(*exportFS)
	if !ok {
		return nil
	}
	name := ef.Join(path...)
	var idx uint32
	if n := ef.s.lookup(name); n != nil {
		idx = n.idx
	} else if i, ok := ef.s.scratch.lookup(strings.TrimPrefix(name, "/")); ok {
		idx = i
	} else {
		return nil
	}
	b := make([]byte, 0, handleLen)
	b = append(b, ef.s.hid[:]...)
	b = binary.BigEndian.AppendUint32(b, idx)
	return append(b, mac(ef.s.key, ef.s.hid, idx)...)
}

var errStale = &nfs.NFSStatusError{NFSStatus: nfs.NFSStatusStale}

func (h *handler) FromHandle(fh []byte) (billy.Filesystem, []string, error) {
	if len(fh) != handleLen {
		return nil, nil, errStale
	}
	var hid [16]byte
	copy(hid[:], fh)
	h.s.mu.RLock()
	sess := h.s.byHID[hid]
	h.s.mu.RUnlock()
	if sess == nil {
		return nil, nil, errStale
	}
	idx := binary.BigEndian.Uint32(fh[16:])
	if !hmac.Equal(fh[20:], mac(sess.key, hid, idx)) {
		return nil, nil, errStale
	}
	if idx&scratchBit != 0 {
		name, ok := sess.scratch.nameOf(idx)
		if !ok {
			return nil, nil, errStale
		}
		return &exportFS{s: sess}, []string{name}, nil
	}
	if int(idx) >= len(sess.nodes) {
		return nil, nil, errStale
	}
	if idx == 0 {
		return &exportFS{s: sess}, []string{}, nil
	}
	return &exportFS{s: sess}, []string{sess.nodes[idx].name}, nil
}

func (h *handler) InvalidateHandle(billy.Filesystem, []byte) error { return nil }

// HandleLimit: handles are stateless (HMAC), so any number stays valid.
func (h *handler) HandleLimit() int { return 1 << 20 }
