package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// TestRestoreFaultMatrix: each vSphere call of a restore fails once: a new
// VM (datastore PUT and NFC import), over the original, one disk attached.
// Idempotent calls are retried and the restore succeeds; otherwise the
// error names the call, and no VM, disk or datastore file is left that was
// not there before (over the original: the error says what was written).
func TestRestoreFaultMatrix(t *testing.T) {
	l := startLab(t, lab.Options{DiskCapacity: 2 << 20})
	c := connect(t, l)
	r := newRepo(t)
	ctx := context.Background()
	const src, target = "DC0_H0_VM0", "DC0_H0_VM1"
	rng := rand.New(rand.NewPCG(23, 23))
	write(t, l, src, 0, randomData(rng, 1<<20))
	res, err := newBackup(c, r).BackupVM(ctx, backup.Request{VM: src})
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	pt := res.RestorePoint
	img := labtest.PointDisk(t, r, pt, 0)
	e := newRestore(r, c)

	type op func(name string) (restore.Result, error)
	newVM := func(transport string, powerOn bool) op {
		return func(name string) (restore.Result, error) {
			return e.RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Name: name, Transport: transport, PowerOn: powerOn})
		}
	}
	overwrite := func(string) (restore.Result, error) {
		return e.RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Overwrite: true, PowerOff: true})
	}
	attach := func(string) (restore.Result, error) {
		return e.AttachDisk(ctx, restore.AttachRequest{RestorePoint: pt, Disk: 0, VM: target})
	}
	for i, tc := range []struct {
		name, call string
		run        op
		arm        func()
		outcome    string
		errHas     string
		// written: over the original, the disk may already hold the
		// point's bytes when the failure comes (the error says so).
		written bool
	}{
		{name: "new VM: property collector", call: "RetrievePropertiesEx", run: newVM("", false), outcome: retried,
			arm: func() { failOnce(l, "RetrievePropertiesEx", 2) }},
		{name: "new VM: create", call: "CreateVM_Task", run: newVM("", false), outcome: failed, errHas: "create VM",
			arm: func() { failOnce(l, "CreateVM_Task", 0) }},
		{name: "new VM: upload", call: "PUT /folder (upload)", run: newVM("", false), outcome: failed, errHas: "upload disk",
			arm: func() { l.InjectWriteFault(lab.WriteFault{PathContains: "-flat.vmdk", AfterBytes: 64 << 10}) }},
		{name: "new VM: power on", call: "PowerOnVM_Task", run: newVM("", true), outcome: failed, errHas: "power on",
			arm: func() { failOnce(l, "PowerOnVM_Task", 0) }},
		{name: "NFC: import lease", call: "ImportVApp", run: newVM(restore.TransportNFC, false), outcome: failed, errHas: "import",
			arm: func() { failOnce(l, "ImportVApp", 0) }},
		{name: "NFC: upload", call: "PUT /nfc (import stream)", run: newVM(restore.TransportNFC, false), outcome: failed, errHas: "import VM",
			arm: func() { l.InjectWriteFault(lab.WriteFault{PathContains: "/nfc/", AfterBytes: 16 << 10}) }},
		{name: "NFC: lease completion", call: "HttpNfcLeaseComplete", run: newVM(restore.TransportNFC, false), outcome: failed, errHas: "lease",
			arm: func() { failOnce(l, "HttpNfcLeaseComplete", 0) }},
		{name: "overwrite: power off", call: "PowerOffVM_Task", run: overwrite, outcome: failed, errHas: "power off",
			arm: func() { failOnce(l, "PowerOffVM_Task", 0) }},
		// Setting the CBT flag is idempotent: retried.
		{name: "overwrite: CBT reset (disable)", call: "ReconfigVM_Task", run: overwrite, outcome: retried, written: true,
			arm: func() { failOnce(l, "ReconfigVM_Task", 0) }},
		{name: "overwrite: CBT reset (enable)", call: "ReconfigVM_Task (2nd)", run: overwrite, outcome: retried, written: true,
			arm: func() { failOnce(l, "ReconfigVM_Task", 1) }},
		{name: "overwrite: upload", call: "PUT /folder (upload)", run: overwrite, outcome: failed, errHas: "upload disk", written: true,
			arm: func() { l.InjectWriteFault(lab.WriteFault{PathContains: "-flat.vmdk", AfterBytes: 64 << 10}) }},
		{name: "attach: add disk", call: "ReconfigVM_Task", run: attach, outcome: failed, errHas: "attach disk",
			arm: func() { failOnce(l, "ReconfigVM_Task", 0) }},
		{name: "attach: upload", call: "PUT /folder (upload)", run: attach, outcome: failed, errHas: "upload disk",
			arm: func() { l.InjectWriteFault(lab.WriteFault{PathContains: "-flat.vmdk", AfterBytes: 64 << 10}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.ClearMethodFaults()
			defer l.ClearMethodFaults()
			defer l.ClearWriteFaults()
			name := fmt.Sprintf("restored-%02d", i)
			vms, files := vmNames(t, c), dsFiles(t, l)
			srcBefore := diskImage(t, l, src)
			targetDisks := diskCount(t, c, target)
			tc.arm()
			res, err := tc.run(name)
			t.Logf("%s: err=%v", tc.call, err)
			if !strings.HasPrefix(tc.call, "PUT") && injected(l) == 0 {
				t.Fatalf("the %s fault never fired", tc.call)
			}
			switch tc.outcome {
			case retried:
				if err != nil {
					t.Fatalf("%s failing once: restore failed: %v", tc.call, err)
				}
				if res.Mode == "overwrite" {
					labtest.SameBytes(t, "original overwritten", diskImage(t, l, src), img)
					break
				}
				labtest.SameBytes(t, "restored disk", diskImage(t, l, name), img)
				must(t, c.DestroyVM(ctx, res.VM))
			case failed:
				if err == nil {
					t.Fatalf("%s failing once: the restore succeeded", tc.call)
				}
				if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.errHas)) {
					t.Errorf("error %q does not name %q", err, tc.errHas)
				}
			}
			if got := vmNames(t, c); strings.Join(got, ",") != strings.Join(vms, ",") {
				t.Errorf("VMs changed: %v -> %v", vms, got)
			}
			if got := dsFiles(t, l); strings.Join(got, ",") != strings.Join(files, ",") {
				t.Errorf("datastore files changed: %v -> %v", files, got)
			}
			noLeases(t, l)
			if n := diskCount(t, c, target); n != targetDisks {
				t.Errorf("%s has %d disks, had %d", target, n, targetDisks)
			}
			if got := diskImage(t, l, src); !tc.written && string(got) != string(srcBefore) {
				t.Errorf("the original's disk changed though nothing was to be written")
			}
			if v, err := c.FindVM(ctx, src); err != nil || !v.CBTEnabled {
				t.Errorf("the original's CBT is off after the failure (%v): its next backup could not be incremental", err)
			}
		})
	}
	// Over the original, a clean run then restores the point's bytes.
	if _, err := overwrite(""); err != nil {
		t.Fatalf("overwrite after the matrix: %v", err)
	}
	labtest.SameBytes(t, "original after a clean overwrite", diskImage(t, l, src), img)
}

func diskCount(t *testing.T, c *vsphere.Client, vm string) int {
	t.Helper()
	v, err := c.FindVM(context.Background(), vm)
	must(t, err)
	return len(v.Disks)
}
