package backupe2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// userSnapshot takes a snapshot as the administrator would.
func userSnapshot(t *testing.T, l *lab.Lab, vm, name string) {
	t.Helper()
	ctx := context.Background()
	task, err := adminVM(t, l, vm).CreateSnapshot(ctx, name, "taken by the administrator", false, false)
	must(t, err)
	must(t, task.Wait(ctx))
}

// userSnapshots are the VM's snapshots that are not vmvault's (id and name).
func userSnapshots(t *testing.T, c *vsphere.Client, vm string) (user []string, ours int) {
	t.Helper()
	v, err := c.FindVM(context.Background(), vm)
	must(t, err)
	list, err := c.Snapshots(context.Background(), v.VMRef)
	must(t, err)
	for _, s := range list {
		if s.Ours {
			ours++
			continue
		}
		user = append(user, s.MoRef+"="+s.Name)
	}
	return user, ours
}

func pointConfig(t *testing.T, r *repository.Repository, id string) (repository.Point, backup.VMConfig) {
	t.Helper()
	p, err := r.Point(context.Background(), id)
	must(t, err)
	blob, err := r.LoadBlob(context.Background(), p.ConfigID)
	must(t, err)
	cfg, err := backup.DecodeVMConfig(blob)
	must(t, err)
	return p, cfg
}

// TestUserSnapshotChainBackedUp: a VM carrying two snapshots of the
// administrator's is backed up (it used to be refused). Our snapshot sits
// on top of the chain; the base flat file holds only the state of the first
// user snapshot, so the engine reads the consolidated NFC export, keeping
// only the CBT extents. The point is byte-identical to the disk at our
// snapshot, the second backup is incremental, the user's snapshots survive
// with their ids and names, none of ours is left, and the point says the
// snapshot tree is not part of it.
func TestUserSnapshotChainBackedUp(t *testing.T) {
	const size = 8 << 20
	l := labtest.Start(t, lab.Options{DiskCapacity: size})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r)
	const vm = "DC0_H0_VM1"
	rng := rand.New(rand.NewPCG(7, 8))

	write(t, l, vm, 0, 0, randomData(rng, 1<<20))
	write(t, l, vm, 0, 6<<20, randomData(rng, 512<<10))
	first := run(t, e, vm) // no user snapshot yet: CBT on, datastore read
	labtest.SameBytes(t, "before the user's snapshots", labtest.PointDisk(t, r, first.RestorePoint, 0), diskImage(t, l, vm, 0))

	write(t, l, vm, 0, 2<<20, randomData(rng, 256<<10))
	userSnapshot(t, l, vm, "before-upgrade")
	write(t, l, vm, 0, 3<<20, randomData(rng, 128<<10))
	userSnapshot(t, l, vm, "after-upgrade")
	write(t, l, vm, 0, 100<<10, randomData(rng, 64<<10))
	userBefore, _ := userSnapshots(t, c, vm)
	if len(userBefore) != 2 {
		t.Fatalf("user snapshots %v", userBefore)
	}

	want := diskImage(t, l, vm, 0)
	base, err := l.ReadBase(vm, 0, 0, size)
	must(t, err)
	if bytes.Equal(base, want) {
		t.Fatal("lab: the base flat file already shows the current state; the chain is not emulated")
	}
	gets := l.NFCGets()
	res := run(t, e, vm)
	labtest.SameBytes(t, "backup over a snapshot chain", labtest.PointDisk(t, r, res.RestorePoint, 0), want)
	if d := res.Disks[0]; d.Reader != backup.ReaderNFC || d.Mode != backup.ModeIncremental {
		t.Errorf("disk read by %q in mode %q (%s), want nfc incremental", d.Reader, d.Mode, d.Reason)
	}
	if l.NFCGets() == gets {
		t.Error("no NFC export was served")
	}
	if !hasWarning(res.Warnings, "snapshots of its own") {
		t.Errorf("warnings %q do not mention the user's snapshots", res.Warnings)
	}
	p, _ := pointConfig(t, r, res.RestorePoint)
	if p.Tags["user_snapshots"] != "true" || p.Tags[fmt.Sprintf("disk.%d.reader", res.Disks[0].Key)] != backup.ReaderNFC {
		t.Errorf("point tags %v", p.Tags)
	}
	userAfter, ours := userSnapshots(t, c, vm)
	if !slices.Equal(userAfter, userBefore) || ours != 0 {
		t.Fatalf("snapshots after the backup: user %v (before %v), ours %d", userAfter, userBefore, ours)
	}
	// The administrator's chain still holds its data: the guest sees the
	// same disk after our snapshot was consolidated away.
	labtest.SameBytes(t, "guest view after our snapshot went", diskImage(t, l, vm, 0), want)

	write(t, l, vm, 0, 5<<20, randomData(rng, 192<<10))
	want = diskImage(t, l, vm, 0)
	res = run(t, e, vm)
	labtest.SameBytes(t, "incremental over a snapshot chain", labtest.PointDisk(t, r, res.RestorePoint, 0), want)
	if d := res.Disks[0]; d.Mode != backup.ModeIncremental || d.BytesRead > 512<<10 {
		t.Errorf("second backup: mode %s, read %d bytes for 192 KiB of writes", d.Mode, d.BytesRead)
	}
	if u, ours := userSnapshots(t, c, vm); !slices.Equal(u, userBefore) || ours != 0 {
		t.Fatalf("snapshots after the second backup: user %v, ours %d", u, ours)
	}
	checkRepo(t, r)
}

// TestUnservedDiskGoesThroughNFC: the datastore file service answers 403
// or 404 for one of two disks. That disk is read through NFC export (the
// other stays on range reads), the point is byte-identical, and the next
// backup of the same disk is still incremental: CBT decides what is kept
// from the stream.
func TestUnservedDiskGoesThroughNFC(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			const size = 4 << 20
			l := labtest.Start(t, lab.Options{DiskCapacity: size})
			c := connect(t, l)
			r := labtest.Repo(t)
			e := newEngine(t, c, r)
			const vm = "DC0_H0_VM0"
			addDisk(t, l, vm, size)
			rng := rand.New(rand.NewPCG(uint64(status), 1))
			write(t, l, vm, 0, 0, randomData(rng, 512<<10))
			write(t, l, vm, 1, 1<<20, randomData(rng, 1<<20))
			info, err := l.Disk(vm, 1)
			must(t, err)
			l.InjectReadFault(lab.ReadFault{PathContains: filepath.Base(info.FlatPath), Status: status, Times: 1 << 20})

			for round := range 2 {
				want0, want1 := diskImage(t, l, vm, 0), diskImage(t, l, vm, 1)
				res := run(t, e, vm)
				labtest.SameBytes(t, fmt.Sprintf("round %d disk 0", round), labtest.PointDisk(t, r, res.RestorePoint, 0), want0)
				labtest.SameBytes(t, fmt.Sprintf("round %d disk 1", round), labtest.PointDisk(t, r, res.RestorePoint, 1), want1)
				if res.Disks[0].Reader != backup.ReaderDatastore || res.Disks[1].Reader != backup.ReaderNFC {
					t.Errorf("round %d: readers %q, %q; want datastore, nfc", round, res.Disks[0].Reader, res.Disks[1].Reader)
				}
				if round == 1 && (res.Disks[1].Mode != backup.ModeIncremental || res.Disks[1].BytesRead > 256<<10) {
					t.Errorf("round 1: NFC disk mode %s read %d bytes for 64 KiB of writes", res.Disks[1].Mode, res.Disks[1].BytesRead)
				}
				if !hasWarning(res.Warnings, "read through NFC export") {
					t.Errorf("round %d: warnings %q", round, res.Warnings)
				}
				noSnapshots(t, l, vm)
				write(t, l, vm, 1, 3<<20, randomData(rng, 64<<10))
			}
			checkRepo(t, r)
		})
	}
}

// TestUnsupportedDisksSkippedOrRequired: an independent disk and a
// physical-mode RDM are skipped with a warning each and recorded as skipped
// in the point's configuration; the remaining disk is byte-identical. With
// RequireAllDisks the VM fails before any snapshot and nothing is committed.
func TestUnsupportedDisksSkippedOrRequired(t *testing.T) {
	const size = 2 << 20
	l := labtest.Start(t, lab.Options{DiskCapacity: size})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r)
	const vm = "DC0_H0_VM0"
	addDisk(t, l, vm, size)
	addDisk(t, l, vm, size)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3 {
		write(t, l, vm, i, 0, randomData(rng, 256<<10))
	}
	must(t, l.SetDiskMode(vm, 1, "independent_persistent"))
	must(t, l.SetPhysicalRDM(vm, 2))

	_, err := e.BackupVM(context.Background(), backup.Request{VM: vm, RequireAllDisks: true})
	if !errors.Is(err, backup.ErrUnsupportedVM) {
		t.Fatalf("require all disks: %v, want ErrUnsupportedVM", err)
	}
	if len(points(t, r)) != 0 {
		t.Fatal("a refused VM committed a point")
	}
	noSnapshots(t, l, vm)

	want := diskImage(t, l, vm, 0)
	res := run(t, e, vm)
	if len(res.Disks) != 1 {
		t.Fatalf("backed up %d disks, want 1", len(res.Disks))
	}
	labtest.SameBytes(t, "the supported disk", labtest.PointDisk(t, r, res.RestorePoint, 0), want)
	if !hasWarning(res.Warnings, "independent disks are excluded") || !hasWarning(res.Warnings, "physical-mode RDM") {
		t.Errorf("warnings %q", res.Warnings)
	}
	p, cfg := pointConfig(t, r, res.RestorePoint)
	if len(p.Disks) != 1 || !hasWarning(p.Warnings, "skipped") {
		t.Errorf("point disks %d, warnings %q", len(p.Disks), p.Warnings)
	}
	skipped := 0
	for _, d := range cfg.Disks {
		if d.Skipped != "" && d.Index == -1 {
			skipped++
		}
	}
	if skipped != 2 {
		t.Errorf("configuration records %d skipped disks, want 2: %+v", skipped, cfg.Disks)
	}
	noSnapshots(t, l, vm)
	checkRepo(t, r)
}

// TestPoweredOffAndTemplate: a powered-off VM is backed up without asking
// for a quiesce (no Tools, no warning); a template, which vSphere cannot
// snapshot, is read at rest. Both points are byte-identical and no
// snapshot is left.
func TestPoweredOffAndTemplate(t *testing.T) {
	const size = 4 << 20
	l := labtest.Start(t, lab.Options{DiskCapacity: size})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	const off, tmpl = "DC0_H0_VM0", "DC0_H0_VM1"
	for _, vm := range []string{off, tmpl} {
		write(t, l, vm, 0, 1<<20, randomData(rng, 768<<10))
		task, err := adminVM(t, l, vm).PowerOff(ctx)
		must(t, err)
		must(t, task.Wait(ctx))
	}
	must(t, adminVM(t, l, tmpl).MarkAsTemplate(ctx))

	want := diskImage(t, l, off, 0)
	res := run(t, e, off, func(r *backup.Request) { r.Quiesce = backup.QuiesceRequire })
	labtest.SameBytes(t, "powered-off VM", labtest.PointDisk(t, r, res.RestorePoint, 0), want)
	if hasWarning(res.Warnings, "quiesce") {
		t.Errorf("powered-off VM warnings %q", res.Warnings)
	}
	if q := res.Quiesce; q.Obtained != backup.ConsistencyCrash || q.Reason != backup.ReasonPoweredOff || q.Spec != "" {
		t.Errorf("powered-off VM quiesce report %+v", q)
	}
	noSnapshots(t, l, off)

	v, err := c.FindVM(ctx, tmpl)
	must(t, err)
	if !v.Template {
		t.Fatal("lab: MarkAsTemplate did not make a template")
	}
	want = diskImage(t, l, tmpl, 0)
	res = run(t, e, tmpl)
	labtest.SameBytes(t, "template", labtest.PointDisk(t, r, res.RestorePoint, 0), want)
	if p, _ := pointConfig(t, r, res.RestorePoint); p.Tags["template"] != "true" || p.Tags["quiesce.reason"] != backup.ReasonTemplate {
		t.Errorf("template point tags %v", p.Tags)
	}
	noSnapshots(t, l, tmpl)
	checkRepo(t, r)
}

// TestVSANDatastoreGoesThroughNFC: on a datastore that says it is vSAN or
// vVols the engine does not try range reads (none is made) and reads the
// disk through NFC export, byte-identical, incremental the second time.
func TestVSANDatastoreGoesThroughNFC(t *testing.T) {
	for _, typ := range []string{"vsan", "VVOL"} {
		t.Run(typ, func(t *testing.T) {
			const size = 4 << 20
			l := labtest.Start(t, lab.Options{DiskCapacity: size})
			c := connect(t, l)
			r := labtest.Repo(t)
			e := newEngine(t, c, r)
			const vm = "DC0_H0_VM0"
			must(t, l.SetDatastoreType("LocalDS_0", typ))
			rng := rand.New(rand.NewPCG(9, 10))
			write(t, l, vm, 0, 512<<10, randomData(rng, 1<<20))
			gets := l.FolderGets()
			for round := range 2 {
				want := diskImage(t, l, vm, 0)
				var last, reports int64
				backwards := false
				res := run(t, e, vm, func(r *backup.Request) {
					r.Progress = func(p backup.VMProgress) { // never called at once
						if p.Phase == "disks" {
							reports++
							backwards = backwards || p.BytesRead < last
							last = p.BytesRead
						}
					}
				})
				if reports == 0 || last == 0 || backwards {
					t.Errorf("round %d: %d disk progress reports, last bytes read %d, went backwards %v", round, reports, last, backwards)
				}
				labtest.SameBytes(t, fmt.Sprintf("round %d", round), labtest.PointDisk(t, r, res.RestorePoint, 0), want)
				if d := res.Disks[0]; d.Reader != backup.ReaderNFC || round == 1 && d.Mode != backup.ModeIncremental {
					t.Errorf("round %d: reader %q mode %q", round, d.Reader, d.Mode)
				}
				noSnapshots(t, l, vm)
				write(t, l, vm, 0, 3<<20, randomData(rng, 64<<10))
			}
			if n := l.FolderGets() - gets; n != 0 {
				t.Errorf("%d datastore GETs on a %s datastore", n, typ)
			}
			checkRepo(t, r)
		})
	}
}
