package approval

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/state"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

type fixture struct {
	m      *Manager
	db     *state.DB
	clk    *clock.Fake
	mu     sync.Mutex
	ran    []string // subjects executed
	events []policy.Event
	fail   error
}

func newFixture(t *testing.T, delay time.Duration) *fixture {
	t.Helper()
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{db: db, clk: clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	f.m = f.manager(t, delay)
	return f
}

func (f *fixture) manager(t *testing.T, delay time.Duration) *Manager {
	t.Helper()
	ex := func(ctx context.Context, a api.Approval) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fail != nil {
			return f.fail
		}
		f.ran = append(f.ran, a.Subject)
		return nil
	}
	m, err := New(Config{DB: f.db, Delay: delay, Clock: f.clk,
		Executors: map[string]Executor{api.ApprovalDeletePoint: ex, api.ApprovalShortenRetention: ex},
		OnEvent: func(e policy.Event) {
			f.mu.Lock()
			f.events = append(f.events, e)
			f.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) executed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ran...)
}

func request(t *testing.T, m *Manager, subject, by string) api.Approval {
	t.Helper()
	a, err := m.Request(context.Background(), api.ApprovalRequest{Kind: api.ApprovalDeletePoint, Subject: subject, Summary: "delete " + subject, RequestedBy: by})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestApproveBySecondAdministrator(t *testing.T) {
	f := newFixture(t, 24*time.Hour)
	ctx := context.Background()
	a := request(t, f.m, "p1", "alice")
	if a.Status != api.ApprovalPending || !a.EffectiveAt.Equal(f.clk.Now().Add(24*time.Hour)) || a.RequestedBy != "alice" {
		t.Fatalf("requested: %+v", a)
	}
	// The same administrator (whatever the case) cannot approve.
	_, err := f.m.Approve(ctx, a.ID, "ALICE")
	if !errors.Is(err, ErrSameAdministrator) || !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("approve by the requester: %v", err)
	}
	if len(f.executed()) != 0 {
		t.Fatal("the requester's approval executed the action")
	}
	got, err := f.m.Approve(ctx, a.ID, "bob")
	if err != nil || got.Status != api.ApprovalExecuted || got.ApprovedBy != "bob" || got.DoneAt.IsZero() {
		t.Fatalf("approve by bob: %+v %v", got, err)
	}
	if ran := f.executed(); len(ran) != 1 || ran[0] != "p1" {
		t.Fatalf("executed %v", ran)
	}
	if len(f.events) != 1 || f.events[0].Kind != "approval.execute" || f.events[0].Outcome != "ok" || f.events[0].User != "bob" {
		t.Fatalf("events %+v", f.events)
	}
	// Once executed, neither approve nor cancel does anything more.
	if _, err := f.m.Approve(ctx, a.ID, "carol"); !errors.Is(err, api.ErrConflict) {
		t.Errorf("approve an executed action: %v", err)
	}
	if _, err := f.m.Cancel(ctx, a.ID, "carol"); !errors.Is(err, api.ErrConflict) {
		t.Errorf("cancel an executed action: %v", err)
	}
	if len(f.executed()) != 1 {
		t.Fatal("executed twice")
	}
	if _, err := f.m.Approve(ctx, "0000000000000000", "bob"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("approve an unknown id: %v", err)
	}
}

func TestCancelAndDuplicate(t *testing.T) {
	f := newFixture(t, time.Hour)
	ctx := context.Background()
	a := request(t, f.m, "p1", "alice")
	if _, err := f.m.Request(ctx, api.ApprovalRequest{Kind: api.ApprovalDeletePoint, Subject: "p1", RequestedBy: "bob"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("a second request for the same point: %v", err)
	}
	c, err := f.m.Cancel(ctx, a.ID, "alice") // the requester may cancel
	if err != nil || c.Status != api.ApprovalCancelled || c.CancelledBy != "alice" {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	f.clk.Advance(2 * time.Hour)
	if n, _, err := f.m.RunDue(ctx); err != nil || n != 0 || len(f.executed()) != 0 {
		t.Fatalf("a cancelled action ran: n=%d %v %v", n, err, f.executed())
	}
	// Cancelled, the point can be asked for again.
	request(t, f.m, "p1", "bob")
	if _, err := f.m.Request(ctx, api.ApprovalRequest{Kind: "remove-everything", Subject: "x"}); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
	pending, err := f.m.List(ctx, api.ApprovalPending)
	if err != nil || len(pending) != 1 || pending[0].RequestedBy != "bob" {
		t.Fatalf("pending: %+v %v", pending, err)
	}
}

// The runner executes an action when the clock passes its effective time,
// not before; a failure is recorded with its error and an event.
func TestRunExecutesWhenDue(t *testing.T) {
	f := newFixture(t, 24*time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := request(t, f.m, "p1", "alice")
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- f.m.Run(ctx, t.Logf) }()
	f.clk.BlockUntil(1, nil) // the runner sleeps
	f.clk.Advance(23 * time.Hour)
	f.clk.BlockUntil(1, nil)
	if got, _ := f.m.Get(ctx, a.ID); got.Status != api.ApprovalPending || len(f.executed()) != 0 {
		t.Fatalf("before the delay: %+v, executed %v", got, f.executed())
	}
	f.clk.Advance(time.Hour)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := f.m.Get(ctx, a.ID)
		if got.Status == api.ApprovalExecuted {
			if got.ApprovedBy != "" || len(f.executed()) != 1 {
				t.Fatalf("executed: %+v %v", got, f.executed())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not executed after the delay: %+v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	f.fail = errors.New("restore point p2 is locked until 2027-01-01T00:00:00Z (time lock)")
	b := request(t, f.m, "p2", "alice")
	f.clk.Advance(25 * time.Hour)
	if n, _, err := f.m.RunDue(context.Background()); err != nil || n != 1 {
		t.Fatalf("RunDue: %d %v", n, err)
	}
	got, _ := f.m.Get(context.Background(), b.ID)
	if got.Status != api.ApprovalFailed || got.Error != f.fail.Error() {
		t.Fatalf("failed action: %+v", got)
	}
	last := f.events[len(f.events)-1]
	if last.Outcome != "failed" || last.Severity != policy.SeverityWarning || last.Subject != "p2" {
		t.Fatalf("failure event %+v", last)
	}
}

// An action left executing by a stopped daemon runs again at the next start.
func TestReopenInterrupted(t *testing.T) {
	f := newFixture(t, 0)
	a := request(t, f.m, "p1", "alice")
	if _, err := f.m.st.transition(a.ID, api.ApprovalPending, func(a *api.Approval) { a.Status = api.ApprovalExecuting }); err != nil {
		t.Fatal(err)
	}
	m2 := f.manager(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m2.Run(ctx, t.Logf) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(f.executed()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the interrupted action did not run again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if got, _ := m2.Get(context.Background(), a.ID); got.Status != api.ApprovalExecuted {
		t.Fatalf("after the restart: %+v", got)
	}
}

// Requests for the same point at once: exactly one waits, the others are
// conflicts (the check and the save are one transaction).
func TestRequestConcurrentOnce(t *testing.T) {
	f := newFixture(t, time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.m.Request(context.Background(), api.ApprovalRequest{Kind: api.ApprovalDeletePoint, Subject: "p1", RequestedBy: "alice"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, api.ErrConflict):
			t.Errorf("request: %v", err)
		}
	}
	if list, _ := f.m.List(context.Background(), api.ApprovalPending); ok != 1 || len(list) != 1 {
		t.Fatalf("%d requests accepted, %d pending; want 1", ok, len(list))
	}
}

type fakeRemover struct {
	mu      sync.Mutex
	removed []string
	err     error
}

func (r *fakeRemover) RemoveRepository(ctx context.Context, name string) (api.RemovedRepository, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return api.RemovedRepository{}, r.err
	}
	r.removed = append(r.removed, name)
	return api.RemovedRepository{Name: name, DataKept: true}, nil
}

// A remove-repository action runs RemoveRepository's executor when due;
// a refusal at that time (a job began to use the repository while the
// action waited) fails the action with the remover's words, and the
// repository stays.
func TestRemoveRepositoryExecutor(t *testing.T) {
	f := newFixture(t, time.Hour)
	rm := &fakeRemover{}
	m, err := New(Config{DB: f.db, Delay: time.Hour, Clock: f.clk,
		Executors: map[string]Executor{KindRemoveRepository: RemoveRepository(rm)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ask := func(subject string) api.Approval {
		t.Helper()
		a, err := m.Request(ctx, api.ApprovalRequest{Kind: KindRemoveRepository, Subject: subject, Repository: subject,
			Summary: "remove repository " + subject, RequestedBy: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ok, refused := ask("offsite"), ask("busy")
	if n, _, err := m.RunDue(ctx); err != nil || n != 0 {
		t.Fatalf("before the delay: %d run, %v", n, err)
	}
	if _, err := m.Approve(ctx, ok.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	rm.mu.Lock()
	rm.err = errors.New(`repository "busy" is used by job nightly`)
	rm.mu.Unlock()
	f.clk.Advance(time.Hour + time.Second)
	if n, _, err := m.RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("after the delay: %d run, %v", n, err)
	}
	if got, _ := m.Get(ctx, ok.ID); got.Status != api.ApprovalExecuted || len(rm.removed) != 1 || rm.removed[0] != "offsite" {
		t.Fatalf("approved removal: %+v, removed %v", got, rm.removed)
	}
	if got, _ := m.Get(ctx, refused.ID); got.Status != api.ApprovalFailed || got.Error != `repository "busy" is used by job nightly` {
		t.Fatalf("refused removal: %+v", got)
	}
}
