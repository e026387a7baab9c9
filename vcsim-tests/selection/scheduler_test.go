package selection

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

const guard = 20 * time.Second // only turns a deadlock into a failure

// backupCall is one backup that reached the fake runner; the test decides its outcome.
type backupCall struct {
	vm     policy.VM
	result chan error
}

// fakeRunner stands in for the backup engine (this test is about which VMs
// get backed up when, not about backing them up).
type fakeRunner struct{ calls chan *backupCall }

func (r *fakeRunner) RunBackup(ctx context.Context, job policy.Job, vm policy.VM, progress func(policy.Progress)) (policy.BackupResult, error) {
	c := &backupCall{vm: vm, result: make(chan error, 1)}
	r.calls <- c
	select {
	case err := <-c.result:
		if err != nil {
			return policy.BackupResult{}, err
		}
		return policy.BackupResult{PointID: "pt-" + vm.InstanceUUID, Bytes: 1 << 20}, nil
	case <-ctx.Done():
		return policy.BackupResult{}, fmt.Errorf("backup %s: %w", vm.Name, ctx.Err())
	}
}

type eventLog struct {
	mu     sync.Mutex
	events []policy.Event
}

func (l *eventLog) add(e policy.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// vms returns the VM UUIDs of the events of kind, in order.
func (l *eventLog) vms(kind string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if e.Kind == kind {
			out = append(out, e.VM)
		}
	}
	return out
}

// TestSchedulerResolvesFolderAtRunTime runs a job protecting a folder with
// the default window (weekday nights, the weekend) on a fake clock, the lab
// inventory and a fake runner. A VM moved into the folder during the day is
// backed up in the next night's window, first (never protected), and
// reported as new; a VM moved out is not backed up any more and reported as
// vanished. Within one night the window runs across midnight as one
// occurrence, so nothing is backed up twice.
func TestSchedulerResolvesFolderAtRunTime(t *testing.T) {
	e := newEnv(t, lab.Options{})
	vmRoot := e.find("Folder", "vm")
	protected := e.mkFolder(vmRoot, "Protected")
	e.moveIntoFolder(protected, hostVM0)
	moved, stays := e.uuid(clusterVM0), e.uuid(hostVM0)

	job := policy.NewJob("folder", "protected folder", "repo1", time.UTC)
	job.Selection = policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindFolder, protected)}}
	if _, err := job.Validate(e.ctx, policy.ValidateEnv{Inventory: e.inv}); err != nil {
		t.Fatalf("validate: %v", err)
	}
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PutJob(e.ctx, job); err != nil {
		t.Fatal(err)
	}
	// Monday 2026-05-04 12:00 UTC: the window opens at 18:00.
	day := func(d, h, m int) time.Time { return time.Date(2026, 5, 4+d, h, m, 0, 0, time.UTC) }
	clk := clock.NewFake(day(0, 12, 0))
	runner := &fakeRunner{calls: make(chan *backupCall, 16)}
	events := &eventLog{}
	s, err := policy.New(policy.Config{
		Clock: clk, Store: db, Runner: runner, Inventory: e.inv,
		MaxConcurrent: 1, // one at a time: the start order shows the priority
		RetryBackoff:  10 * time.Minute,
		OnEvent:       events.add, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(guard):
			t.Error("scheduler did not stop")
		}
	})
	syncNow := func() {
		t.Helper()
		sctx, scancel := context.WithTimeout(e.ctx, guard)
		defer scancel()
		if err := s.Sync(sctx); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	set := func(at time.Time) { // Sync waits for the selection to be resolved against the lab
		t.Helper()
		syncNow()
		clk.Set(at)
		syncNow()
	}
	// backUp waits for the next backup, checks it is vm and lets it succeed.
	backUp := func(vm string) {
		t.Helper()
		select {
		case c := <-runner.calls:
			if c.vm.InstanceUUID != vm {
				t.Fatalf("backing up %s (%s), want %s", c.vm.Name, c.vm.InstanceUUID, vm)
			}
			n := len(events.vms(policy.EventVMBackedUp))
			c.result <- nil
			for deadline := time.Now().Add(guard); len(events.vms(policy.EventVMBackedUp)) == n; {
				if time.Now().After(deadline) {
					t.Fatalf("backup of %s finished but was not recorded", vm)
				}
				syncNow()
			}
		case <-time.After(guard):
			t.Fatalf("no backup started, want %s", vm)
		}
	}
	idle := func(when string) {
		t.Helper()
		syncNow()
		if b := s.Status().Backups; len(b) != 0 {
			t.Fatalf("%s: running %+v, want nothing", when, b)
		}
		select {
		case c := <-runner.calls:
			t.Fatalf("%s: backing up %s, want nothing", when, c.vm.Name)
		default:
		}
	}
	syncNow()
	idle("monday noon, window closed")

	// Monday night: only the VM in the folder.
	set(day(0, 18, 0))
	backUp(stays)
	// Past midnight: Monday 18:00-24:00 and Tuesday 00:00-06:00 are one
	// occurrence, so the VM is not backed up again.
	set(day(1, 0, 30))
	idle("tuesday 00:30, same night")
	set(day(1, 5, 59))
	idle("tuesday 05:59, same night")
	set(day(1, 12, 0))
	idle("tuesday noon, window closed")

	// During the day an administrator moves a VM into the folder.
	e.moveIntoFolder(protected, clusterVM0)
	set(day(1, 18, 0))
	backUp(moved) // never protected: first
	backUp(stays)
	if got := events.vms(policy.EventSelectionNew); len(got) != 1 || got[0] != moved {
		t.Fatalf("selection.new events for %v, want [%s]", got, moved)
	}
	set(day(2, 1, 0))
	idle("wednesday 01:00, same night")

	// And one out again.
	set(day(2, 12, 0))
	e.moveIntoFolder(vmRoot, hostVM0)
	set(day(2, 18, 0))
	backUp(moved)
	idle("wednesday night after the only backup")
	if got := events.vms(policy.EventSelectionVanished); len(got) != 1 || got[0] != stays {
		t.Fatalf("selection.vanished events for %v, want [%s]", got, stays)
	}
	if got := events.vms(policy.EventVMBackedUp); fmt.Sprint(got) != fmt.Sprint([]string{stays, moved, stays, moved}) {
		t.Fatalf("backed up %v", got)
	}
}
