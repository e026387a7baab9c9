package scripte2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/backups"
	"github.com/vmvault/vmvault/service/inventory"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

const guard = 60 * time.Second // only turns a deadlock into a failure

const (
	goodVM = "DC0_H0_VM0"
	badVM  = "DC0_H0_VM1" // its pre-VM script fails
)

// events collects the scheduler's events and wakes waiters.
type events struct {
	mu      sync.Mutex
	all     []policy.Event
	changed chan struct{}
}

func (e *events) add(ev policy.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
	close(e.changed)
	e.changed = make(chan struct{})
}

// wait waits for an event that matches.
func (e *events) wait(t *testing.T, what string, match func(policy.Event) bool) policy.Event {
	t.Helper()
	deadline := time.After(guard)
	for {
		e.mu.Lock()
		ch := e.changed
		for _, ev := range e.all {
			if match(ev) {
				e.mu.Unlock()
				return ev
			}
		}
		e.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestPreVMScriptFailureSkipsVM runs a job of two lab VMs whose pre-VM
// script fails (onFailure fail, the default) for one of them: that VM gets
// no snapshot and no restore point, its outcome has the script's exit
// status and stderr, the other VM is backed up, and the post-job script
// sees VMVAULT_JOB_RESULT=partial.
func TestPreVMScriptFailureSkipsVM(t *testing.T) {
	ctx := context.Background()
	l := labtest.Start(t, lab.Options{})
	c := labtest.Connect(t, labtest.Config(l, "scripte2e"))
	repo := labtest.Repo(t)
	inv := inventory.New(c)
	runner := backups.New(c, map[string]*repository.Repository{"repo1": repo}, []string{"repo1"}, inv)

	all, err := inv.VMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uuid := map[string]string{}
	for _, vm := range all {
		uuid[vm.Name] = vm.InstanceUUID
	}
	if uuid[goodVM] == "" || uuid[badVM] == "" {
		t.Fatalf("lab VMs %v", uuid)
	}
	for _, vm := range []string{goodVM, badVM} {
		if err := l.ResetSnapshotRequests(vm); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	record := filepath.Join(dir, "hooks.log")
	sh := func(body string) []string { return []string{"/bin/sh", "-c", body} }
	job := policy.NewJob("scripted", "scripted job", "repo1", time.UTC)
	job.Selection = policy.Selection{VMs: []string{uuid[goodVM], uuid[badVM]}}
	job.Scripts = policy.Scripts{
		PreVM:   &policy.Script{Command: sh(`if [ "$VMVAULT_VM_NAME" = ` + badVM + ` ]; then echo "database refused to freeze" >&2; exit 7; fi`), TimeoutSeconds: 30},
		PostVM:  &policy.Script{Command: sh(`echo "postVM $VMVAULT_VM_NAME $VMVAULT_VM_RESULT $VMVAULT_RESTORE_POINT" >> "` + record + `"`)},
		PostJob: &policy.Script{Command: sh(`echo "postJob $VMVAULT_JOB_ID $VMVAULT_JOB_RESULT" >> "` + record + `"`)},
	}
	if _, err := job.Validate(ctx, policy.ValidateEnv{Inventory: inv}); err != nil {
		t.Fatalf("validate: %v", err)
	}
	db, err := state.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PutJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	ev := &events{changed: make(chan struct{})}
	s, err := policy.New(policy.Config{
		Clock: clock.NewFake(time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)), Store: db, Runner: runner, Inventory: inv,
		MaxConcurrent: 1, RetryBackoff: 10 * time.Minute, OnEvent: ev.add, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
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
	runID, err := s.RunNow(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	ev.wait(t, "the post-job script", func(e policy.Event) bool {
		return (e.Kind == policy.EventScriptRan || e.Kind == policy.EventScriptFailed) && strings.HasPrefix(e.Message, "post-job script")
	})

	run, err := db.Run(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	bad, good := run.Outcome(uuid[badVM]), run.Outcome(uuid[goodVM])
	if bad == nil || good == nil {
		t.Fatalf("run %+v", run)
	}
	if bad.Status != policy.OutcomeFailed || bad.Point != "" || !strings.Contains(bad.Error, "exited with status 7") || !strings.Contains(bad.Error, "database refused to freeze") {
		t.Errorf("%s: outcome %+v", badVM, *bad)
	}
	if good.Status != policy.OutcomeSucceeded || good.Point == "" {
		t.Fatalf("%s: outcome %+v", goodVM, *good)
	}

	// What vCenter saw: a snapshot of the good VM only.
	if reqs, err := l.SnapshotRequests(badVM); err != nil || len(reqs) != 0 {
		t.Errorf("%s: %d snapshot requests (%v), want none", badVM, len(reqs), err)
	}
	if reqs, err := l.SnapshotRequests(goodVM); err != nil || len(reqs) == 0 {
		t.Errorf("%s: no snapshot request (%v)", goodVM, err)
	}
	if snaps, err := l.Snapshots(goodVM); err != nil || len(snaps) != 0 {
		t.Errorf("%s: snapshots left %v (%v)", goodVM, snaps, err)
	}
	// What the repository holds: one point, of the good VM.
	points, err := repo.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 1 || points[0].VM.InstanceUUID != uuid[goodVM] || points[0].ID != good.Point {
		t.Errorf("repository points %+v, want only %s of %s", points, good.Point, goodVM)
	}

	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	want := "postVM " + goodVM + " success " + good.Point + "\npostJob scripted partial\n"
	if string(b) != want {
		t.Errorf("hooks recorded\n%s\nwant\n%s", b, want)
	}
}
