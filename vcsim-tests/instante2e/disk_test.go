package instante2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/service/instantvm"
)

// TestInstantDiskRecovery: the point's disk is attached from the export
// to an existing VM (by instance UUID, as the API names it), moved to
// production with the VM's other disks left where they are, or detached
// again by stop, the VM untouched.
func TestInstantDiskRecovery(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := e.manager(t)
	const target = "DC0_H0_VM0"
	tv, err := e.c.FindVM(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	before := len(tv.Disks)

	t.Run("migrate", func(t *testing.T) {
		rec, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, TargetVM: tv.InstanceUUID}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rec.VM.MoRef != tv.MoRef || len(rec.Attached) != 1 {
			t.Fatalf("record %+v", rec)
		}
		files := diskFiles(t, e, tv.MoRef)
		if len(files) != before+1 || !strings.HasPrefix(files[len(files)-1], "["+rec.NFS+"] ") {
			t.Fatalf("disks %v", files)
		}
		done, err := m.Migrate(ctx, rec.ID, ds0, nil)
		if err != nil || done.State != instantvm.StateDone {
			t.Fatalf("migrate: %+v %v", done, err)
		}
		files = diskFiles(t, e, tv.MoRef)
		if len(files) != before+1 {
			t.Fatalf("disks after the move %v", files)
		}
		moved := files[len(files)-1]
		if !strings.HasPrefix(moved, "["+ds0+"] ") {
			t.Fatalf("the attached disk is at %s", moved)
		}
		dir, _ := e.l.DatastoreDir(ds0)
		got, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(strings.TrimPrefix(moved, "["+ds0+"] "), ".vmdk")+"-flat.vmdk"))
		if err != nil || !bytes.Equal(got, e.img) {
			t.Fatalf("moved disk differs from the point (%v)", err)
		}
		if n := e.l.NASDatastores(); len(n) != 0 {
			t.Fatalf("left mounted: %v", n)
		}
	})
	t.Run("stop", func(t *testing.T) {
		now := len(diskFiles(t, e, tv.MoRef))
		rec, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, TargetVM: target}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(diskFiles(t, e, tv.MoRef)); got != now+1 {
			t.Fatalf("%d disks, want %d", got, now+1)
		}
		st, err := m.Stop(ctx, rec.ID)
		if err != nil || st.State != instantvm.StateStopped {
			t.Fatalf("stop: %+v %v", st, err)
		}
		if got := len(diskFiles(t, e, tv.MoRef)); got != now {
			t.Fatalf("%d disks after stop, want %d", got, now)
		}
		if _, err := e.c.VM(ctx, tv.VMRef); err != nil {
			t.Fatalf("the target VM is gone: %v", err)
		}
		if n := e.l.NASDatastores(); len(n) != 0 {
			t.Fatalf("left mounted: %v", n)
		}
	})
}
