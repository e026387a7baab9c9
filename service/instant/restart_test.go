package instant

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/vmvault/vmvault/repository"
)

// TestNFSRestart: a client writes over NFS, the process "crashes" (server
// and session dropped without Close), a new process serves the same
// directory: the client's old file handle still works (an ESXi datastore
// survives the appliance's restart) and reads what it wrote.
func TestNFSRestart(t *testing.T) {
	r := repository.TestRepository(t)
	img := image(t, 4<<20, 21)
	src, _ := os.ReadFile(img)
	p := backupImages(t, r, "app", nil, img)
	dir := filepath.Join(t.TempDir(), "session")
	serve := func() (*Session, *Server, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := Open(ctx, r, Options{Point: p.ID, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		srv := NewServer(ServerOptions{Listen: "127.0.0.1:0"})
		srv.Add(s)
		if err := srv.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return s, srv, cancel
	}
	s1, srv1, cancel1 := serve()
	v, err := mount(t, srv1, s1.Export)
	if err != nil {
		t.Fatal(err)
	}
	_, fh, err := v.Lookup("app-flat.vmdk")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := v.OpenFile("app-flat.vmdk", 0o644)
	w.Seek(2<<20+17, 0)
	if _, err := w.Write([]byte("survives a crash")); err != nil {
		t.Fatal(err)
	}
	// The crash: connections cut, nothing closed or compacted.
	cancel1()
	srv1.Close()
	for _, n := range s1.nodes {
		if n.disk != nil {
			n.disk.base.Close()
		}
	}

	s2, srv2, cancel2 := serve()
	defer func() { cancel2(); srv2.Close(); s2.Close() }()
	if s2.Export != s1.Export {
		t.Fatal("export path changed")
	}
	c, err := nfsc.DialServiceAtPort("127.0.0.1", port(t, srv2.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The root handle the first process's MOUNT gave, used without a new
	// MOUNT (as a client that never noticed the restart).
	rootFH := (&handler{s: srv1}).ToHandle(&exportFS{s: s1}, nil)
	v2, err := nfsc.NewTargetWithClient(c, rpc.NewAuthUnix("x", 0, 0).Auth(), rootFH, s1.Export, time.Second)
	if err != nil {
		t.Fatalf("the old root handle after a restart: %v", err)
	}
	_, fh2, err := v2.Lookup("app-flat.vmdk")
	if err != nil || !bytes.Equal(fh2, fh) {
		t.Fatalf("file handle changed across a restart: %x, %x (%v)", fh, fh2, err)
	}
	f, err := v2.Open("app-flat.vmdk")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	if _, err := f.ReadAt(got, 2<<20); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(src[2<<20 : 2<<20+64])
	copy(want[17:], "survives a crash")
	if !bytes.Equal(got, want) {
		t.Fatalf("after a restart read %q", got)
	}
}

// TestHandlesStayInTheirSession: two points on one server; a handle of
// one, re-labelled with the other's (public) session id, is stale.
func TestHandlesStayInTheirSession(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := repository.TestRepository(t)
	pa := backupImages(t, r, "a", nil, image(t, 1<<20, 31))
	pb := backupImages(t, r, "b", nil, image(t, 1<<20, 32))
	sa, err := Open(ctx, r, Options{Point: pa.ID, Dir: filepath.Join(t.TempDir(), "a"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := Open(ctx, r, Options{Point: pb.ID, Dir: filepath.Join(t.TempDir(), "b"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	srv := NewServer(ServerOptions{Listen: "127.0.0.1:0"})
	srv.Add(sa)
	srv.Add(sb)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	va, err := mount(t, srv, sa.Export)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := mount(t, srv, sb.Export)
	if err != nil {
		t.Fatal(err)
	}
	_, fha, _ := va.Lookup("a-flat.vmdk")
	_, fhb, _ := vb.Lookup("b-flat.vmdk")
	if len(fha) != handleLen || len(fhb) != handleLen || bytes.Equal(fha[:16], fhb[:16]) {
		t.Fatalf("handles %x %x", fha, fhb)
	}
	forged := append(bytes.Clone(fhb[:16]), fha[16:]...)
	c, err := nfsc.DialServiceAtPort("127.0.0.1", port(t, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := nfsc.NewTargetWithClient(c, rpc.NewAuthUnix("x", 0, 0).Auth(), forged, "/", time.Second); err == nil {
		t.Fatal("a handle of session a re-labelled as b's was accepted")
	}
	srv.Remove(sa)
	if _, err := nfsc.NewTargetWithClient(c, rpc.NewAuthUnix("x", 0, 0).Auth(), fha, "/", time.Second); err == nil {
		t.Fatal("a removed session's handle still works")
	}
}
