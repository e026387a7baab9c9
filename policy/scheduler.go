package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

// Config wires a Scheduler. Clock, Store, Runner and Inventory are required.
type Config struct {
	Clock     clock.Clock
	Store     Store
	Runner    Runner
	Inventory Inventory

	// Maintainer and MaintenanceWindow enable repository maintenance; with
	// either unset no maintenance runs.
	Maintainer        Maintainer
	MaintenanceWindow Window

	MaxConcurrent     int            // backups at once on the appliance; 0 means 4
	RetryBackoff      time.Duration  // delay before the first retry; doubles per attempt; 0 means 15m
	MaxBackoff        time.Duration  // retry delay cap; 0 means 2h
	FullCheckInterval time.Duration  // full --read-data check at most this often; 0 means 7 days
	Location          *time.Location // appliance time zone for retention buckets; nil means UTC

	// OnEvent, if set, is called (from the scheduler goroutine, after the
	// event is stored) for every event: live console updates, mail. It must
	// not block.
	OnEvent func(Event)
	// Logf, if set, receives failures the scheduler can only log (a store
	// write that failed). Nil discards them.
	Logf func(format string, args ...any)
}

func (c *Config) defaults() error {
	if c.Clock == nil || c.Store == nil || c.Runner == nil || c.Inventory == nil {
		return errors.New("scheduler config: Clock, Store, Runner and Inventory are required")
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = 4
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 15 * time.Minute
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 2 * time.Hour
	}
	if c.FullCheckInterval <= 0 {
		c.FullCheckInterval = 7 * 24 * time.Hour
	}
	if c.Location == nil {
		c.Location = time.UTC
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// RunningBackup describes a backup in progress (for Status).
type RunningBackup struct {
	Job      string
	VM       string
	Name     string
	RunID    string
	Started  time.Time
	Progress Progress
}

// RunningMaintenance describes a maintenance task in progress (for Status).
type RunningMaintenance struct {
	Repository string
	Task       string // "reclaim", "quick-check", "full-check"
	Started    time.Time
	Cursor     string
}

// Status is a snapshot of what the scheduler is doing.
type Status struct {
	Backups     []RunningBackup
	Maintenance []RunningMaintenance
}

// Scheduler runs backup jobs inside their windows and maintenance inside the
// maintenance window. One goroutine (Run) owns every decision and all
// mutable state; backups and maintenance tasks run in goroutines it starts
// and waits for, and report back over a channel. Everything it decides is
// persisted through Store before it acts, so a restart resumes.
//
// Rules: inside its window a job backs up each selected VM at most once per
// window occurrence; VMs never protected go first, then the oldest last
// success; higher job priority first; at most MaxConcurrent backups on the
// appliance, Job.Concurrency per job, one backup per VM; a failed VM is
// retried with exponential backoff while the window is open; nothing new
// starts after the window closes, and a backup running at the close finishes
// or is cancelled (Job.OnWindowClose). Run now ignores the window. Windows
// that passed while the scheduler was not running are reported as missed.
// Maintenance on a repository never runs while a backup to it runs or waits.
type Scheduler struct {
	cfg     Config
	reqs    chan request
	results chan any
	stopped chan struct{}
	started atomic.Bool

	mu     sync.Mutex // guards status only
	status map[string]*RunningBackup
	mstat  map[string]*RunningMaintenance

	// Owned by the Run goroutine.
	wg           sync.WaitGroup
	jobs         map[string]Job
	jobSince     map[string]time.Time // missed-window detection starts here per job
	states       map[stateKey]*VMState
	runs         map[string]*activeRun
	current      map[string]*activeRun // job -> open scheduled run
	busyVM       map[string]*backupTask
	jobRunning   map[string]int
	repoRunning  map[string]int
	running      int
	resolveWait  map[string]time.Time // job -> when to retry a failed selection
	resolving    map[string]bool      // job -> its selection is being evaluated for a window
	resolveCount int                  // selections being evaluated (windows and run now)
	maint        map[string]*maintTask
	mstate       map[string]MaintenanceState
	maintFailed  map[string]string // repo+task -> maintenance occurrence id in which it failed
	lastStep     time.Time
	pctx         context.Context // for persistence: outlives the Run context's cancellation
	runCtx       context.Context
	shutdown     bool
}

type stateKey struct{ job, vm string }

type activeRun struct {
	rec     JobRun
	job     Job
	vms     map[string]VM
	closing bool // window closed: waiting for running backups
	tasks   int
}

type backupTask struct {
	run           *activeRun
	vm            VM
	cancel        context.CancelFunc
	cancelByClose bool
}

type backupDone struct {
	task *backupTask
	res  BackupResult
	err  error
}

type maintTask struct {
	repo   string
	kind   string
	occID  string
	cancel context.CancelFunc
}

type maintDone struct {
	task    *maintTask
	ms      MaintenanceState
	check   CheckResult
	removed int
	bytes   int64
	freed   int64
	err     error
}

type requestKind int

const (
	reqSync requestKind = iota
	reqRunNow
	reqReload
)

type request struct {
	kind  requestKind
	job   string
	reply chan reply
}

type reply struct {
	runID string
	err   error
}

// New returns a scheduler; call Run to start it.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Scheduler{
		cfg:     cfg,
		reqs:    make(chan request),
		results: make(chan any),
		stopped: make(chan struct{}),
		status:  map[string]*RunningBackup{},
		mstat:   map[string]*RunningMaintenance{},
	}, nil
}

// Run loads the persisted state, reports what happened while the appliance
// was down, and schedules until ctx is cancelled. On cancellation it cancels
// running backups and maintenance, records them as interrupted, waits for
// them and returns ctx.Err(). A Scheduler runs once.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("scheduler: Run called twice")
	}
	defer close(s.stopped)
	s.pctx = context.WithoutCancel(ctx)
	s.runCtx = ctx
	if err := s.load(ctx); err != nil {
		return err
	}
	var timer clock.Timer
	for {
		s.step()
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		var timerC <-chan time.Time
		if next, ok := s.nextWake(); ok {
			timer = s.cfg.Clock.NewTimer(next.Sub(s.cfg.Clock.Now()))
			timerC = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			s.stop()
			return ctx.Err()
		case <-timerC:
		case r := <-s.results:
			s.handleResult(r)
		case req := <-s.reqs:
			s.handleRequest(ctx, req, timerC)
		}
	}
}

// Sync returns once the scheduler has handled every input that was ready
// (fired timers, finished backups) and re-evaluated what to start. Tests use
// it to advance a fake clock deterministically; the console can use it to
// refresh after a change.
func (s *Scheduler) Sync(ctx context.Context) error {
	_, err := s.call(ctx, request{kind: reqSync})
	return err
}

// RunNow starts a run of the job outside its window: every selected VM is
// backed up once, within the concurrency limits. It returns the run id.
func (s *Scheduler) RunNow(ctx context.Context, job string) (string, error) {
	return s.call(ctx, request{kind: reqRunNow, job: job})
}

// Reload re-reads the jobs from the store (after a job was saved or deleted).
func (s *Scheduler) Reload(ctx context.Context) error {
	_, err := s.call(ctx, request{kind: reqReload})
	return err
}

func (s *Scheduler) call(ctx context.Context, req request) (string, error) {
	req.reply = make(chan reply, 1)
	select {
	case s.reqs <- req:
	case <-s.stopped:
		return "", ErrSchedulerStopped
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.runID, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Status returns what is running now.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st Status
	for _, b := range s.status {
		st.Backups = append(st.Backups, *b)
	}
	for _, m := range s.mstat {
		st.Maintenance = append(st.Maintenance, *m)
	}
	sort.Slice(st.Backups, func(i, j int) bool {
		a, b := st.Backups[i], st.Backups[j]
		if a.Job != b.Job {
			return a.Job < b.Job
		}
		return a.VM < b.VM
	})
	sort.Slice(st.Maintenance, func(i, j int) bool { return st.Maintenance[i].Repository < st.Maintenance[j].Repository })
	return st
}

func (s *Scheduler) now() time.Time { return s.cfg.Clock.Now() }

func (s *Scheduler) logf(format string, args ...any) { s.cfg.Logf(format, args...) }

func (s *Scheduler) handleRequest(ctx context.Context, req request, timerC <-chan time.Time) {
	switch req.kind {
	case reqSync:
		// Handle everything that is already ready before answering, so the
		// caller sees the consequences of a clock change it just made, and
		// wait for selections being evaluated (they open runs).
		for {
			for drained := false; !drained; {
				select {
				case r := <-s.results:
					s.handleResult(r)
				case <-timerC:
					timerC = nil
				default:
					drained = true
				}
			}
			s.step()
			if s.resolveCount == 0 {
				break
			}
			s.handleResult(<-s.results)
		}
		req.reply <- reply{}
	case reqRunNow:
		s.runNow(req.job, req.reply)
	case reqReload:
		req.reply <- reply{err: s.reload(ctx)}
	}
}

func (s *Scheduler) handleResult(r any) {
	switch r := r.(type) {
	case backupDone:
		s.backupFinished(r)
	case maintDone:
		s.maintFinished(r)
	case resolveDone:
		s.resolved(r)
	}
}

// load reads everything persisted and repairs what a crash left behind.
func (s *Scheduler) load(ctx context.Context) error {
	jobs, err := s.cfg.Store.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("load jobs: %w", err)
	}
	states, err := s.cfg.Store.VMStates(ctx)
	if err != nil {
		return fmt.Errorf("load vm states: %w", err)
	}
	open, err := s.cfg.Store.OpenRuns(ctx)
	if err != nil {
		return fmt.Errorf("load open runs: %w", err)
	}
	checkpoint, err := s.cfg.Store.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("load checkpoint: %w", err)
	}
	ms, err := s.cfg.Store.Maintenance(ctx)
	if err != nil {
		return fmt.Errorf("load maintenance state: %w", err)
	}
	now := s.now()
	s.jobs, s.jobSince = map[string]Job{}, map[string]time.Time{}
	s.states = map[stateKey]*VMState{}
	s.runs, s.current = map[string]*activeRun{}, map[string]*activeRun{}
	s.busyVM, s.jobRunning, s.repoRunning = map[string]*backupTask{}, map[string]int{}, map[string]int{}
	s.resolveWait, s.resolving = map[string]time.Time{}, map[string]bool{}
	s.maint, s.mstate, s.maintFailed = map[string]*maintTask{}, map[string]MaintenanceState{}, map[string]string{}
	if checkpoint.IsZero() || checkpoint.After(now) {
		checkpoint = now
	}
	s.lastStep = checkpoint
	for _, j := range jobs {
		s.jobs[j.ID] = j
		s.jobSince[j.ID] = checkpoint
	}
	for _, m := range ms {
		s.mstate[m.Repository] = m
	}
	for i := range states {
		st := states[i]
		s.states[stateKey{st.Job, st.VM}] = &st
	}
	for i := range open {
		r := open[i]
		j, ok := s.jobs[r.Job]
		occ, inWindow := j.Window.At(now)
		if ok && j.Enabled && !r.Manual && inWindow && occ.ID() == r.WindowID {
			ar := &activeRun{rec: r, job: j, vms: map[string]VM{}}
			for _, o := range r.VMs {
				ar.vms[o.VM] = VM{InstanceUUID: o.VM, Name: o.Name, MoRef: o.MoRef}
			}
			s.runs[r.ID] = ar
			s.current[r.Job] = ar
			continue
		}
		// The run's window (or the manual run) ended while we were down.
		end := checkpoint
		if end.Before(r.Start) {
			end = r.Start
		}
		ar := &activeRun{rec: r, job: j}
		s.markUnfinished(ar, "the appliance was down when the run ended")
		ar.rec.End = end
		s.putRun(ar)
		s.emit(Event{Severity: SeverityWarning, Kind: EventJobFinished, Subject: j.Name, Job: r.Job,
			Message: fmt.Sprintf("run %s ended while the appliance was down: %s", r.ID, summarize(ar.rec))})
	}
	// A state still marked running means the appliance stopped mid-backup.
	keys := make([]stateKey, 0, len(s.states))
	for k := range s.states {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].job < keys[j].job || keys[i].job == keys[j].job && keys[i].vm < keys[j].vm
	})
	for _, k := range keys {
		st := s.states[k]
		if !st.Running {
			continue
		}
		st.Running, st.NextRetry = false, time.Time{}
		if ar := s.runs[st.RunningRunID]; ar != nil {
			if o := ar.rec.Outcome(st.VM); o != nil {
				o.Status, o.End, o.Error = OutcomeInterrupted, checkpoint, "the appliance stopped during the backup"
				s.putRun(ar)
			}
		}
		st.RunningRunID = ""
		s.putState(st)
		s.emit(Event{Severity: SeverityWarning, Kind: EventVMInterrupted, Subject: st.Name, Job: st.Job, VM: st.VM,
			Message: "backup interrupted by an appliance stop; it will be retried while its window is open"})
	}
	return nil
}

// markUnfinished gives every VM of a run that is not final its final status.
func (s *Scheduler) markUnfinished(ar *activeRun, why string) {
	for i := range ar.rec.VMs {
		o := &ar.rec.VMs[i]
		switch o.Status {
		case OutcomePending:
			o.Status, o.Error = OutcomeNotRun, why
		case OutcomeRunning:
			o.Status, o.Error = OutcomeInterrupted, why
		}
	}
}

func (s *Scheduler) reload(ctx context.Context) error {
	jobs, err := s.cfg.Store.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("reload jobs: %w", err)
	}
	now := s.now()
	next := map[string]Job{}
	for _, j := range jobs {
		next[j.ID] = j
		if old, ok := s.jobs[j.ID]; !ok || (!old.Enabled && j.Enabled) {
			s.jobSince[j.ID] = now
		}
	}
	s.jobs = next
	for id := range s.jobSince {
		if _, ok := next[id]; !ok {
			delete(s.jobSince, id)
		}
	}
	for id, ar := range s.current {
		j, ok := next[id]
		if !ok || !j.Enabled {
			s.closeRun(ar, "the job was disabled or deleted")
			continue
		}
		ar.job = j
	}
	return nil
}

func (s *Scheduler) sortedJobs() []Job {
	out := make([]Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// step is the scheduler's one decision function: report missed windows, open
// and close runs, start backups and maintenance, checkpoint.
func (s *Scheduler) step() {
	if s.shutdown || s.runCtx.Err() != nil {
		return
	}
	now := s.now()
	for _, j := range s.sortedJobs() {
		if !j.Enabled {
			continue
		}
		s.reportMissed(j, now)
		occ, open := j.Window.At(now)
		cur := s.current[j.ID]
		if cur != nil && (!open || occ.ID() != cur.rec.WindowID) {
			s.closeRun(cur, "the backup window closed")
			cur = nil
		}
		if open && cur == nil && !s.resolving[j.ID] {
			if wait, ok := s.resolveWait[j.ID]; ok && now.Before(wait) {
				continue
			}
			s.startResolve(j, occ, false, nil)
		}
	}
	pending := s.startBackups(now)
	s.stepMaintenance(now, pending)
	s.lastStep = now
	if err := s.cfg.Store.SetCheckpoint(s.pctx, now); err != nil {
		s.logf("scheduler: save checkpoint: %v", err)
	}
}

// reportMissed records every occurrence of j's window that opened and closed
// since the scheduler last looked: the appliance was down or the clock jumped.
func (s *Scheduler) reportMissed(j Job, now time.Time) {
	since := s.jobSince[j.ID]
	if since.IsZero() || !now.After(since) {
		s.jobSince[j.ID] = now
		return
	}
	const maxReported = 50
	missed := 0
	for _, occ := range j.Window.Between(since.Add(time.Nanosecond), now) {
		if occ.Close.After(now) {
			continue
		}
		missed++
		if missed > maxReported {
			continue
		}
		rec := JobRun{ID: runID(j.ID, occ.Open, "missed"), Job: j.ID, WindowID: occ.ID(), Missed: true, Start: occ.Open, End: occ.Close}
		if err := s.cfg.Store.PutRun(s.pctx, rec); err != nil {
			s.logf("scheduler: record missed window: %v", err)
		}
		s.emit(Event{Severity: SeverityWarning, Kind: EventWindowMissed, Subject: j.Name, Job: j.ID,
			Message: fmt.Sprintf("backup window %s - %s was missed: the scheduler was not running", occ.Open.In(j.Window.loc()).Format("Mon 2006-01-02 15:04 MST"), occ.Close.In(j.Window.loc()).Format("Mon 2006-01-02 15:04 MST"))})
	}
	if missed > maxReported {
		s.emit(Event{Severity: SeverityWarning, Kind: EventWindowMissed, Subject: j.Name, Job: j.ID,
			Message: fmt.Sprintf("%d more backup windows were missed", missed-maxReported)})
	}
	s.jobSince[j.ID] = now
}

func runID(job string, t time.Time, kind string) string {
	return fmt.Sprintf("%s/%s-%s", job, t.UTC().Format("20060102T150405.000000000Z"), kind)
}

// resolveDone carries a selection evaluated off the scheduler goroutine.
type resolveDone struct {
	job    Job
	occ    Occurrence // the window occurrence a scheduled run is for
	manual bool
	reply  chan reply // run now: answered once the run exists
	res    Resolution
	err    error
}

// startResolve evaluates the job's selection in a goroutine: listing a
// vCenter inventory can take a while, and the scheduler keeps recording
// finished backups meanwhile. The result comes back as a resolveDone.
func (s *Scheduler) startResolve(j Job, occ Occurrence, manual bool, rep chan reply) {
	var previous []string
	known := false
	for k, st := range s.states {
		if k.job == j.ID {
			known = true
			if st.Selected {
				previous = append(previous, k.vm)
			}
		}
	}
	if known && previous == nil {
		previous = []string{} // a known job whose selection was empty: everything is new
	}
	if !manual {
		s.resolving[j.ID] = true
	}
	s.resolveCount++
	ctx, inv := s.runCtx, s.cfg.Inventory
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		d := resolveDone{job: j, occ: occ, manual: manual, reply: rep}
		d.res, d.err = j.Selection.Resolve(ctx, inv, previous)
		s.results <- d
	}()
}

func (s *Scheduler) resolved(d resolveDone) {
	s.resolveCount--
	if !d.manual {
		delete(s.resolving, d.job.ID)
	}
	if s.runCtx.Err() != nil {
		if d.reply != nil {
			d.reply <- reply{err: ErrSchedulerStopped}
		}
		return
	}
	now := s.now()
	j, ok := s.jobs[d.job.ID]
	if !ok || !j.Enabled {
		if d.reply != nil {
			err := ErrJobNotFound
			if ok {
				err = ErrJobDisabled
			}
			d.reply <- reply{err: fmt.Errorf("run job %s: %w", d.job.ID, err)}
		}
		return
	}
	if d.err != nil {
		if d.reply != nil {
			d.reply <- reply{err: fmt.Errorf("run job %s: evaluate selection: %w", j.ID, d.err)}
			return
		}
		s.resolveWait[j.ID] = now.Add(s.cfg.RetryBackoff)
		s.emit(Event{Severity: SeverityError, Kind: EventSelectionFailed, Subject: j.Name, Job: j.ID,
			Message: fmt.Sprintf("cannot evaluate the selection (retrying at %s): %v", now.Add(s.cfg.RetryBackoff).Format(time.RFC3339), d.err)})
		return
	}
	if d.manual {
		d.reply <- reply{runID: s.openManualRun(j, s.applyResolution(j, d.res), now)}
		return
	}
	if occ, open := j.Window.At(now); !open || occ.ID() != d.occ.ID() || s.current[j.ID] != nil {
		return // the window moved on while the inventory answered; step decides afresh
	}
	delete(s.resolveWait, j.ID)
	s.openRun(j, d.occ, s.applyResolution(j, d.res), now)
}

// applyResolution records which VMs are selected and reports the new,
// vanished and missing ones.
func (s *Scheduler) applyResolution(j Job, res Resolution) []VM {
	for _, vm := range res.New {
		s.emit(Event{Severity: SeverityInfo, Kind: EventSelectionNew, Subject: vm.Name, Job: j.ID, VM: vm.InstanceUUID,
			Message: fmt.Sprintf("VM %s is now protected by job %s", vm.Name, j.Name)})
	}
	for _, id := range res.Vanished {
		name := id
		if st := s.states[stateKey{j.ID, id}]; st != nil {
			st.Selected = false
			s.putState(st)
			name = st.Name
		}
		s.emit(Event{Severity: SeverityWarning, Kind: EventSelectionVanished, Subject: name, Job: j.ID, VM: id,
			Message: fmt.Sprintf("VM %s is no longer selected by job %s (deleted, moved or excluded)", name, j.Name)})
	}
	for _, id := range res.Missing {
		s.emit(Event{Severity: SeverityWarning, Kind: EventSelectionVanished, Subject: id, Job: j.ID, VM: id,
			Message: fmt.Sprintf("VM %s named by job %s is not in the inventory", id, j.Name)})
	}
	var changed []VMState
	for _, vm := range res.VMs {
		st := s.state(j.ID, vm)
		if !st.Selected || st.Name != vm.Name {
			st.Selected, st.Name = true, vm.Name
			changed = append(changed, *st)
		}
	}
	s.putStates(changed)
	return res.VMs
}

func (s *Scheduler) openRun(j Job, occ Occurrence, vms []VM, now time.Time) {
	ar := &activeRun{rec: JobRun{ID: runID(j.ID, now, "window"), Job: j.ID, WindowID: occ.ID(), Start: now}, job: j, vms: map[string]VM{}}
	var changed []VMState
	defer func() { s.putStates(changed) }()
	for _, vm := range vms {
		ar.vms[vm.InstanceUUID] = vm
		st := s.state(j.ID, vm)
		if st.WindowID != occ.ID() {
			st.WindowID, st.Attempts, st.Done, st.NextRetry = occ.ID(), 0, false, time.Time{}
			changed = append(changed, *st)
		}
		o := VMOutcome{VM: vm.InstanceUUID, Name: vm.Name, MoRef: vm.MoRef, Status: OutcomePending}
		if st.Done {
			o.Status, o.Point = OutcomeSucceeded, st.LastPoint
		}
		ar.rec.VMs = append(ar.rec.VMs, o)
	}
	s.runs[ar.rec.ID] = ar
	s.current[j.ID] = ar
	s.putRun(ar)
	s.emit(Event{Severity: SeverityInfo, Kind: EventJobStarted, Subject: j.Name, Job: j.ID,
		Message: fmt.Sprintf("backup window opened: %d VMs selected, until %s", len(vms), occ.Close.In(j.Window.loc()).Format("Mon 15:04 MST"))})
}

// runNow checks the job and starts evaluating its selection; the reply is
// sent once the manual run exists.
func (s *Scheduler) runNow(id string, rep chan reply) {
	j, ok := s.jobs[id]
	switch {
	case !ok:
		rep <- reply{err: fmt.Errorf("run job %s: %w", id, ErrJobNotFound)}
	case !j.Enabled:
		rep <- reply{err: fmt.Errorf("run job %s: %w", id, ErrJobDisabled)}
	default:
		s.startResolve(j, Occurrence{}, true, rep)
	}
}

func (s *Scheduler) openManualRun(j Job, vms []VM, now time.Time) string {
	ar := &activeRun{rec: JobRun{ID: runID(j.ID, now, "manual"), Job: j.ID, Manual: true, Start: now}, job: j, vms: map[string]VM{}}
	for _, vm := range vms {
		ar.vms[vm.InstanceUUID] = vm
		ar.rec.VMs = append(ar.rec.VMs, VMOutcome{VM: vm.InstanceUUID, Name: vm.Name, MoRef: vm.MoRef, Status: OutcomePending})
	}
	s.runs[ar.rec.ID] = ar
	s.putRun(ar)
	s.emit(Event{Severity: SeverityInfo, Kind: EventJobStarted, Subject: j.Name, Job: j.ID,
		Message: fmt.Sprintf("run now: %d VMs selected", len(vms))})
	s.finishIfDone(ar)
	return ar.rec.ID
}

func (s *Scheduler) state(job string, vm VM) *VMState {
	k := stateKey{job, vm.InstanceUUID}
	st := s.states[k]
	if st == nil {
		st = &VMState{Job: job, VM: vm.InstanceUUID, Name: vm.Name}
		s.states[k] = st
	}
	return st
}

// closeRun stops a scheduled run from starting anything new; it ends once
// its running backups have finished (or been cancelled).
func (s *Scheduler) closeRun(ar *activeRun, why string) {
	delete(s.current, ar.rec.Job)
	ar.closing = true
	for _, t := range s.busyVM {
		if t.run == ar && ar.job.OnWindowClose == CloseCancel {
			t.cancelByClose = true
			t.cancel()
		}
	}
	for i := range ar.rec.VMs {
		o := &ar.rec.VMs[i]
		if o.Status == OutcomePending {
			o.Status, o.Error = OutcomeNotRun, why
			s.emit(Event{Severity: SeverityWarning, Kind: EventVMNotBackedUp, Subject: o.Name, Job: ar.rec.Job, VM: o.VM,
				Message: fmt.Sprintf("not backed up in this window: %s", why)})
		}
	}
	s.putRun(ar)
	s.finishIfDone(ar)
}

// finishIfDone ends a closing scheduled run, or a manual run whose VMs are
// all final, once nothing of it runs any more.
func (s *Scheduler) finishIfDone(ar *activeRun) {
	if ar.tasks > 0 {
		return
	}
	if !ar.closing {
		if !ar.rec.Manual {
			return
		}
		for _, o := range ar.rec.VMs {
			if o.Status == OutcomePending || o.Status == OutcomeRunning {
				return
			}
		}
	}
	ar.rec.End = s.now()
	delete(s.runs, ar.rec.ID)
	s.putRun(ar)
	sev := SeverityInfo
	for _, o := range ar.rec.VMs {
		if o.Status != OutcomeSucceeded {
			sev = SeverityWarning
		}
	}
	s.emit(Event{Severity: sev, Kind: EventJobFinished, Subject: ar.job.Name, Job: ar.rec.Job,
		Message: fmt.Sprintf("run %s finished: %s", ar.rec.ID, summarize(ar.rec))})
}

func summarize(r JobRun) string {
	counts := map[OutcomeStatus]int{}
	var bytes int64
	for _, o := range r.VMs {
		counts[o.Status]++
		bytes += o.Bytes
	}
	return fmt.Sprintf("%d VMs: %d succeeded, %d failed, %d cancelled, %d interrupted, %d not run; %d bytes read",
		len(r.VMs), counts[OutcomeSucceeded], counts[OutcomeFailed], counts[OutcomeCancelled], counts[OutcomeInterrupted], counts[OutcomeNotRun], bytes)
}

type candidate struct {
	run *activeRun
	vm  VM
	st  *VMState
}

// startBackups starts what may start now and returns the repositories that
// still have backups waiting (so maintenance leaves them alone).
func (s *Scheduler) startBackups(now time.Time) map[string]bool {
	var cands []candidate
	for _, ar := range s.runs {
		if ar.closing {
			continue
		}
		for i := range ar.rec.VMs {
			o := &ar.rec.VMs[i]
			st := s.states[stateKey{ar.rec.Job, o.VM}]
			if st == nil || st.Running || o.Status == OutcomeRunning {
				continue
			}
			if ar.rec.Manual {
				if o.Status != OutcomePending {
					continue
				}
			} else if st.Done || st.WindowID != ar.rec.WindowID || st.NextRetry.After(now) ||
				(ar.job.MaxAttempts > 0 && st.Attempts >= ar.job.MaxAttempts) {
				continue
			}
			cands = append(cands, candidate{ar, ar.vms[o.VM], st})
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.run.job.Priority != b.run.job.Priority {
			return a.run.job.Priority > b.run.job.Priority
		}
		if a.run.rec.Manual != b.run.rec.Manual {
			return a.run.rec.Manual
		}
		if a.st.LastSuccess.IsZero() != b.st.LastSuccess.IsZero() {
			return a.st.LastSuccess.IsZero()
		}
		if !a.st.LastSuccess.Equal(b.st.LastSuccess) {
			return a.st.LastSuccess.Before(b.st.LastSuccess)
		}
		if a.run.rec.Job != b.run.rec.Job {
			return a.run.rec.Job < b.run.rec.Job
		}
		return a.vm.InstanceUUID < b.vm.InstanceUUID
	})
	pending := map[string]bool{}
	for _, c := range cands {
		repo := c.run.job.Repository
		if s.running >= s.cfg.MaxConcurrent || s.jobRunning[c.run.rec.Job] >= c.run.job.concurrency() ||
			s.busyVM[c.vm.InstanceUUID] != nil || s.maint[repo] != nil {
			pending[repo] = true
			continue
		}
		s.startBackup(c, now)
	}
	return pending
}

func (s *Scheduler) startBackup(c candidate, now time.Time) {
	ar, vm, st := c.run, c.vm, c.st
	st.Running, st.RunningRunID, st.LastAttempt = true, ar.rec.ID, now
	if !ar.rec.Manual {
		st.Attempts++
	}
	s.putState(st)
	o := ar.rec.Outcome(vm.InstanceUUID)
	o.Status, o.Error = OutcomeRunning, ""
	o.Attempts++
	if o.Start.IsZero() {
		o.Start = now
	}
	s.putRun(ar)

	ctx, cancel := context.WithCancel(s.runCtx)
	t := &backupTask{run: ar, vm: vm, cancel: cancel}
	s.busyVM[vm.InstanceUUID] = t
	s.jobRunning[ar.rec.Job]++
	s.repoRunning[ar.job.Repository]++
	s.running++
	ar.tasks++
	key := ar.rec.Job + "\x00" + vm.InstanceUUID
	s.mu.Lock()
	s.status[key] = &RunningBackup{Job: ar.rec.Job, VM: vm.InstanceUUID, Name: vm.Name, RunID: ar.rec.ID, Started: now}
	s.mu.Unlock()
	progress := func(p Progress) {
		s.mu.Lock()
		if b := s.status[key]; b != nil {
			b.Progress = p
		}
		s.mu.Unlock()
	}
	job := ar.job
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res, err := s.cfg.Runner.RunBackup(ctx, job, vm, progress)
		cancel()
		s.results <- backupDone{task: t, res: res, err: err}
	}()
}

func (s *Scheduler) backoff(attempts int) time.Duration {
	d := s.cfg.RetryBackoff
	for i := 1; i < attempts && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

func (s *Scheduler) backupFinished(d backupDone) {
	now := s.now()
	t, ar := d.task, d.task.run
	vm := t.vm
	delete(s.busyVM, vm.InstanceUUID)
	s.jobRunning[ar.rec.Job]--
	s.repoRunning[ar.job.Repository]--
	s.running--
	ar.tasks--
	s.mu.Lock()
	delete(s.status, ar.rec.Job+"\x00"+vm.InstanceUUID)
	s.mu.Unlock()

	st := s.states[stateKey{ar.rec.Job, vm.InstanceUUID}]
	o := ar.rec.Outcome(vm.InstanceUUID)
	st.Running, st.RunningRunID = false, ""
	o.End = now
	sameWindow := !ar.rec.Manual && st.WindowID == ar.rec.WindowID
	ev := Event{Subject: vm.Name, Job: ar.rec.Job, VM: vm.InstanceUUID}
	switch {
	case d.err == nil:
		st.LastSuccess, st.LastPoint, st.LastError = now, d.res.PointID, ""
		if sameWindow {
			st.Done = true
		}
		o.Status, o.Point, o.Bytes, o.Stored, o.Error = OutcomeSucceeded, d.res.PointID, d.res.Bytes, d.res.Stored, ""
		ev.Severity, ev.Kind = SeverityInfo, EventVMBackedUp
		ev.Message = fmt.Sprintf("backed up to restore point %s (%d bytes read, %d stored)", d.res.PointID, d.res.Bytes, d.res.Stored)
	case t.cancelByClose:
		st.LastError = d.err.Error()
		o.Status, o.Error = OutcomeCancelled, "cancelled at window close: "+d.err.Error()
		ev.Severity, ev.Kind, ev.Message = SeverityWarning, EventVMCancelled, "backup cancelled because its window closed"
	case s.runCtx.Err() != nil:
		// Not a failure of the VM: retry at once when the scheduler is back.
		o.Status, o.Error = OutcomeInterrupted, "the appliance stopped during the backup"
		st.NextRetry = time.Time{}
		ev.Severity, ev.Kind, ev.Message = SeverityWarning, EventVMInterrupted, "backup interrupted by an appliance stop; it will be retried while its window is open"
	default:
		st.LastError = d.err.Error()
		o.Status, o.Error = OutcomeFailed, d.err.Error()
		ev.Severity, ev.Kind = SeverityError, EventVMFailed
		switch {
		case ar.rec.Manual:
			ev.Message = fmt.Sprintf("backup failed: %v", d.err)
		case ar.closing || !sameWindow:
			ev.Message = fmt.Sprintf("backup failed after its window closed: %v", d.err)
		case ar.job.MaxAttempts > 0 && st.Attempts >= ar.job.MaxAttempts:
			ev.Message = fmt.Sprintf("backup failed (attempt %d of %d, no more retries in this window): %v", st.Attempts, ar.job.MaxAttempts, d.err)
		default:
			st.NextRetry = now.Add(s.backoff(st.Attempts))
			ev.Message = fmt.Sprintf("backup failed (attempt %d), retrying at %s: %v", st.Attempts, st.NextRetry.Format(time.RFC3339), d.err)
		}
	}
	s.putState(st)
	s.putRun(ar)
	s.emit(ev)
	if s.runCtx.Err() == nil {
		s.finishIfDone(ar)
	}
}

// stop cancels everything running, records the outcome of each and waits.
func (s *Scheduler) stop() {
	s.shutdown = true
	for _, t := range s.busyVM {
		t.cancel()
	}
	for _, m := range s.maint {
		m.cancel()
	}
	for s.running > 0 || len(s.maint) > 0 || s.resolveCount > 0 {
		s.handleResult(<-s.results)
	}
	s.wg.Wait()
	if err := s.cfg.Store.SetCheckpoint(s.pctx, s.now()); err != nil {
		s.logf("scheduler: save checkpoint: %v", err)
	}
}

// nextWake is the earliest future instant at which step could decide
// something different: a window opening or closing, a retry falling due.
func (s *Scheduler) nextWake() (time.Time, bool) {
	now := s.now()
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, j := range s.jobs {
		if !j.Enabled {
			continue
		}
		if occ, ok := j.Window.Next(now); ok {
			consider(occ.Open)
			consider(occ.Close)
		}
	}
	for _, t := range s.resolveWait {
		consider(t)
	}
	for _, ar := range s.current {
		for _, o := range ar.rec.VMs {
			if st := s.states[stateKey{ar.rec.Job, o.VM}]; st != nil && !st.Done && !st.Running {
				consider(st.NextRetry)
			}
		}
	}
	if s.maintenanceEnabled() {
		if occ, ok := s.cfg.MaintenanceWindow.Next(now); ok {
			consider(occ.Open)
			consider(occ.Close)
		}
	}
	return next, !next.IsZero()
}

func (s *Scheduler) putState(st *VMState) {
	if err := s.cfg.Store.PutVMState(s.pctx, *st); err != nil {
		s.logf("scheduler: save state of VM %s in job %s: %v", st.VM, st.Job, err)
	}
}

func (s *Scheduler) putStates(states []VMState) {
	if len(states) == 0 {
		return
	}
	if err := s.cfg.Store.PutVMStates(s.pctx, states); err != nil {
		s.logf("scheduler: save state of %d VMs: %v", len(states), err)
	}
}

func (s *Scheduler) putRun(ar *activeRun) {
	rec := ar.rec
	rec.VMs = append([]VMOutcome(nil), ar.rec.VMs...)
	if err := s.cfg.Store.PutRun(s.pctx, rec); err != nil {
		s.logf("scheduler: save run %s: %v", rec.ID, err)
	}
}

func (s *Scheduler) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = s.now()
	}
	if err := s.cfg.Store.AddEvent(s.pctx, e); err != nil {
		s.logf("scheduler: record event %s: %v", e.Kind, err)
	}
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}
