package restoree2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// TestFaultsLeaveNothingBehind: an upload that fails midway, a VM creation
// that fails and a cancellation midway each end with the error, no new VM
// and the datastore files as before.
func TestFaultsLeaveNothingBehind(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, _ := makeSource(t, l, c, "src-fault", 5)
	pt := backUp(t, c, r, src.Name)
	fp := newFailingProxy(t, l)
	pc := connectCfg(t, fp.config(l))

	for _, tc := range []struct {
		name      string
		transport string
		setup     func() (context.Context, func(restore.Progress))
		check     func(t *testing.T, err error)
	}{
		{"upload fails midway", "", func() (context.Context, func(restore.Progress)) {
			fp.failAfter.Store(1 << 20)
			return ctx, nil
		}, func(t *testing.T, err error) {
			fp.failAfter.Store(0)
			if fp.failed.Load() == 0 {
				t.Fatal("the proxy never failed an upload")
			}
			if !strings.Contains(err.Error(), "500") || strings.Contains(err.Error(), "repository") {
				t.Errorf("error %v does not blame the upload", err)
			}
		}},
		// NFC uploads go straight to the lease URL (not through the proxy):
		// fail the lease completion after every disk was sent.
		{"nfc import fails at completion", restore.TransportNFC, func() (context.Context, func(restore.Progress)) {
			l.FailMethod("HttpNfcLeaseComplete", &types.SystemError{Reason: "injected"}, 1)
			return ctx, nil
		}, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "lease") {
				t.Errorf("error %v does not name the lease", err)
			}
		}},
		{"nfc cancelled midway", restore.TransportNFC, func() (context.Context, func(restore.Progress)) {
			cctx, cancel := context.WithCancel(ctx)
			t.Cleanup(cancel)
			return cctx, func(p restore.Progress) {
				if p.Phase == "disk" && p.Disk == 1 && p.Done > 1<<20 {
					cancel()
				}
			}
		}, func(t *testing.T, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error %v is not context.Canceled", err)
			}
		}},
		{"VM creation fails", "", func() (context.Context, func(restore.Progress)) {
			l.FailMethod("CreateVM_Task", &types.InsufficientResourcesFault{}, 1)
			return ctx, nil
		}, func(t *testing.T, err error) {
			l.ClearMethodFaults()
			if !strings.Contains(err.Error(), "create VM") {
				t.Errorf("error %v does not say the creation failed", err)
			}
		}},
		{"cancelled midway", "", func() (context.Context, func(restore.Progress)) {
			cctx, cancel := context.WithCancel(ctx)
			t.Cleanup(cancel)
			return cctx, func(p restore.Progress) {
				if p.Phase == "disk" && p.Disk == 1 && p.Done > 1<<20 {
					cancel()
				}
			}
		}, func(t *testing.T, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error %v is not context.Canceled", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vms, files := vmNames(t, c), dsFiles(t, l, ds0)
			rctx, prog := tc.setup()
			defer fp.failAfter.Store(0)
			defer l.ClearMethodFaults()
			_, err := newEngine(r, pc).RestoreVM(rctx, restore.VMRequest{RestorePoint: pt, Name: "half-made", Progress: prog, Transport: tc.transport})
			if err == nil {
				t.Fatal("restore succeeded")
			}
			t.Logf("%v", err)
			tc.check(t, err)
			if got := vmNames(t, c); strings.Join(got, ",") != strings.Join(vms, ",") {
				t.Errorf("VMs changed: %v -> %v", vms, got)
			}
			if got := dsFiles(t, l, ds0); strings.Join(got, ",") != strings.Join(files, ",") {
				t.Errorf("datastore files changed: %v -> %v", files, got)
			}
		})
	}
	// After all that, a restore through the same proxy works.
	res, err := newEngine(r, pc).RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Name: "whole"})
	if err != nil || len(res.Disks) != 3 {
		t.Fatalf("restore after the faults: %v", err)
	}
}
