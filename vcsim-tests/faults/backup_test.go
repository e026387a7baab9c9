package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// Outcomes of a fault case.
const (
	retried = "succeeds (retried)"
	failed  = "fails, naming the call"
	warned  = "succeeds with a warning"
)

// injected is how many faults vcsim's injector has fired since the rules
// were last cleared.
func injected(l *lab.Lab) int64 {
	n, _ := l.Service().GetFaultStats()["total_injections"].(int64)
	return n
}

// TestBackupFaultMatrix: each vSphere call of a backup fails once; the
// backup retries the idempotent ones and succeeds (byte-identical), or
// fails with an error that names the call; in every case no snapshot is
// left, a failed run commits nothing and the repository check is clean.
func TestBackupFaultMatrix(t *testing.T) {
	l := startLab(t, lab.Options{DiskCapacity: 4 << 20})
	c := connect(t, l)
	r := newRepo(t)
	e := newBackup(c, r)
	ctx := context.Background()
	const vm = "DC0_H0_VM0"
	rng := rand.New(rand.NewPCG(17, 17))
	write(t, l, vm, 0, randomData(rng, 4<<20))
	setCBT(t, l, vm, true)
	if _, err := e.BackupVM(ctx, backup.Request{VM: vm}); err != nil {
		t.Fatalf("first backup: %v", err)
	}

	for _, tc := range []struct {
		name, call string
		arm        func(t *testing.T)
		disarm     func(t *testing.T)
		outcome    string
		errHas     string // failed: the error names the call
		check      func(t *testing.T, res backup.Result, err error)
	}{
		{name: "property collector", call: "RetrievePropertiesEx", outcome: retried,
			arm: func(t *testing.T) { failOnce(l, "RetrievePropertiesEx", 0) }},
		{name: "property collector mid-backup", call: "RetrievePropertiesEx", outcome: retried,
			arm: func(t *testing.T) { failOnce(l, "RetrievePropertiesEx", 3) }},
		// The engine retries a snapshot after a transient failure, having
		// swept what the attempt may have made.
		{name: "snapshot create", call: "CreateSnapshotEx_Task", outcome: retried,
			arm: func(t *testing.T) { failOnce(l, "CreateSnapshotEx_Task", 0) }},
		{name: "snapshot made, reply lost", call: "CreateSnapshotEx_Task (reply)", outcome: retried,
			arm: func(t *testing.T) { must(t, l.LoseSnapshotReply(vm)) }},
		{name: "snapshot task fails", call: "CreateSnapshotEx_Task (task)", outcome: failed, errHas: "snapshot",
			arm: func(t *testing.T) { must(t, l.FailNextSnapshot(vm, &types.FileFault{File: "[LocalDS_0] x.vmsn"})) },
			check: func(t *testing.T, _ backup.Result, err error) {
				if !errors.Is(err, backup.ErrSnapshot) {
					t.Errorf("error %v is not ErrSnapshot", err)
				}
			}},
		{name: "snapshot remove", call: "RemoveSnapshot_Task", outcome: retried,
			arm: func(t *testing.T) { failOnce(l, "RemoveSnapshot_Task", 0) }},
		{name: "CBT query", call: "QueryChangedDiskAreas", outcome: retried,
			arm: func(t *testing.T) { failOnce(l, "QueryChangedDiskAreas", 0) },
			check: func(t *testing.T, res backup.Result, _ error) {
				if res.Mode != backup.ModeIncremental {
					t.Errorf("mode %s after a retried CBT query, want incremental", res.Mode)
				}
			}},
		{name: "datastore read refused (503)", call: "GET /folder (range read)", outcome: retried,
			arm: func(t *testing.T) { l.InjectReadFault(lab.ReadFault{PathContains: "-flat.vmdk", Status: 503}) }},
		{name: "datastore read drops", call: "GET /folder (range read)", outcome: retried,
			arm: func(t *testing.T) { l.InjectReadFault(lab.ReadFault{PathContains: "-flat.vmdk", AfterBytes: 32 << 10}) }},
		{name: "enable CBT", call: "ReconfigVM_Task", outcome: warned,
			arm: func(t *testing.T) {
				setCBT(t, l, vm, false)
				failOnce(l, "ReconfigVM_Task", 0)
			},
			check: func(t *testing.T, res backup.Result, _ error) {
				if !hasWarning(res.Warnings, "could not enable changed block tracking") || res.Mode != backup.ModeFull {
					t.Errorf("mode %s, warnings %q: want a full read and the warning", res.Mode, res.Warnings)
				}
			},
			disarm: func(t *testing.T) { setCBT(t, l, vm, true) }},
		// NFC export: the datastore is vSAN, so the disk must be exported.
		// One more export after a transient failure (the first aborted its lease).
		{name: "NFC export lease", call: "ExportSnapshot", outcome: retried,
			arm: func(t *testing.T) {
				must(t, l.SetDatastoreType(ds0, "vsan"))
				failOnce(l, "ExportSnapshot", 0)
			},
			disarm: func(t *testing.T) { must(t, l.SetDatastoreType(ds0, "OTHER")) }},
		{name: "NFC lease completion", call: "HttpNfcLeaseComplete", outcome: retried,
			arm: func(t *testing.T) {
				must(t, l.SetDatastoreType(ds0, "vsan"))
				failOnce(l, "HttpNfcLeaseComplete", 0)
			},
			disarm: func(t *testing.T) { must(t, l.SetDatastoreType(ds0, "OTHER")) }},
		{name: "NFC stream drops", call: "GET /nfc (export stream)", outcome: retried,
			arm: func(t *testing.T) {
				must(t, l.SetDatastoreType(ds0, "vsan"))
				l.InjectReadFault(lab.ReadFault{PathContains: "/nfc/", AfterBytes: 64 << 10})
			},
			disarm: func(t *testing.T) { must(t, l.SetDatastoreType(ds0, "OTHER")) }},
		{name: "NFC stream drops every time", call: "GET /nfc (export stream, twice)", outcome: failed, errHas: "NFC export",
			arm: func(t *testing.T) {
				must(t, l.SetDatastoreType(ds0, "vsan"))
				l.InjectReadFault(lab.ReadFault{PathContains: "/nfc/", AfterBytes: 64 << 10, Times: 2})
			},
			disarm: func(t *testing.T) { must(t, l.SetDatastoreType(ds0, "OTHER")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.ClearMethodFaults()
			defer l.ClearMethodFaults()
			defer l.ClearReadFaults()
			before := len(points(t, r))
			write(t, l, vm, int64(rng.IntN(60))<<16, randomData(rng, 64<<10))
			img := diskImage(t, l, vm)
			retries := c.Stats().Retries
			tc.arm(t)
			res, err := e.BackupVM(ctx, backup.Request{VM: vm})
			if tc.disarm != nil {
				tc.disarm(t)
			}
			t.Logf("%s: err=%v warnings=%q", tc.call, err, res.Warnings)
			if n := injected(l); n == 0 && !strings.HasPrefix(tc.call, "GET") && !strings.Contains(tc.call, "(") {
				t.Fatalf("the %s fault never fired", tc.call)
			}
			switch tc.outcome {
			case retried, warned:
				if err != nil {
					t.Fatalf("%s failing once: backup failed: %v", tc.call, err)
				}
				if tc.outcome == retried && c.Stats().Retries == retries && !strings.Contains(tc.call, "Snapshot") && !strings.Contains(tc.name, "NFC") {
					t.Errorf("no retry counted")
				}
				if len(points(t, r)) != before+1 {
					t.Errorf("points %d, want %d", len(points(t, r)), before+1)
				}
				labtest.SameBytes(t, "restore point", labtest.PointDisk(t, r, res.RestorePoint, 0), img)
			case failed:
				if err == nil {
					t.Fatalf("%s failing once: the backup succeeded", tc.call)
				}
				if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.errHas)) {
					t.Errorf("error %q does not name %q", err, tc.errHas)
				}
				if len(points(t, r)) != before {
					t.Errorf("a failed backup committed a point")
				}
			}
			if tc.check != nil {
				tc.check(t, res, err)
			}
			noSnapshots(t, l, vm)
			noLeases(t, l)
			repoClean(t, r)
		})
	}
	// After the matrix the next backup is a clean incremental.
	img := diskImage(t, l, vm)
	res, err := e.BackupVM(ctx, backup.Request{VM: vm})
	if err != nil {
		t.Fatal(err)
	}
	labtest.SameBytes(t, "after the matrix", labtest.PointDisk(t, r, res.RestorePoint, 0), img)
	noSnapshots(t, l, vm)
}

// TestLoginFault: the login of a job's connection fails once with a
// transient fault: Connect retries it; a refused password is not retried
// and says so.
func TestLoginFault(t *testing.T) {
	l := startLab(t, lab.Options{DiskCapacity: 1 << 20})
	failOnce(l, "Login", 0)
	c, err := vsphere.Connect(context.Background(), labConfig(l))
	if err != nil {
		t.Fatalf("login failing once: %v", err)
	}
	if injected(l) != 1 || c.Stats().Retries == 0 {
		t.Errorf("fault fired %d times, %d retries", injected(l), c.Stats().Retries)
	}
	_ = c.Close(context.Background())

	cfg := labConfig(l)
	cfg.Password = "wrong"
	_, err = vsphere.Connect(context.Background(), cfg)
	if !errors.Is(err, vsphere.ErrLogin) || !strings.Contains(err.Error(), "login") {
		t.Errorf("wrong password: %v, want ErrLogin naming the login", err)
	}
}
