package restoree2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// setFree sets a lab datastore's reported free space.
func setFree(t *testing.T, l *lab.Lab, name string, free int64) {
	t.Helper()
	m := l.Model().Map()
	sctx := &simulator.Context{Context: context.Background(), Map: m}
	for _, e := range m.All("Datastore") {
		ds := e.(*simulator.Datastore)
		if ds.Name == name {
			m.WithLock(sctx, ds, func() { ds.Summary.FreeSpace = free })
			return
		}
	}
	t.Fatalf("no datastore %s", name)
}

// TestValidationChangesNothing: every bad request fails with a clear,
// typed error before anything is created: same VMs, same datastore files,
// the source VM's disks untouched.
func TestValidationChangesNothing(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, imgs := makeSource(t, l, c, "src-val", 4)
	if err := c.PowerOn(ctx, src.VMRef); err != nil {
		t.Fatal(err)
	}
	pt := backUp(t, c, r, src.Name)

	// A point whose configuration blob is not a VM configuration, and one
	// with none (an image backup).
	commit := func(cfg []byte) string {
		s, err := r.NewSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Commit(ctx, repository.NewPoint{VM: repository.VMIdentity{Name: "odd"}, Time: time.Now(), Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	garbage := commit([]byte(`{"version":7,"name":"odd"}`))
	noConfig := commit(nil)
	// The real point's configuration, committed again as a partial point.
	good, err := r.Point(ctx, pt)
	if err != nil {
		t.Fatal(err)
	}
	cfgBlob, err := r.LoadConfigBlob(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := s.Commit(ctx, repository.NewPoint{VM: good.VM, Time: time.Now(), Config: cfgBlob, Disks: good.Disks, Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	partial := pp.ID

	for _, tc := range []struct {
		name string
		req  restore.VMRequest
		want error
		msg  string
	}{
		{"unknown point", restore.VMRequest{RestorePoint: "ffffffff"}, restore.ErrTargetNotFound, "ffffffff"},
		{"no point", restore.VMRequest{}, restore.ErrInvalidRequest, "no restore point"},
		{"bad configuration", restore.VMRequest{RestorePoint: garbage, Name: "x"}, restore.ErrPointUnusable, "version 7"},
		{"no configuration", restore.VMRequest{RestorePoint: noConfig, Name: "x"}, restore.ErrPointUnusable, "no VM configuration"},
		{"partial point", restore.VMRequest{RestorePoint: partial, Name: "x"}, restore.ErrPointUnusable, "partial"},
		{"bad transport", restore.VMRequest{RestorePoint: pt, Name: "x", Transport: "ftp"}, restore.ErrInvalidRequest, "ftp"},
		{"unknown datastore", restore.VMRequest{RestorePoint: pt, Name: "x", Datastore: "NoSuchDS"}, restore.ErrTargetNotFound, "NoSuchDS"},
		{"unknown disk datastore", restore.VMRequest{RestorePoint: pt, Name: "x", DiskDatastores: map[int]string{1: "NoSuchDS"}}, restore.ErrTargetNotFound, "NoSuchDS"},
		{"unknown network", restore.VMRequest{RestorePoint: pt, Name: "x", NetworkMap: map[string]string{"VM Network": "nonet"}}, restore.ErrTargetNotFound, "nonet"},
		{"unknown folder", restore.VMRequest{RestorePoint: pt, Name: "x", Folder: "/DC0/vm/nofolder"}, restore.ErrTargetNotFound, "nofolder"},
		{"unknown host", restore.VMRequest{RestorePoint: pt, Name: "x", Host: "nohost"}, restore.ErrTargetNotFound, "nohost"},
		{"unknown cluster", restore.VMRequest{RestorePoint: pt, Name: "x", Cluster: "nocluster"}, restore.ErrTargetNotFound, "nocluster"},
		{"unknown pool", restore.VMRequest{RestorePoint: pt, Name: "x", ResourcePool: "nopool"}, restore.ErrTargetNotFound, "nopool"},
		{"unknown datacenter", restore.VMRequest{RestorePoint: pt, Name: "x", Datacenter: "DC9"}, restore.ErrTargetNotFound, "DC9"},
		{"host and cluster", restore.VMRequest{RestorePoint: pt, Name: "x", Host: "DC0_H0", Cluster: "DC0_C0"}, restore.ErrInvalidRequest, "at most one"},
		{"name taken", restore.VMRequest{RestorePoint: pt, Name: "DC0_H0_VM0"}, restore.ErrNameInUse, "DC0_H0_VM0"},
		{"original name taken", restore.VMRequest{RestorePoint: pt}, restore.ErrNameInUse, "src-val"},
		{"powered on without the flag", restore.VMRequest{RestorePoint: pt, Overwrite: true}, restore.ErrPoweredOn, "powered"},
		{"overwrite and rehearsal", restore.VMRequest{RestorePoint: pt, Overwrite: true, Rehearsal: true}, restore.ErrInvalidRequest, "exclude"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vms, files := vmNames(t, c), dsFiles(t, l, ds0)
			_, err := newEngine(r, c).RestoreVM(ctx, tc.req)
			t.Logf("%v", err)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
			if got := vmNames(t, c); strings.Join(got, ",") != strings.Join(vms, ",") {
				t.Errorf("VMs changed: %v -> %v", vms, got)
			}
			if got := dsFiles(t, l, ds0); strings.Join(got, ",") != strings.Join(files, ",") {
				t.Errorf("datastore files changed: %v -> %v", files, got)
			}
		})
	}
	for i, d := range src.Disks {
		labtest.SameBytes(t, "source disk", diskByKey(t, l, src.Name, d.Key), imgs[i])
	}

	// A datastore without room for the disks (vcsim reports 1 TB free; the
	// lab's model is told otherwise).
	t.Run("no space", func(t *testing.T) {
		setFree(t, l, ds0, 3<<20)
		defer setFree(t, l, ds0, 1<<40)
		vms, files := vmNames(t, c), dsFiles(t, l, ds0)
		_, err := newEngine(r, c).RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Name: "x"})
		if !errors.Is(err, restore.ErrNoSpace) {
			t.Fatalf("restore: %v, want ErrNoSpace", err)
		}
		_, err = newEngine(r, c).AttachDisk(ctx, restore.AttachRequest{RestorePoint: pt, Disk: 0, VM: "DC0_H0_VM0", Datastore: ds0})
		if !errors.Is(err, restore.ErrNoSpace) {
			t.Fatalf("attach: %v, want ErrNoSpace", err)
		}
		if got := vmNames(t, c); strings.Join(got, ",") != strings.Join(vms, ",") {
			t.Errorf("VMs changed: %v -> %v", vms, got)
		}
		if got := dsFiles(t, l, ds0); strings.Join(got, ",") != strings.Join(files, ",") {
			t.Errorf("datastore files changed: %v -> %v", files, got)
		}
	})

	// Over an original whose disks no longer match the point.
	t.Run("layout changed", func(t *testing.T) {
		if err := c.PowerOff(ctx, src.VMRef); err != nil {
			t.Fatal(err)
		}
		if err := c.DetachDisk(ctx, src.VMRef, src.Disks[2].Key); err != nil {
			t.Fatal(err)
		}
		_, err := newEngine(r, c).RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Overwrite: true})
		if !errors.Is(err, restore.ErrLayoutChanged) {
			t.Fatalf("overwrite: %v, want ErrLayoutChanged", err)
		}
		for i, d := range src.Disks[:2] {
			labtest.SameBytes(t, "source disk", diskByKey(t, l, src.Name, d.Key), imgs[i])
		}
	})

	// A damaged repository: every pack file has a flipped byte in its middle.
	t.Run("damaged point", func(t *testing.T) {
		dir := r.Dir()
		r2 := labtest.Repo(t)
		pt2 := backUp(t, c, r2, src.Name)
		_ = dir
		n := 0
		_ = filepath.Walk(filepath.Join(r2.Dir(), "packs"), func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() || fi.Size() < 64 {
				return err
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			b := make([]byte, fi.Size())
			if _, err := f.ReadAt(b, 0); err != nil {
				return err
			}
			for i := int64(32); i < fi.Size()-32; i += 97 {
				b[i] ^= 0x5a
			}
			n++
			_, err = f.WriteAt(b, 0)
			return err
		})
		if n == 0 {
			t.Fatal("no pack files found")
		}
		vms := vmNames(t, c)
		_, err := newEngine(r2, c).RestoreVM(ctx, restore.VMRequest{RestorePoint: pt2, Name: "from-damaged"})
		if !errors.Is(err, restore.ErrPointUnusable) {
			t.Fatalf("damaged point: %v, want ErrPointUnusable", err)
		}
		if got := vmNames(t, c); strings.Join(got, ",") != strings.Join(vms, ",") {
			t.Errorf("VMs changed: %v -> %v", vms, got)
		}
	})
}
