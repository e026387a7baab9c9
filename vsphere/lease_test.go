package vsphere

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/nfc"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// leaseCalls records the HttpNfcLease methods vcsim receives.
type leaseCalls struct {
	mu           sync.Mutex
	names        []string
	percents     []int32
	aborts       []string // the abort faults' messages
	failComplete bool
}

func (l *leaseCalls) handler(_ *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if m.This.Type != "HttpNfcLease" {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, m.Name)
	switch b := m.Body.(type) {
	case *types.HttpNfcLeaseProgress:
		l.percents = append(l.percents, b.Percent)
	case *types.HttpNfcLeaseAbort:
		msg := ""
		if b.Fault != nil {
			msg = b.Fault.LocalizedMessage
		}
		l.aborts = append(l.aborts, msg)
	case *types.HttpNfcLeaseComplete:
		if l.failComplete {
			return nil, &types.InvalidState{}
		}
	}
	return nil, nil
}

func (l *leaseCalls) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.names {
		if s == name {
			n++
		}
	}
	return n
}

func (l *leaseCalls) lastPercent() (int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.percents) == 0 {
		return 0, false
	}
	return l.percents[len(l.percents)-1], true
}

// withLease runs fn against an in-process vcsim with a fresh export lease
// (of a snapshot of the first VM) and the recorder of its calls.
func withLease(t *testing.T, fn func(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, calls *leaseCalls)) {
	t.Helper()
	m := simulator.VPX()
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	calls := &leaseCalls{}
	m.Map().Handler = calls.handler
	err := m.Run(func(ctx context.Context, c *vim25.Client) error {
		vm, err := find.NewFinder(c, true).VirtualMachine(ctx, "/DC0/vm/DC0_H0_VM0")
		if err != nil {
			return err
		}
		task, err := vm.CreateSnapshot(ctx, "lease", "", false, false)
		if err != nil {
			return err
		}
		info, err := task.WaitForResult(ctx)
		if err != nil {
			return err
		}
		res, err := methods.ExportSnapshot(ctx, c, &types.ExportSnapshot{This: info.Result.(types.ManagedObjectReference)})
		if err != nil {
			return err
		}
		fn(ctx, c, res.Returnval, calls)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func fixedTotal(n int64) func(*nfc.LeaseInfo) int64 { return func(*nfc.LeaseInfo) int64 { return n } }

// TestLeaseKeeperProgressAndComplete: while held, the lease hears the
// transfer's percentage (never 100 before the end); a transfer that
// succeeded completes it, and no keep-alive follows the end.
func TestLeaseKeeperProgressAndComplete(t *testing.T) {
	withLease(t, func(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, calls *leaseCalls) {
		k, err := holdLease(ctx, c, "test", ref, 5*time.Millisecond, fixedTotal(1000))
		if err != nil {
			t.Fatal(err)
		}
		waitPercent := func(want int32) {
			t.Helper()
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if p, ok := calls.lastPercent(); ok && p == want {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			p, _ := calls.lastPercent()
			t.Fatalf("lease progress %d, want %d", p, want)
		}
		k.done.Add(250)
		waitPercent(25)
		k.done.Add(5000) // more than expected: still not done until the end says so
		waitPercent(99)
		var end error
		k.end(ctx, &end)
		if end != nil {
			t.Fatalf("end: %v", end)
		}
		before := calls.count("HttpNfcLeaseProgress")
		time.Sleep(30 * time.Millisecond)
		if calls.count("HttpNfcLeaseComplete") != 1 || calls.count("HttpNfcLeaseAbort") != 0 {
			t.Errorf("calls %v", calls.names)
		}
		if after := calls.count("HttpNfcLeaseProgress"); after != before {
			t.Errorf("%d keep-alives after the end", after-before)
		}
	})
}

// TestLeaseKeeperAborts: a transfer that failed, or whose caller gave up
// (cancelled context), aborts the lease with the error; it is never
// completed.
func TestLeaseKeeperAborts(t *testing.T) {
	for _, cancelFirst := range []bool{false, true} {
		withLease(t, func(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, calls *leaseCalls) {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			k, err := holdLease(cctx, c, "test", ref, time.Hour, fixedTotal(1))
			if err != nil {
				t.Fatal(err)
			}
			failed := errors.New("disk stream dropped")
			if cancelFirst {
				cancel()
				failed = context.Canceled
			}
			end := failed
			k.end(cctx, &end)
			if end != failed {
				t.Errorf("end replaced the transfer's error: %v", end)
			}
			if calls.count("HttpNfcLeaseAbort") != 1 || calls.count("HttpNfcLeaseComplete") != 0 {
				t.Fatalf("cancelled=%v: calls %v", cancelFirst, calls.names)
			}
			if !strings.Contains(calls.aborts[0], failed.Error()) {
				t.Errorf("abort fault %q does not carry the error %q", calls.aborts[0], failed)
			}
		})
	}
}

// TestLeaseKeeperCompleteFails: a Complete the server refuses fails the
// transfer (it is not known to have landed).
func TestLeaseKeeperCompleteFails(t *testing.T) {
	withLease(t, func(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, calls *leaseCalls) {
		k, err := holdLease(ctx, c, "export of vm", ref, time.Hour, fixedTotal(1))
		if err != nil {
			t.Fatal(err)
		}
		calls.mu.Lock()
		calls.failComplete = true
		calls.mu.Unlock()
		var end error
		k.end(ctx, &end)
		if end == nil || !strings.Contains(end.Error(), "export of vm: complete lease") {
			t.Fatalf("end after a refused Complete: %v", end)
		}
	})
}
