package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
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
	Done       int64     // packs verified in the whole check (full check; 0 otherwise)
	Total      int64     // packs in the whole check; 0 while unknown
	ETA        time.Time // estimated end at the rate of this run; zero while unknown
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
// Maintenance (retention, reclaim, checks) runs inside its window alongside
// backups, which never wait for it; a full check longer than the window
// resumes from its persisted cursor in the next one.
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
	wg             sync.WaitGroup
	jobs           map[string]Job
	jobSince       map[string]time.Time // missed-window detection starts here per job
	states         map[stateKey]*VMState
	runs           map[string]*activeRun
	current        map[string]*activeRun // job -> open scheduled run
	doneSlot       map[string]string     // job -> the slot whose run ended with every VM backed up
	busyVM         map[string]*backupTask
	jobRunning     map[string]int
	repoRunning    map[string]int
	running        int
	scriptsRunning int                  // post-job scripts in flight (scripts_run.go)
	resolveWait    map[string]time.Time // job -> when to retry a failed selection
	resolving      map[string]bool      // job -> its selection is being evaluated for a window
	resolveCount   int                  // selections being evaluated (windows and run now)
	maint          map[string]*maintTask
	mstate         map[string]MaintenanceState
	maintFailed    map[string]string   // repo+task -> maintenance occurrence id in which it failed
	dirty          map[*activeRun]bool // runs whose per-VM outcomes changed since last written
	lastStep       time.Time
	pctx           context.Context // for persistence: outlives the Run context's cancellation
	runCtx         context.Context
	shutdown       bool
}

type stateKey struct{ job, vm string }

type activeRun struct {
	rec     JobRun
	job     Job
	vms     map[string]VM
	closing bool // window closed: waiting for running backups
	tasks   int
	scripts *runScripts // the job's scripts' state in this run; nil without scripts
	marks   int         // per-VM changes since the record was last written
	written time.Time   // when the record was last written
}

type backupTask struct {
	run           *activeRun
	vm            VM
	cancel        context.CancelFunc
	cancelByClose bool
}

type backupDone struct {
	task    *backupTask
	res     BackupResult
	err     error
	scripts []scriptReport
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
	reqSetMaintenance // maintenance_setting.go
)

type request struct {
	kind  requestKind
	job   string
	maint *maintSetting // reqSetMaintenance
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
		now := s.step()
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		var timerC <-chan time.Time
		// The wake-up is computed from the instant step decided on: if the
		// clock has moved since, the timer fires at once and step runs again,
		// so an opening between the two reads is never skipped.
		if next, ok := s.nextWake(now); ok {
			timer = s.cfg.Clock.NewTimer(next.Sub(s.now()))
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
			// Take every other result already waiting before deciding
			// again: with many short backups, one step and one write of
			// each run record serve them all.
			for drained := false; !drained; {
				select {
				case r := <-s.results:
					s.handleResult(r)
				default:
					drained = true
				}
			}
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
		s.flush(true) // the caller may read the store next
		req.reply <- reply{}
	case reqRunNow:
		s.runNow(req.job, req.reply)
	case reqReload:
		req.reply <- reply{err: s.reload(ctx)}
	case reqSetMaintenance:
		s.setMaintenance(*req.maint)
		req.reply <- reply{}
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
	case postJobDone:
		s.postJobFinished(r)
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
	s.doneSlot = map[string]string{}
	s.maint, s.mstate, s.maintFailed = map[string]*maintTask{}, map[string]MaintenanceState{}, map[string]string{}
	s.dirty = map[*activeRun]bool{}
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
	// A VM state still marked running means the appliance died mid-backup
	// (a clean stop records the end): its outcome in the open run says so.
	openByID := map[string]*JobRun{}
	for i := range open {
		openByID[open[i].ID] = &open[i]
	}
	keys := make([]stateKey, 0, len(s.states))
	for k := range s.states {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].job < keys[j].job || keys[i].job == keys[j].job && keys[i].vm < keys[j].vm
	})
	var changed []VMState
	var cut []*VMState
	for _, k := range keys {
		st := s.states[k]
		if !st.Running {
			continue
		}
		if r := openByID[st.RunningRunID]; r != nil {
			if o := r.Outcome(st.VM); o != nil {
				o.Status, o.End, o.Error = OutcomeInterrupted, checkpoint, interruptedDuring
			}
		}
		st.Running, st.RunningRunID, st.NextRetry = false, "", time.Time{}
		changed = append(changed, *st)
		cut = append(cut, st)
	}
	s.putStates(changed)
	for _, st := range cut {
		s.emit(Event{Severity: SeverityWarning, Kind: EventVMInterrupted, Subject: st.Name, Job: st.Job, VM: st.VM,
			Message: "backup interrupted: the appliance stopped during it (its snapshot is removed by the next backup of the VM)"})
	}
	for i := range open {
		s.recoverRun(open[i], checkpoint, now)
	}
	s.loadDoneSlots(now)
	return nil
}

// loadDoneSlots remembers, across a restart, the slots whose run ended
// early with every VM backed up: every selected VM of the job is done in
// the slot open now, and no run of it is open. Without it a new run would
// open in the same slot (and end at once: done VMs are never redone).
func (s *Scheduler) loadDoneSlots(now time.Time) {
	for id, j := range s.jobs {
		occ, open := j.Slot(now)
		if !open || s.current[id] != nil {
			continue
		}
		any, all := false, true
		for k, st := range s.states {
			if k.job != id || !st.Selected {
				continue
			}
			any = true
			if st.WindowID != occ.ID() || !st.Done {
				all = false
				break
			}
		}
		if any && all {
			s.doneSlot[id] = occ.ID()
		}
	}
}

// Messages of the outcomes an appliance stop leaves.
const (
	interruptedDuring = "the appliance stopped during the backup"
	interruptedBefore = "the appliance stopped before this VM's backup started"
)

// recoverRun decides the fate of a run the previous process left open: the
// resume rule. The run is interrupted: it ends at the last checkpoint and
// every VM it had not finished is marked interrupted. If it was a scheduled
// run and its window occurrence is still open, a resume run for the same
// occurrence backs up the VMs not yet backed up in it, as far as the retry
// limit allows; VMs already done are never redone. A manual run, a disabled
// or deleted job or a closed window leave it at that: the next window
// picks the VMs up. If there is nothing left to resume (every VM done or out
// of attempts) the run simply continues until its window closes.
func (s *Scheduler) recoverRun(r JobRun, checkpoint, now time.Time) {
	j, ok := s.jobs[r.Job]
	occ, inWindow := j.Slot(now)
	resumable := ok && j.Enabled && !r.Manual && inWindow && occ.ID() == r.WindowID
	for i := range r.VMs {
		// A success the VM's state has and the record (written lazily,
		// see markRun) does not.
		o := &r.VMs[i]
		st := s.states[stateKey{r.Job, o.VM}]
		if o.Status == OutcomeSucceeded || st == nil || st.LastPoint == "" {
			continue
		}
		if r.Manual && !st.LastSuccess.Before(r.Start) || !r.Manual && st.WindowID == r.WindowID && st.Done {
			o.Status, o.Point, o.Error = OutcomeSucceeded, st.LastPoint, ""
			if o.End.IsZero() {
				o.End = st.LastSuccess
			}
		}
	}
	for i := range r.VMs {
		if o := &r.VMs[i]; o.Status == OutcomeRunning { // a state write the crash lost: still cut short
			o.Status, o.End, o.Error = OutcomeInterrupted, checkpoint, interruptedDuring
		}
	}
	var remaining []VM
	if resumable {
		for _, o := range r.VMs {
			st := s.states[stateKey{r.Job, o.VM}]
			if st != nil && st.WindowID == r.WindowID &&
				(st.Done || j.MaxAttempts > 0 && st.Attempts >= j.MaxAttempts) {
				continue
			}
			remaining = append(remaining, VM{InstanceUUID: o.VM, Name: o.Name, MoRef: o.MoRef})
		}
		if len(remaining) == 0 {
			ar := &activeRun{rec: r, job: j, vms: map[string]VM{}}
			for _, o := range r.VMs {
				ar.vms[o.VM] = VM{InstanceUUID: o.VM, Name: o.Name, MoRef: o.MoRef}
			}
			s.runs[r.ID] = ar
			s.current[r.Job] = ar
			s.putRun(ar)
			return
		}
	}
	end := checkpoint
	if end.Before(r.Start) {
		end = r.Start
	}
	var undone []string
	for i := range r.VMs {
		o := &r.VMs[i]
		switch o.Status {
		case OutcomePending:
			o.Status, o.Error = OutcomeInterrupted, interruptedBefore
		case OutcomeRunning:
			o.Status, o.Error = OutcomeInterrupted, interruptedDuring
		}
		if o.Status != OutcomeSucceeded {
			undone = append(undone, o.Name)
		}
	}
	r.Interrupted, r.End = true, end
	name := j.Name
	if name == "" {
		name = r.Job
	}
	if !resumable {
		s.putRun(&activeRun{rec: r})
		why := "its window closed while the appliance was down; the next window backs them up"
		switch {
		case !ok:
			why = "the job no longer exists"
		case !j.Enabled:
			why = "the job is disabled"
		case r.Manual:
			why = "a run now is not resumed; run the job again"
		}
		// Per VM too, as at a window close: a VM's own event list and the
		// daily report must say it went without its backup.
		for _, o := range r.VMs {
			if o.Status == OutcomeInterrupted {
				s.emit(Event{Severity: SeverityWarning, Kind: EventVMNotBackedUp, Subject: o.Name, Job: r.Job, VM: o.VM,
					Message: fmt.Sprintf("not backed up in run %s: the appliance stopped and %s", r.ID, why)})
			}
		}
		s.emit(Event{Severity: SeverityWarning, Kind: EventJobFinished, Subject: name, Job: r.Job,
			Message: fmt.Sprintf("run %s was interrupted by an appliance stop and is not resumed (%s): %s; not backed up: %s",
				r.ID, why, summarize(r), strings.Join(undone, ", "))})
		return
	}
	id := runID(j.ID, now, "resume")
	for t := now; id == r.ID; { // resumed again at the very instant it was resumed (a fake clock)
		t = t.Add(time.Nanosecond)
		id = runID(j.ID, t, "resume")
	}
	ar := &activeRun{rec: JobRun{ID: id, Job: j.ID, WindowID: occ.ID(), ResumeOf: r.ID, Start: now}, job: j, vms: map[string]VM{}}
	for _, vm := range remaining {
		ar.vms[vm.InstanceUUID] = vm
		ar.rec.VMs = append(ar.rec.VMs, VMOutcome{VM: vm.InstanceUUID, Name: vm.Name, MoRef: vm.MoRef, Status: OutcomePending})
	}
	r.ResumedBy = ar.rec.ID
	// One transaction: a crash here leaves either the interrupted run open
	// (and this decision is taken again) or both records final.
	if err := s.cfg.Store.PutRuns(s.pctx, []JobRun{r, ar.rec}); err != nil {
		s.logf("scheduler: save run %s and its resume run %s: %v", r.ID, ar.rec.ID, err)
	}
	s.runs[ar.rec.ID] = ar
	s.current[j.ID] = ar
	s.emit(Event{Severity: SeverityWarning, Kind: EventJobFinished, Subject: name, Job: r.Job,
		Message: fmt.Sprintf("run %s was interrupted by an appliance stop: %s; resumed by run %s", r.ID, summarize(r), ar.rec.ID)})
	names := make([]string, len(remaining))
	for i, vm := range remaining {
		names[i] = vm.Name
	}
	s.emit(Event{Severity: SeverityInfo, Kind: EventJobStarted, Subject: name, Job: j.ID,
		Message: fmt.Sprintf("resuming interrupted run %s: %d VMs not yet backed up in this window (%s), until %s; the %d others are done (or out of attempts) in this window and are not redone",
			r.ID, len(remaining), strings.Join(names, ", "), occ.Close.In(j.Window.loc()).Format("Mon 15:04 MST"), len(r.VMs)-len(remaining))})
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
			s.closeRun(ar, "the job was disabled or deleted", true)
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
// and close runs, start backups and maintenance, checkpoint. It returns the
// instant it decided on.
func (s *Scheduler) step() time.Time {
	now := s.now()
	if s.shutdown || s.runCtx.Err() != nil {
		return now
	}
	var opening []resolveItem
	for _, j := range s.sortedJobs() {
		if !j.Enabled {
			continue
		}
		s.reportMissed(j, now)
		occ, open := j.Slot(now)
		cur := s.current[j.ID]
		if cur != nil && (!open || occ.ID() != cur.rec.WindowID) {
			if j.Window.Contains(now) {
				s.closeRun(cur, fmt.Sprintf("the next run started (a new run every %s inside the window)", fmtHours(j.slot())), false)
			} else {
				s.closeRun(cur, "the backup window closed", true)
			}
			cur = nil
		}
		if open && cur == nil && !s.resolving[j.ID] && s.doneSlot[j.ID] != occ.ID() {
			if wait, ok := s.resolveWait[j.ID]; ok && now.Before(wait) {
				continue
			}
			opening = append(opening, resolveItem{job: j, occ: occ})
		}
	}
	if len(opening) > 0 {
		s.startResolve(opening, false, nil)
	}
	s.startBackups(now)
	s.stepMaintenance(now)
	s.flushRuns()
	s.lastStep = now
	if err := s.cfg.Store.SetCheckpoint(s.pctx, now); err != nil {
		s.logf("scheduler: save checkpoint: %v", err)
	}
	return now
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
	for s.running > 0 || len(s.maint) > 0 || s.scriptsRunning > 0 {
		s.handleResult(<-s.results)
	}
	s.wg.Wait()
	s.flush(true)
	if err := s.cfg.Store.SetCheckpoint(s.pctx, s.now()); err != nil {
		s.logf("scheduler: save checkpoint: %v", err)
	}
}

// nextWake is the earliest future instant at which step could decide
// something different: a window opening or closing, a retry falling due.
func (s *Scheduler) nextWake(now time.Time) (time.Time, bool) {
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
		if occ, ok := j.NextSlot(now); ok {
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

// markRun records that a VM outcome of ar changed. A run record holds
// every VM's outcome, so writing it at each backup's start and end made a
// window's writes grow with the square of its VMs (2,000 writes of 1,000
// outcomes for 1,000 VMs). flushRuns writes it when enough of it changed
// (a 1/32 of its VMs) or enough time passed (runRecordLag): a bounded
// number of writes per run when backups finish in bursts, every change
// when they finish minutes apart. The VM's state, written at once, stays
// the truth: recoverRun rebuilds outcomes a crash left stale from it.
func (s *Scheduler) markRun(ar *activeRun) {
	ar.marks++
	s.dirty[ar] = true
}

// runRecordLag bounds how stale a run record (GET /runs) may be.
const runRecordLag = 30 * time.Second

// flushRuns writes the run records markRun left pending that are due (all
// with force).
func (s *Scheduler) flushRuns() { s.flush(false) }

func (s *Scheduler) flush(force bool) {
	if len(s.dirty) == 0 {
		return
	}
	now := s.now()
	runs := make([]*activeRun, 0, len(s.dirty))
	for ar := range s.dirty {
		if force || ar.marks >= max(1, len(ar.rec.VMs)/32) || now.Sub(ar.written) >= runRecordLag {
			runs = append(runs, ar)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].rec.ID < runs[j].rec.ID })
	for _, ar := range runs {
		s.putRun(ar)
	}
}

func (s *Scheduler) putRun(ar *activeRun) {
	delete(s.dirty, ar)
	ar.marks, ar.written = 0, s.now()
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
