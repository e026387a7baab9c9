package backupe2e

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// TestQuiesce: without Tools, "require" fails before any snapshot exists and
// commits nothing; "prefer" falls back to crash-consistent and says so; a
// failing guest quiesce behaves the same; Windows guests get application
// consistency.
func TestQuiesce(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r)
	const vm = "DC0_H0_VM0"
	write(t, l, vm, 0, 0, randomData(rand.New(rand.NewPCG(1, 1)), 64<<10))
	must(t, l.SetToolsRunning(vm, false))

	_, err := e.BackupVM(context.Background(), backup.Request{VM: vm, Quiesce: backup.QuiesceRequire})
	if !errors.Is(err, backup.ErrQuiesce) || !errors.Is(err, vsphere.ErrToolsUnavailable) {
		t.Fatalf("require without Tools: %v, want ErrQuiesce wrapping ErrToolsUnavailable", err)
	}
	noSnapshots(t, l, vm)
	if ps := points(t, r); len(ps) != 0 {
		t.Fatalf("failed backup committed %d points", len(ps))
	}

	res := run(t, e, vm, func(q *backup.Request) { q.Quiesce = backup.QuiescePrefer })
	if res.Consistency != backup.ConsistencyCrash || !hasWarning(res.Warnings, "crash-consistent") {
		t.Errorf("prefer without Tools: consistency %q, warnings %q", res.Consistency, res.Warnings)
	}
	p, err := r.Point(context.Background(), res.RestorePoint)
	must(t, err)
	if p.Consistency != backup.ConsistencyCrash {
		t.Errorf("restore point records %q", p.Consistency)
	}
	res = run(t, e, vm, func(q *backup.Request) { q.Quiesce = backup.QuiesceOff })
	if res.Consistency != backup.ConsistencyCrash || len(res.Warnings) != 0 {
		t.Errorf("off: %q %q", res.Consistency, res.Warnings)
	}

	must(t, l.SetToolsRunning(vm, true))
	must(t, l.FailNextQuiesce(vm, 1))
	res = run(t, e, vm)
	if res.Consistency != backup.ConsistencyCrash || !hasWarning(res.Warnings, "quiesce") {
		t.Errorf("quiesce fault with prefer: %q %q", res.Consistency, res.Warnings)
	}
	must(t, l.FailNextQuiesce(vm, 1))
	if _, err := e.BackupVM(context.Background(), backup.Request{VM: vm, Quiesce: backup.QuiesceRequire}); !errors.Is(err, vsphere.ErrQuiesceFailed) {
		t.Errorf("quiesce fault with require: %v", err)
	}
	noSnapshots(t, l, vm)
	res = run(t, e, vm, func(q *backup.Request) { q.Quiesce = backup.QuiesceRequire })
	if res.Consistency != backup.ConsistencyFilesystem {
		t.Errorf("Tools running: %q", res.Consistency)
	}
	must(t, l.SetGuestFamily(vm, "windowsGuest"))
	res = run(t, e, vm, func(q *backup.Request) { q.Quiesce = backup.QuiesceRequire })
	if res.Consistency != backup.ConsistencyApplication {
		t.Errorf("Windows guest: %q", res.Consistency)
	}
	if _, err := e.BackupVM(context.Background(), backup.Request{VM: vm, Quiesce: "sometimes"}); err == nil {
		t.Error("bad quiesce mode accepted")
	}
	checkRepo(t, r)
}

// TestFaults: snapshot creation fails; a datastore read drops mid-disk once
// (retried) and for good (the backup fails cleanly); snapshot removal fails
// (reported, swept by the next run); a cancelled backup commits nothing.
func TestFaults(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 8 << 20})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r)
	ctx := context.Background()
	const vm = "DC0_H0_VM0"
	rng := rand.New(rand.NewPCG(9, 9))
	write(t, l, vm, 0, 0, randomData(rng, 8<<20))
	// CBT on beforehand: enabling it takes a stun snapshot that would eat
	// the injected snapshot fault.
	setCBT(t, l, vm, true)

	t.Run("snapshot creation fails", func(t *testing.T) {
		must(t, l.FailNextSnapshot(vm, &types.FileFault{}))
		_, err := e.BackupVM(ctx, backup.Request{VM: vm})
		if !errors.Is(err, backup.ErrSnapshot) {
			t.Fatalf("got %v, want ErrSnapshot", err)
		}
		noSnapshots(t, l, vm)
		if len(points(t, r)) != 0 {
			t.Fatal("a point was committed")
		}
	})
	t.Run("read drops once mid-disk", func(t *testing.T) {
		retries := c.Stats().Retries
		write(t, l, vm, 0, 1<<20, randomData(rng, 1<<20))
		l.InjectReadFault(lab.ReadFault{PathContains: "-flat.vmdk", AfterBytes: 100 << 10, Times: 1})
		img := diskImage(t, l, vm, 0)
		res := run(t, e, vm)
		if c.Stats().Retries == retries {
			t.Error("no read was retried")
		}
		labtest.SameBytes(t, "after a retried read", labtest.PointDisk(t, r, res.RestorePoint, 0), img)
		noSnapshots(t, l, vm)
	})
	t.Run("read fails for good", func(t *testing.T) {
		before := len(points(t, r))
		write(t, l, vm, 0, 2<<20, randomData(rng, 1<<20))
		l.InjectReadFault(lab.ReadFault{PathContains: "-flat.vmdk", AfterBytes: 10 << 10, Times: 1000})
		_, err := e.BackupVM(ctx, backup.Request{VM: vm})
		l.ClearReadFaults()
		if err == nil || !errors.Is(err, vsphere.ErrTransient) {
			t.Fatalf("got %v, want a failure after retries (ErrTransient)", err)
		}
		noSnapshots(t, l, vm)
		if len(points(t, r)) != before {
			t.Fatal("a failed backup committed a point")
		}
		// The next run works and is still incremental on the last good point.
		img := diskImage(t, l, vm, 0)
		res := run(t, e, vm)
		if res.Mode != backup.ModeIncremental {
			t.Errorf("after a failed run: mode %s", res.Mode)
		}
		labtest.SameBytes(t, "after a failed run", labtest.PointDisk(t, r, res.RestorePoint, 0), img)
	})
	t.Run("snapshot removal fails", func(t *testing.T) {
		l.FailMethod("RemoveSnapshot_Task", &types.InvalidState{}, 100)
		write(t, l, vm, 0, 4<<20, randomData(rng, 64<<10))
		img := diskImage(t, l, vm, 0)
		res := run(t, e, vm)
		l.ClearMethodFaults()
		if res.SnapshotLeft == "" || !hasWarning(res.Warnings, "could not remove backup snapshot") {
			t.Fatalf("removal failure not reported: left %q, warnings %q", res.SnapshotLeft, res.Warnings)
		}
		labtest.SameBytes(t, "point with a left snapshot", labtest.PointDisk(t, r, res.RestorePoint, 0), img)
		if names, _ := l.Snapshots(vm); len(names) != 1 {
			t.Fatalf("snapshots %v, want the one left", names)
		}
		write(t, l, vm, 0, 5<<20, randomData(rng, 64<<10))
		res2 := run(t, e, vm)
		if !hasWarning(res2.Warnings, "removed stale snapshot") {
			t.Errorf("next run did not sweep: %q", res2.Warnings)
		}
		noSnapshots(t, l, vm)
		labtest.SameBytes(t, "after the sweep", labtest.PointDisk(t, r, res2.RestorePoint, 0), diskImage(t, l, vm, 0))
	})
	t.Run("cancelled", func(t *testing.T) {
		before := len(points(t, r))
		cctx, cancel := context.WithCancel(ctx)
		write(t, l, vm, 0, 0, randomData(rng, 6<<20))
		_, err := e.BackupVM(cctx, backup.Request{VM: vm, Progress: func(p backup.VMProgress) {
			if p.Phase == "disks" {
				cancel()
			}
		}})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		noSnapshots(t, l, vm)
		if len(points(t, r)) != before {
			t.Fatal("a cancelled backup committed a point")
		}
	})
	checkRepo(t, r)
}

// TestMissingVM: an unknown VM is ErrNotFound. (A VM with a snapshot of
// the user's used to be refused here; TestUserSnapshotChainBackedUp now
// backs it up.)
func TestMissingVM(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	c := connect(t, l)
	r := labtest.Repo(t)
	if _, err := newEngine(t, c, r).BackupVM(context.Background(), backup.Request{VM: "no such VM"}); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("missing VM: %v", err)
	}
}
