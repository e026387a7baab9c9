package restoree2e

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// TestRestoreVMThatHadSnapshots: a VM carrying an administrator's snapshot
// (with writes after it) is backed up and restored to a new VM. The
// restored disks are byte-identical to the source's state at backup time,
// the result warns that the snapshot tree is not rebuilt, the new VM has no
// snapshot and the source keeps the administrator's.
func TestRestoreVMThatHadSnapshots(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	src, _ := makeSource(t, l, c, "src-snap", 11)
	ctx := context.Background()
	ovm := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: src.MoRef})
	task, err := ovm.CreateSnapshot(ctx, "admin-keep", "", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	if err := l.WriteDisk(src.Name, 0, 1<<20, randomData(rng, 256<<10)); err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i, d := range src.Disks {
		b, err := l.ReadDisk(src.Name, i, 0, int(d.CapacityBytes))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b)
	}
	pt := backUp(t, c, r, src.Name)

	res, err := newEngine(r, c).RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Name: "restored-snap", Transport: restore.TransportPUT})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	warned := false
	for _, w := range res.Warnings {
		warned = warned || strings.Contains(w, "no snapshot tree")
	}
	if !warned {
		t.Errorf("restore warnings %q do not say the snapshot tree is gone", res.Warnings)
	}
	got, err := c.VM(ctx, res.VM)
	if err != nil {
		t.Fatal(err)
	}
	if got.HasSnapshots {
		t.Error("the restored VM has snapshots")
	}
	for i, sd := range src.Disks {
		for _, td := range got.Disks {
			if td.ControllerType == sd.ControllerType && td.Bus == sd.Bus && td.Unit == sd.Unit {
				labtest.SameBytes(t, "restored disk", diskByKey(t, l, "restored-snap", td.Key), want[i])
			}
		}
	}
	names, err := l.Snapshots(src.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "admin-keep" {
		t.Errorf("source snapshots now %v, want only admin-keep", names)
	}
}
