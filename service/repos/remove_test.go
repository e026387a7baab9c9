package repos

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web/api"
)

// Remove while readers list, describe and look up points of the
// repository being removed (-race): no reader ever sees it closed — each
// call either finds it open or finds it gone (not found) — because Remove
// waits for the calls that hold it before it hands it back to be closed.
// Afterwards it is gone from every listing, and the other repository is
// untouched.
func TestRemoveWhileReadersHoldIt(t *testing.T) {
	ctx := context.Background()
	for round := range 5 {
		f := newFixture(t)
		second := repository.TestRepository(t)
		p := commitPoint(t, second, policy.VM{InstanceUUID: "vm-second", Name: "db01"}, "", time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC))
		if err := f.set.Add("second", second); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		// warm: every reader has gone round round+1 times (Remove lands at
		// a different point of their loops each round); afterClose: every
		// reader has gone round once entirely after the repository was
		// removed and closed.
		var warm, afterClose sync.WaitGroup
		var closed atomic.Bool
		var mu sync.Mutex
		var bad []error
		fail := func(what string, err error) {
			// Gone is a fine answer once Remove ran; closed is not.
			if err == nil || errors.Is(err, api.ErrNotFound) {
				return
			}
			mu.Lock()
			bad = append(bad, errors.New(what+": "+err.Error()))
			mu.Unlock()
		}
		for range 4 {
			wg.Add(1)
			warm.Add(1)
			afterClose.Add(1)
			go func() {
				defer wg.Done()
				warmed, seenClosed := false, false
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					after := closed.Load()
					_, err := f.set.Points(ctx, api.PointFilter{})
					fail("points", err)
					_, err = f.set.Repositories(ctx)
					fail("repositories", err)
					_, err = f.set.Repository(ctx, "second")
					fail("repository", err)
					_, err = f.set.Point(ctx, p.ID)
					fail("point", err)
					if !warmed && i >= round {
						warmed = true
						warm.Done()
					}
					if after && !seenClosed {
						seenClosed = true
						afterClose.Done()
					}
				}
			}()
		}
		warm.Wait()
		r, err := f.set.Remove("second")
		if err != nil {
			t.Fatal(err)
		}
		if r != second {
			t.Fatal("Remove returned another repository")
		}
		// What the daemon does next: release its lock and files.
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		closed.Store(true)
		afterClose.Wait()
		close(stop)
		wg.Wait()
		if len(bad) > 0 {
			t.Fatalf("round %d: readers saw the removed repository closed: %v", round, bad[:min(3, len(bad))])
		}
		if got := f.set.Names(); len(got) != 1 || got[0] != "main" || f.set.Has("second") {
			t.Fatalf("names after Remove: %v", got)
		}
		pts, err := f.set.Points(ctx, api.PointFilter{})
		if err != nil || len(pts) != len(f.points) {
			t.Fatalf("points after Remove: %d, %v; want the %d of main", len(pts), err, len(f.points))
		}
		if _, err := f.set.Point(ctx, p.ID); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("a point of the removed repository: %v, want not found", err)
		}
		if _, err := f.set.Repository(ctx, "second"); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("the removed repository: %v, want not found", err)
		}
		if _, err := f.set.Remove("second"); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("removing it again: %v, want not found", err)
		}
	}
}

// Remove waits for a call that holds the repository and returns only once
// it released it.
func TestRemoveWaitsForACall(t *testing.T) {
	f := newFixture(t)
	_, release, err := f.set.acquire("main")
	if err != nil {
		t.Fatal(err)
	}
	detached := make(chan struct{})
	f.set.removing = func(string) { close(detached) }
	done := make(chan error, 1)
	go func() {
		_, err := f.set.Remove("main")
		done <- err
	}()
	select { // detached at once
	case <-detached:
	case err := <-done:
		t.Fatalf("Remove returned (%v) while a call held the repository", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Remove did not detach the repository")
	}
	if f.set.Has("main") {
		t.Fatal("Remove said it detached the repository, but the set still has it")
	}
	select {
	case err := <-done:
		t.Fatalf("Remove returned (%v) while a call held the repository", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, _, err := f.set.acquire("main"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("a new call found the repository being removed: %v", err)
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Remove did not return after the call released the repository")
	}
}

// An operation registered by Use keeps the repository: Remove refuses,
// names it and changes nothing; once it ends, Remove succeeds. Check and
// Reclaim register themselves.
func TestRemoveRefusedWhileAnOperationRuns(t *testing.T) {
	f := newFixture(t)
	_, done, err := f.set.Use("main", "backup of web01")
	if err != nil {
		t.Fatal(err)
	}
	_, done2, err := f.set.Use("main", "check")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.set.InUse("main"), ","); got != "backup of web01,check" {
		t.Fatalf("InUse %q", got)
	}
	_, err = f.set.Remove("main")
	var iu *InUseError
	if !errors.As(err, &iu) || !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "backup of web01, check") {
		t.Fatalf("Remove while operations run: %v, want an InUseError naming them", err)
	}
	if !f.set.Has("main") {
		t.Fatal("a refused Remove detached the repository")
	}
	done()
	done() // twice is harmless
	done2()
	if n := len(f.set.InUse("main")); n != 0 {
		t.Fatalf("%d operations after done", n)
	}

	// Check registers itself while it runs.
	seen := make(chan []string, 1)
	rep := &probeReporter{probe: func() {
		select {
		case seen <- f.set.InUse("main"):
		default:
		}
	}}
	if _, err := f.set.Check(context.Background(), "main", false, rep); err != nil {
		t.Fatal(err)
	}
	select {
	case ops := <-seen:
		if strings.Join(ops, ",") != "check" {
			t.Fatalf("operations during a check: %v", ops)
		}
	default:
		t.Fatal("the check reported nothing")
	}
	if _, err := f.set.Remove("main"); err != nil {
		t.Fatalf("Remove after the operations ended: %v", err)
	}
	if _, _, err := f.set.Use("main", "backup of web01"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Use of a removed repository: %v, want not found", err)
	}
}

// probeReporter calls probe on every report of a running operation.
type probeReporter struct{ probe func() }

func (p *probeReporter) Logf(string, ...any)           { p.probe() }
func (p *probeReporter) Progress(string, int64, int64) { p.probe() }
