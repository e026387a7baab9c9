package instant

import (
	"testing"

	nfsc "github.com/willscott/go-nfs-client/nfs"
)

// TestSetattr: a client may set the times of a -flat.vmdk (and its size
// to the size it has), nothing else; a write moves the mtime.
func TestSetattr(t *testing.T) {
	s, srv, _, _ := exported(t, nil, 0)
	v, err := mount(t, srv, s.Export)
	if err != nil {
		t.Fatal(err)
	}
	at := nfsc.SetTime{SetIt: 2, Time: nfsc.NFS3Time{Seconds: 1700000000}}
	if err := v.Setattr("web01-flat.vmdk", nfsc.Sattr3{Mtime: at}); err != nil {
		t.Fatalf("set the flat file's mtime: %v", err)
	}
	a, err := v.Getattr("web01-flat.vmdk")
	if err != nil || a.ModTime().Unix() != 1700000000 {
		t.Fatalf("mtime %v (%v)", a.ModTime(), err)
	}
	w, _ := v.OpenFile("web01-flat.vmdk", 0o644)
	w.Write([]byte("x"))
	if a, _ := v.Getattr("web01-flat.vmdk"); a.ModTime().Unix() == 1700000000 {
		t.Fatal("a write left the mtime")
	}
	if err := v.Setattr("web01.vmx", nfsc.Sattr3{Mtime: at}); err == nil {
		t.Fatal("set the .vmx's mtime")
	}
	if err := v.Setattr("web01-flat.vmdk", nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: 0o777}}); err == nil {
		t.Fatal("chmod accepted")
	}
	if err := v.Setattr("web01-flat.vmdk", nfsc.Sattr3{Size: nfsc.SetSize{SetIt: true, Size: 4096}}); err == nil {
		t.Fatal("truncate accepted")
	}
	if err := v.Setattr("web01-flat.vmdk", nfsc.Sattr3{Size: nfsc.SetSize{SetIt: true, Size: uint64(s.lookup("web01-flat.vmdk").size)}}); err != nil {
		t.Fatalf("size to its size: %v", err)
	}
}
