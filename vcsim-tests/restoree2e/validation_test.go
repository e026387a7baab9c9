package restoree2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// TestValidationChangesNothing: every bad request fails with a clear,
// typed error before anything is created: same VMs, same datastore files,
// the source VM's disks untouched.
func TestValidationChangesNothing(t *testing.T) {
	l := startLab(t, lab.Options{})
	c := connect(t, l)
	r := newRepo(t)
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
		sameBytes(t, "source disk", diskByKey(t, l, src.Name, d.Key), imgs[i])
	}

	// A damaged repository: every pack file has a flipped byte in its middle.
	t.Run("damaged point", func(t *testing.T) {
		dir := r.Dir()
		r2 := newRepo(t)
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
