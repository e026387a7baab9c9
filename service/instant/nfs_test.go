package instant

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/instant/portmap"
)

// exported backs an image up, opens its session and serves it on
// loopback; it returns the session, the server and the image's bytes.
func exported(t *testing.T, allow []netip.Prefix, limit int64) (*Session, *Server, []byte, *repository.Repository) {
	t.Helper()
	return exportOpts(t, allow, limit, "127.0.0.1:0")
}

func exportedAt(t *testing.T, portmap string) (*Session, *Server, []byte, *repository.Repository) {
	t.Helper()
	return exportOpts(t, nil, 0, portmap)
}

func exportOpts(t *testing.T, allow []netip.Prefix, limit int64, pm string) (*Session, *Server, []byte, *repository.Repository) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := repository.TestRepository(t)
	img := image(t, 8<<20, 11)
	src, _ := os.ReadFile(img)
	p := backupImages(t, r, "web01", testConfig("web01", 1), img)
	s, err := Open(ctx, r, Options{Point: p.ID, Dir: filepath.Join(t.TempDir(), "session"), OverlayLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerOptions{Listen: "127.0.0.1:0", Portmap: pm, Allow: allow})
	srv.Add(s)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		srv.Close()
		s.Close()
	})
	return s, srv, src, r
}

func port(t testing.TB, addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mount(t *testing.T, srv *Server, export string) (*nfsc.Target, error) {
	t.Helper()
	c, err := nfsc.DialServiceAtPort("127.0.0.1", port(t, srv.Addr()))
	if err != nil {
		return nil, err
	}
	t.Cleanup(c.Close)
	m := &nfsc.Mount{Client: c}
	return m.Mount(export, rpc.NewAuthUnix("vmvault-test", 0, 0).Auth())
}

func diskDigest(t testing.TB, r *repository.Repository, point string) [32]byte {
	t.Helper()
	dr, err := r.OpenDisk(context.Background(), point, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	h := sha256.New()
	if _, err := dr.StreamTo(context.Background(), h, nil); err != nil {
		t.Fatal(err)
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

func TestGoClientReadsAndWrites(t *testing.T) {
	s, srv, src, r := exported(t, nil, 0)
	before := diskDigest(t, r, s.Point.ID)
	v, err := mount(t, srv, s.Export)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := v.ReadDirPlus("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != "." && e.Name() != ".." {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "web01-flat.vmdk web01.vmdk web01.vmx" {
		t.Fatalf("listing %v", names)
	}
	f, err := v.Open("web01-flat.vmdk")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	for off := 0; off < len(got); {
		n, err := f.ReadAt(got[off:min(off+1<<20, len(got))], int64(off))
		if n == 0 && err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		off += n
	}
	if !bytes.Equal(got, src) {
		t.Fatal("flat file read over NFS differs from the image")
	}
	// Write across a hole and data, read it back.
	w, err := v.OpenFile("web01-flat.vmdk", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("vmvault!"), 40000)
	w.Seek(3<<20-1000, 0)
	if _, err := w.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // COMMIT
		t.Fatal(err)
	}
	back := make([]byte, len(payload)+2000)
	n, err := f.ReadAt(back, 3<<20-2000)
	if n != len(back) {
		t.Fatalf("read back: %d, %v", n, err)
	}
	if !bytes.Equal(back[1000:1000+len(payload)], payload) || !bytes.Equal(back[:1000], src[3<<20-2000:3<<20-1000]) {
		t.Fatal("read back differs")
	}
	// The descriptor is read-only.
	d, err := v.OpenFile("web01.vmdk", 0o644)
	if err == nil {
		if _, err = d.Write([]byte("x")); err == nil {
			t.Fatal("wrote into the descriptor")
		}
	}
	if _, err := v.Create("web01.vmx", 0o644); err == nil {
		t.Fatal("re-created the point's .vmx")
	}
	if err := v.Remove("web01.vmx"); err == nil {
		t.Fatal("removed a file")
	}
	// Other names are scratch files (what ESXi writes beside the disks).
	if _, err := v.Create(".lck-0001", 0o644); err != nil {
		t.Fatalf("create a scratch file: %v", err)
	}
	if err := v.Remove(".lck-0001"); err != nil {
		t.Fatalf("remove a scratch file: %v", err)
	}
	// The repository is unchanged.
	if diskDigest(t, r, s.Point.ID) != before {
		t.Fatal("the repository's disk changed")
	}
	if sha256.Sum256(src) != before {
		t.Fatal("repository disk differs from the image")
	}
}

func TestClientOutsideAllowListRefused(t *testing.T) {
	s, srv, _, _ := exported(t, []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, 0)
	// NFS, MOUNT and the portmapper (TCP and UDP) hang up or stay silent.
	for _, addr := range []string{srv.Addr(), srv.PortmapAddr()} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		msg := rawCall(1, ProgMount, 3, 1, 1, uint32(len(s.Export)))
		msg = append(msg, []byte(s.Export)...)
		msg = append(msg, make([]byte, (4-len(s.Export)%4)%4)...)
		c.Write(append(u32s(nil, uint32(len(msg))|1<<31), msg...))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if rec, err := portmap.ReadRecord(c, 1<<16); err == nil {
			t.Errorf("%s answered a client outside the allow list: %x", addr, rec)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s did not hang up on a client outside the allow list", addr)
		}
		c.Close()
	}
	u, err := net.Dial("udp", srv.PortmapAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write(rawCall(2, portmap.Program, 2, portmap.ProcGetPort, 1, ProgNFS, 3, portmap.ProtoTCP, 0))
	u.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := u.Read(make([]byte, 100)); err == nil {
		t.Error("the portmapper answered a UDP client outside the allow list")
	}
}

func TestWrongExportAndForgedHandles(t *testing.T) {
	s, srv, _, _ := exported(t, nil, 0)
	if _, err := mount(t, srv, "/vmvault/guess"); err == nil || !strings.Contains(err.Error(), "ACCES") {
		t.Fatalf("wrong export path: %v", err)
	}
	v, err := mount(t, srv, s.Export)
	if err != nil {
		t.Fatal(err)
	}
	_, fh, err := v.Lookup("web01-flat.vmdk")
	if err != nil {
		t.Fatal(err)
	}
	c, err := nfsc.DialServiceAtPort("127.0.0.1", port(t, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	auth := rpc.NewAuthUnix("x", 0, 0).Auth()
	for name, forged := range map[string][]byte{
		"other index":   func() []byte { b := bytes.Clone(fh); b[19] ^= 3; return b }(),
		"other session": func() []byte { b := bytes.Clone(fh); b[0] ^= 1; return b }(),
		"bad mac":       func() []byte { b := bytes.Clone(fh); b[35] ^= 1; return b }(),
		"short":         fh[:20],
	} {
		if _, err := nfsc.NewTargetWithClient(c, auth, forged, "/", time.Second); err == nil {
			t.Errorf("%s: forged handle accepted", name)
		}
	}
	// A second session on the same server: its handles are not the first's.
	if _, err := nfsc.NewTargetWithClient(c, auth, fh, "/", time.Second); err != nil {
		t.Fatalf("genuine handle refused: %v", err)
	}
}

func TestNFSNoSpace(t *testing.T) {
	s, srv, src, _ := exported(t, nil, 256<<10)
	v, err := mount(t, srv, s.Export)
	if err != nil {
		t.Fatal(err)
	}
	w, err := v.OpenFile("web01-flat.vmdk", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 200<<10)); err != nil {
		t.Fatal(err)
	}
	w.Seek(4<<20, 0)
	_, err = w.Write(make([]byte, 100<<10))
	if err == nil || !strings.Contains(err.Error(), "NOSPC") {
		t.Fatalf("write past the overlay's cap: %v", err)
	}
	got := make([]byte, 200<<10)
	f, _ := v.Open("web01-flat.vmdk")
	n, _ := f.ReadAt(got, 4<<20)
	if n != len(got) || !bytes.Equal(got, src[4<<20:4<<20+200<<10]) {
		t.Fatal("the refused write changed the disk")
	}
}
