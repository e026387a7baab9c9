package task

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

// State is where a task is in its life.
type State string

// Task states. Succeeded, Failed and Cancelled are final.
const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// Final reports whether the state is terminal.
func (s State) Final() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Progress is a task's progress. Rate is bytes per second since the task
// started running; ETASeconds is zero when unknown.
type Progress struct {
	Phase      string  `json:"phase,omitempty"`
	Done       int64   `json:"done"`
	Total      int64   `json:"total"`
	Rate       float64 `json:"rate"`
	ETASeconds float64 `json:"etaSeconds,omitempty"`
}

// LogLine is one line of a task's log.
type LogLine struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"` // "info", "warning", "error"
	Message string    `json:"message"`
}

// Info is a snapshot of a task, and the summary persisted when it finishes.
type Info struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`    // e.g. "backup", "restore", "check", "reclaim"
	Subject  string    `json:"subject"` // what it works on: a VM, a repository
	State    State     `json:"state"`
	Progress Progress  `json:"progress"`
	Created  time.Time `json:"created"`
	Started  time.Time `json:"started,omitzero"`
	Ended    time.Time `json:"ended,omitzero"`
	Error    string    `json:"error,omitempty"`
	Result   any       `json:"result,omitempty"` // what the operation returned (JSON-encodable)
}

// Update is one event on a subscription.
type Update struct {
	Type string   `json:"type"` // "progress", "log" or "state"
	Task Info     `json:"task"`
	Log  *LogLine `json:"log,omitempty"`
}

// Func is the body of a task. It must return promptly once ctx is
// cancelled, with an error wrapping ctx.Err(). Its result is kept in
// Info.Result and must be JSON-encodable.
type Func func(ctx context.Context, rep *Reporter) (result any, err error)

// Store persists summaries of finished tasks. Implementations are safe for
// concurrent use.
type Store interface {
	PutTask(ctx context.Context, t Info) error
	// Task returns one summary or an error wrapping ErrNotFound.
	Task(ctx context.Context, id string) (Info, error)
	// Tasks returns up to limit summaries (limit <= 0: all), newest first.
	Tasks(ctx context.Context, limit int) ([]Info, error)
}

// Config sets up a Registry. Zero values mean the defaults.
type Config struct {
	Clock       clock.Clock // default clock.Real()
	Store       Store       // nil: summaries are kept in memory only
	MaxRunning  int         // tasks running at once; default 4 (more wait as queued)
	MaxQueued   int         // tasks queued at once before Start returns ErrBusy; default 256
	MaxLogLines int         // log lines kept per task (oldest dropped); default 500
	MaxFinished int         // finished tasks kept in memory; default 100
	SubBuffer   int         // updates buffered per subscriber before it is dropped; default 64
	// ProgressEvery throttles progress updates to subscribers (the state
	// is always current for Get); default 250ms.
	ProgressEvery time.Duration
	// Logf receives failures that can only be logged (a store write). Nil discards.
	Logf func(format string, args ...any)
}

// Registry runs and tracks tasks. It is safe for concurrent use.
type Registry struct {
	cfg  Config
	sem  chan struct{}
	wg   sync.WaitGroup
	root context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	tasks    map[string]*entry
	finished []string // ids of finished tasks still in memory, oldest first
	queued   int
	closed   bool
	allSubs  map[chan Update]struct{} // registry-wide subscribers (SubscribeAll)
}

type entry struct {
	info         Info
	logs         []LogLine // ring
	logStart     int
	cancel       context.CancelFunc
	subs         map[chan Update]struct{}
	lastProgress time.Time
	cancelled    bool
}

// New returns a registry.
func New(cfg Config) *Registry {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 4
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = 256
	}
	if cfg.MaxLogLines <= 0 {
		cfg.MaxLogLines = 500
	}
	if cfg.MaxFinished <= 0 {
		cfg.MaxFinished = 100
	}
	if cfg.SubBuffer <= 0 {
		cfg.SubBuffer = 64
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 250 * time.Millisecond
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	root, stop := context.WithCancel(context.Background())
	return &Registry{cfg: cfg, sem: make(chan struct{}, cfg.MaxRunning), root: root, stop: stop, tasks: map[string]*entry{}, allSubs: map[chan Update]struct{}{}}
}

func newID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%016x-%s", uint64(now.UnixNano()), hex.EncodeToString(b[:]))
}

// Start queues fn as a new task and returns its first snapshot. The task
// runs as soon as fewer than MaxRunning tasks run.
func (r *Registry) Start(kind, subject string, fn Func) (Info, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return Info{}, ErrClosed
	}
	if r.queued >= r.cfg.MaxQueued {
		r.mu.Unlock()
		return Info{}, ErrBusy
	}
	now := r.cfg.Clock.Now()
	ctx, cancel := context.WithCancel(r.root)
	e := &entry{
		info:   Info{ID: newID(now), Kind: kind, Subject: subject, State: Queued, Created: now},
		cancel: cancel,
		subs:   map[chan Update]struct{}{},
	}
	r.tasks[e.info.ID] = e
	r.queued++
	r.wg.Add(1)
	info := e.info
	r.broadcastAllLocked(Update{Type: "state", Task: info})
	r.mu.Unlock()
	// Recorded before it runs (outside the lock: it is a disk write), so a
	// crash leaves a trace Recover can close.
	r.persist(info)
	go r.run(ctx, e, fn)
	return info, nil
}

func (r *Registry) persist(info Info) {
	if r.cfg.Store == nil {
		return
	}
	// The summary must be stored even when the registry is shutting down.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.root), 10*time.Second)
	defer cancel()
	if err := r.cfg.Store.PutTask(ctx, info); err != nil {
		r.cfg.Logf("persist task %s: %v", info.ID, err)
	}
}

// Interrupted is the error of a task that was queued or running when the
// appliance stopped without finishing it (a crash, a kill).
const Interrupted = "interrupted: the appliance stopped while the task was queued or running"

// Recover marks the stored tasks that never finished (the previous
// process died) as failed with Interrupted. Call it once at start, before
// Start. It returns how many it closed.
func (r *Registry) Recover(ctx context.Context) (int, error) {
	if r.cfg.Store == nil {
		return 0, nil
	}
	all, err := r.cfg.Store.Tasks(ctx, 0)
	if err != nil {
		return 0, fmt.Errorf("recover tasks: %w", err)
	}
	n := 0
	for _, t := range all {
		if t.State.Final() {
			continue
		}
		r.mu.Lock()
		_, live := r.tasks[t.ID]
		r.mu.Unlock()
		if live {
			continue
		}
		t.State, t.Error, t.Ended = Failed, Interrupted, r.cfg.Clock.Now()
		if err := r.cfg.Store.PutTask(ctx, t); err != nil {
			return n, fmt.Errorf("recover task %s: %w", t.ID, err)
		}
		n++
	}
	return n, nil
}

func (r *Registry) run(ctx context.Context, e *entry, fn Func) {
	defer r.wg.Done()
	defer e.cancel()
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		r.mu.Lock()
		r.queued--
		r.mu.Unlock()
		r.finish(e, nil, ctx.Err())
		return
	}
	defer func() { <-r.sem }()
	r.mu.Lock()
	r.queued--
	e.info.State = Running
	e.info.Started = r.cfg.Clock.Now()
	r.broadcastLocked(e, Update{Type: "state", Task: e.info})
	r.mu.Unlock()

	var (
		res any
		err error
	)
	func() {
		defer func() {
			// A panicking task must not take the daemon down; it fails.
			if p := recover(); p != nil {
				err = fmt.Errorf("task panicked: %v", p)
			}
		}()
		res, err = fn(ctx, &Reporter{r: r, e: e})
	}()
	r.finish(e, res, err)
}

func (r *Registry) finish(e *entry, res any, err error) {
	r.mu.Lock()
	e.info.Ended = r.cfg.Clock.Now()
	e.info.Result = res
	switch {
	case err == nil:
		e.info.State = Succeeded
	case e.cancelled && errors.Is(err, context.Canceled), errors.Is(err, context.Canceled) && r.closed:
		e.info.State = Cancelled
		e.info.Error = err.Error()
	default:
		e.info.State = Failed
		e.info.Error = err.Error()
	}
	info := e.info
	r.broadcastLocked(e, Update{Type: "state", Task: info})
	for ch := range e.subs {
		close(ch)
		delete(e.subs, ch)
	}
	r.finished = append(r.finished, info.ID)
	for len(r.finished) > r.cfg.MaxFinished {
		delete(r.tasks, r.finished[0])
		r.finished = r.finished[1:]
	}
	r.mu.Unlock()
	r.persist(info)
}

// broadcastLocked sends u to every subscriber; one whose buffer is full is
// dropped (channel closed) so a slow reader never blocks a task.
func (r *Registry) broadcastLocked(e *entry, u Update) {
	for ch := range e.subs {
		select {
		case ch <- u:
		default:
			close(ch)
			delete(e.subs, ch)
		}
	}
	if u.Type != "log" {
		r.broadcastAllLocked(u)
	}
}

func (r *Registry) broadcastAllLocked(u Update) {
	for ch := range r.allSubs {
		select {
		case ch <- u:
		default:
			close(ch)
			delete(r.allSubs, ch)
		}
	}
}

// SubscribeAll returns a channel of every task's "state" updates (queued,
// running, final) and throttled "progress" updates (at most one per
// ProgressEvery per task, plus phase changes and completion), without log
// lines. The channel holds buffer updates (<= 0: SubBuffer); a subscriber
// that falls that far behind is dropped: its channel is closed. The
// channel is also closed by unsubscribe and by Close. Subscribers reports
// how many are live, so callers can prove none leaks.
func (r *Registry) SubscribeAll(buffer int) (updates <-chan Update, unsubscribe func()) {
	if buffer <= 0 {
		buffer = r.cfg.SubBuffer
	}
	ch := make(chan Update, buffer)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		close(ch)
		return ch, func() {}
	}
	r.allSubs[ch] = struct{}{}
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.allSubs[ch]; ok {
			delete(r.allSubs, ch)
			close(ch)
		}
	}
}

// Subscribers returns the number of live SubscribeAll subscriptions.
func (r *Registry) Subscribers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.allSubs)
}

// Get returns a task's snapshot, from memory or from the store.
func (r *Registry) Get(ctx context.Context, id string) (Info, error) {
	r.mu.Lock()
	e, ok := r.tasks[id]
	var info Info
	if ok {
		info = e.info
	}
	r.mu.Unlock()
	if ok {
		return info, nil
	}
	if r.cfg.Store != nil {
		return r.cfg.Store.Task(ctx, id)
	}
	return Info{}, fmt.Errorf("task %s: %w", id, ErrNotFound)
}

// Logs returns the log lines kept for a task in memory (oldest first).
func (r *Registry) Logs(id string) ([]LogLine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.tasks[id]
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	return e.logsLocked(), nil
}

func (e *entry) logsLocked() []LogLine {
	out := make([]LogLine, 0, len(e.logs))
	out = append(out, e.logs[e.logStart:]...)
	return append(out, e.logs[:e.logStart]...)
}

// List returns the tasks in memory (queued, running, recently finished) and
// the stored summaries, newest first, at most limit (<= 0: no limit).
func (r *Registry) List(ctx context.Context, limit int) ([]Info, error) {
	r.mu.Lock()
	out := make([]Info, 0, len(r.tasks))
	seen := map[string]bool{}
	for id, e := range r.tasks {
		out = append(out, e.info)
		seen[id] = true
	}
	r.mu.Unlock()
	if r.cfg.Store != nil {
		stored, err := r.cfg.Store.Tasks(ctx, limit)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		for _, t := range stored {
			if !seen[t.ID] {
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Active returns how many tasks are queued and running.
func (r *Registry) Active() (queued, running int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.tasks {
		switch e.info.State {
		case Queued:
			queued++
		case Running:
			running++
		}
	}
	return queued, running
}

// Cancel cancels a queued or running task. The task ends as Cancelled once
// its function returns.
func (r *Registry) Cancel(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.tasks[id]
	if !ok {
		return fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	if e.info.State.Final() {
		return fmt.Errorf("task %s: %w", id, ErrFinished)
	}
	e.cancelled = true
	e.cancel()
	return nil
}

// Subscribe returns a task's snapshot, its log so far and a channel of
// further updates. The channel is closed when the task finishes (after the
// final "state" update) or when the subscriber falls SubBuffer updates
// behind; call unsubscribe when done. For a finished task the channel is
// already closed.
func (r *Registry) Subscribe(ctx context.Context, id string) (snap Info, logs []LogLine, updates <-chan Update, unsubscribe func(), err error) {
	r.mu.Lock()
	e, ok := r.tasks[id]
	if !ok {
		r.mu.Unlock()
		info, err := r.Get(ctx, id)
		if err != nil {
			return Info{}, nil, nil, nil, err
		}
		ch := make(chan Update)
		close(ch)
		return info, nil, ch, func() {}, nil
	}
	defer r.mu.Unlock()
	ch := make(chan Update, r.cfg.SubBuffer)
	if e.info.State.Final() {
		close(ch)
		return e.info, e.logsLocked(), ch, func() {}, nil
	}
	e.subs[ch] = struct{}{}
	unsub := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := e.subs[ch]; ok {
			delete(e.subs, ch)
			close(ch)
		}
	}
	return e.info, e.logsLocked(), ch, unsub, nil
}

// Close cancels every task, waits for them to end (or ctx), refuses new
// ones and closes every SubscribeAll channel.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	// Registry-wide streams end now: the final states of the tasks being
	// cancelled are in the store for the next process to show.
	for ch := range r.allSubs {
		close(ch)
		delete(r.allSubs, ch)
	}
	r.mu.Unlock()
	r.stop()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close task registry: %w", ctx.Err())
	}
}

// Reporter is how a running task reports. Its methods are safe for
// concurrent use and never block on subscribers.
type Reporter struct {
	r *Registry
	e *entry
}

// ID returns the task's id.
func (p *Reporter) ID() string { return p.e.info.ID }

// Progress records progress: phase, bytes done and total (total 0: unknown).
func (p *Reporter) Progress(phase string, done, total int64) {
	r := p.r
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := p.e
	if e.info.State.Final() {
		return
	}
	pr := Progress{Phase: phase, Done: done, Total: total}
	if el := now.Sub(e.info.Started).Seconds(); el > 0 && done > 0 {
		pr.Rate = float64(done) / el
		if total > done {
			pr.ETASeconds = float64(total-done) / pr.Rate
		}
	}
	phaseChanged := pr.Phase != e.info.Progress.Phase
	e.info.Progress = pr
	if phaseChanged || now.Sub(e.lastProgress) >= r.cfg.ProgressEvery || (total > 0 && done >= total) {
		e.lastProgress = now
		r.broadcastLocked(e, Update{Type: "progress", Task: e.info})
	}
}

// Log appends a line at a level ("info", "warning", "error").
func (p *Reporter) Log(level, msg string) {
	r := p.r
	line := LogLine{Time: r.cfg.Clock.Now(), Level: level, Message: msg}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := p.e
	if len(e.logs) < r.cfg.MaxLogLines {
		e.logs = append(e.logs, line)
	} else {
		e.logs[e.logStart] = line
		e.logStart = (e.logStart + 1) % len(e.logs)
	}
	r.broadcastLocked(e, Update{Type: "log", Task: e.info, Log: &line})
}

// Logf appends an info line.
func (p *Reporter) Logf(format string, args ...any) { p.Log("info", fmt.Sprintf(format, args...)) }
