package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vmvault/vmvault/internal/state"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// ErrSameAdministrator is an approval by the administrator who asked for
// the action: the second pair of eyes must be another's (403 forbidden).
var ErrSameAdministrator = errors.New("the administrator who asked for an action cannot approve it")

// Executor carries out one kind of action. It must be safe to run again
// after an interruption (a deletion of a point already gone fails
// harmlessly).
type Executor func(ctx context.Context, a api.Approval) error

// Config wires a Manager.
type Config struct {
	// DB is the state database that holds the bucket; required.
	DB *state.DB
	// Delay is how long an action waits for a second administrator before it
	// executes by itself; 0 executes at once (Manager.Delay tells web).
	Delay time.Duration
	Clock clock.Clock
	// Executors run each kind (api.ApprovalDeletePoint, …); a kind without
	// one fails when due.
	Executors map[string]Executor
	// OnEvent receives the audit event of every execution (approval.execute,
	// outcome ok or failed); the caller records it in the event log.
	OnEvent func(policy.Event)
	// Poll bounds how long Run sleeps between looks at the due actions; default a minute.
	Poll time.Duration
}

// Manager holds pending actions and executes them; it implements
// web.Approvals. Its methods are safe for concurrent use.
type Manager struct {
	cfg  Config
	st   *store
	wake chan struct{}
}

// New keeps the actions in cfg.DB (state.Open created their bucket).
func New(cfg Config) (*Manager, error) {
	if cfg.DB == nil {
		return nil, errors.New("approval: DB is required")
	}
	if cfg.Delay < 0 {
		return nil, fmt.Errorf("approval: negative delay %s", cfg.Delay)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Minute
	}
	st, err := newStore(cfg.DB)
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, st: st, wake: make(chan struct{}, 1)}, nil
}

// Delay is the configured delay; 0 means destructive actions run at once.
func (m *Manager) Delay() time.Duration { return m.cfg.Delay }

// Request holds an action until now + Delay. An open action of the same
// kind on the same subject is a conflict naming it.
func (m *Manager) Request(ctx context.Context, r api.ApprovalRequest) (api.Approval, error) {
	if _, ok := m.cfg.Executors[r.Kind]; !ok {
		return api.Approval{}, fmt.Errorf("approval kind %q is not known", r.Kind)
	}
	now := m.cfg.Clock.Now().UTC()
	a := api.Approval{ID: newID(), Kind: r.Kind, Subject: r.Subject, Summary: r.Summary, Repository: r.Repository,
		Retention: r.Retention, RequestedBy: r.RequestedBy, RequestedAt: now, EffectiveAt: now.Add(m.cfg.Delay),
		Status: api.ApprovalPending}
	if err := m.st.create(a, func(o api.Approval) error {
		if o.Kind == r.Kind && o.Subject == r.Subject && open(o.Status) {
			return api.Kind(fmt.Errorf("%s of %s is already waiting as approval %s (effective %s): approve or cancel it",
				r.Kind, r.Subject, o.ID, o.EffectiveAt.UTC().Format(time.RFC3339)), api.ErrConflict)
		}
		return nil
	}); err != nil {
		return api.Approval{}, err
	}
	m.poke()
	return a, nil
}

func open(status string) bool {
	return status == api.ApprovalPending || status == api.ApprovalExecuting
}

// List returns the actions, newest request first; status filters when set.
func (m *Manager) List(ctx context.Context, status string) ([]api.Approval, error) {
	all, err := m.st.list()
	if err != nil {
		return nil, err
	}
	out := []api.Approval{}
	for _, a := range all {
		if status == "" || a.Status == status {
			out = append(out, a)
		}
	}
	return out, nil
}

// Get returns one action.
func (m *Manager) Get(ctx context.Context, id string) (api.Approval, error) { return m.st.get(id) }

// Approve executes a pending action at once on behalf of user, who must
// not be the one who asked for it. The answer is the action as it ended;
// the error is the execution's when it failed.
func (m *Manager) Approve(ctx context.Context, id, user string) (api.Approval, error) {
	a, err := m.st.get(id)
	if err != nil {
		return a, err
	}
	if strings.EqualFold(a.RequestedBy, user) {
		return a, api.Kind(fmt.Errorf("approve %s: %w (%s asked for it); another administrator must approve it, or it executes by itself at %s",
			id, ErrSameAdministrator, a.RequestedBy, a.EffectiveAt.UTC().Format(time.RFC3339)), auth.ErrForbidden)
	}
	a, err = m.st.transition(id, api.ApprovalPending, func(a *api.Approval) {
		a.Status, a.ApprovedBy = api.ApprovalExecuting, user
	})
	if errors.Is(err, errStatus) {
		return m.notPending(id, "approve")
	}
	if err != nil {
		return a, err
	}
	return m.execute(ctx, a)
}

// Cancel drops a pending action on behalf of user (any administrator).
func (m *Manager) Cancel(ctx context.Context, id, user string) (api.Approval, error) {
	now := m.cfg.Clock.Now().UTC()
	a, err := m.st.transition(id, api.ApprovalPending, func(a *api.Approval) {
		a.Status, a.CancelledBy, a.DoneAt = api.ApprovalCancelled, user, now
	})
	if errors.Is(err, errStatus) {
		return m.notPending(id, "cancel")
	}
	return a, err
}

func (m *Manager) notPending(id, verb string) (api.Approval, error) {
	a, err := m.st.get(id)
	if err != nil {
		return a, err
	}
	return a, api.Kind(fmt.Errorf("%s approval %s: it is %s, not pending", verb, id, a.Status), api.ErrConflict)
}

// execute runs a claimed (executing) action and records how it ended.
// The action is claimed: a caller that hangs up (or a daemon stopping)
// must not leave it half-done and failed, so it runs detached from ctx.
func (m *Manager) execute(ctx context.Context, a api.Approval) (api.Approval, error) {
	ctx = context.WithoutCancel(ctx)
	var err error
	if ex, ok := m.cfg.Executors[a.Kind]; ok {
		err = ex(ctx, a)
	} else {
		err = fmt.Errorf("no executor for %q", a.Kind)
	}
	now := m.cfg.Clock.Now().UTC()
	done, serr := m.st.transition(a.ID, api.ApprovalExecuting, func(x *api.Approval) {
		x.DoneAt = now
		if err != nil {
			x.Status, x.Error = api.ApprovalFailed, err.Error()
		} else {
			x.Status = api.ApprovalExecuted
		}
	})
	if serr != nil {
		serr = fmt.Errorf("record the end of approval %s: %w", a.ID, serr)
		if err == nil {
			err = serr
		}
		done = a
	}
	m.emit(done, err)
	if err != nil {
		return done, fmt.Errorf("execute approval %s (%s of %s): %w", a.ID, a.Kind, a.Subject, err)
	}
	return done, nil
}

func (m *Manager) emit(a api.Approval, err error) {
	if m.cfg.OnEvent == nil {
		return
	}
	by := a.ApprovedBy
	how := "approved by " + by
	if by == "" {
		how = fmt.Sprintf("its delay ended (asked by %s)", a.RequestedBy)
	}
	e := policy.Event{Time: m.cfg.Clock.Now(), Severity: policy.SeverityInfo, Kind: "approval.execute", Subject: a.Subject,
		Repository: a.Repository, User: by, Outcome: "ok"}
	e.Message = fmt.Sprintf("approval %s executed: %s; %s", a.ID, a.Summary, how)
	if err != nil {
		e.Severity, e.Outcome, e.Error = policy.SeverityWarning, "failed", err.Error()
		e.Message = fmt.Sprintf("approval %s failed: %s; %s: %v", a.ID, a.Summary, how, err)
	}
	m.cfg.OnEvent(e)
}

func (m *Manager) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// RunDue executes every pending action whose time has come and returns
// how many it ran (the runner's step; tests call it directly).
func (m *Manager) RunDue(ctx context.Context) (int, time.Time, error) {
	all, err := m.st.list()
	if err != nil {
		return 0, time.Time{}, err
	}
	now := m.cfg.Clock.Now()
	var next time.Time
	n := 0
	for i := len(all) - 1; i >= 0; i-- { // oldest request first
		a := all[i]
		if a.Status != api.ApprovalPending {
			continue
		}
		if a.EffectiveAt.After(now) {
			if next.IsZero() || a.EffectiveAt.Before(next) {
				next = a.EffectiveAt
			}
			continue
		}
		if ctx.Err() != nil {
			return n, next, ctx.Err()
		}
		c, err := m.st.transition(a.ID, api.ApprovalPending, func(a *api.Approval) { a.Status = api.ApprovalExecuting })
		if errors.Is(err, errStatus) {
			continue // approved or cancelled meanwhile
		}
		if err != nil {
			return n, next, err
		}
		_, _ = m.execute(ctx, c) // the failure is in the record and the event
		n++
	}
	return n, next, nil
}

// Run executes due actions until ctx ends: at start (after putting back
// actions an earlier process left executing), when one falls due, and at
// least every Poll.
func (m *Manager) Run(ctx context.Context, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if n, err := m.st.reopen(); err != nil {
		logf("approvals: %v", err)
	} else if n > 0 {
		logf("approvals: %d actions interrupted by the previous stop run again", n)
	}
	for {
		_, next, err := m.RunDue(ctx)
		if err != nil && ctx.Err() == nil {
			logf("approvals: %v", err)
		}
		wait := m.cfg.Poll
		if !next.IsZero() {
			if d := next.Sub(m.cfg.Clock.Now()); d < wait {
				wait = max(d, 0)
			}
		}
		t := m.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-m.wake:
			t.Stop()
		case <-t.C():
		}
	}
}
