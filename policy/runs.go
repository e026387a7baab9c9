package policy

// Runs: one run per window occurrence or "run now", from selection to end.

import (
	"fmt"
	"strings"
	"time"
)

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
	for _, occ := range j.SlotsBetween(since.Add(time.Nanosecond), now) {
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

// resolveItem is one job whose selection is to be evaluated.
type resolveItem struct {
	job      Job
	occ      Occurrence // the window occurrence a scheduled run is for
	previous []string   // VMs selected last time (nil: first evaluation)
	res      Resolution
}

// resolveDone carries selections evaluated off the scheduler goroutine.
type resolveDone struct {
	items  []resolveItem
	manual bool
	reply  chan reply // run now: answered once the run exists
	err    error      // listing the inventory failed (for every item)
}

// startResolve evaluates the selections of jobs in one goroutine with one
// inventory listing: listing a vCenter can take a while, the scheduler keeps
// recording finished backups meanwhile, and jobs whose windows open together
// get their runs together, so job priority decides between them.
func (s *Scheduler) startResolve(items []resolveItem, manual bool, rep chan reply) {
	for i := range items {
		items[i].previous = s.previouslySelected(items[i].job.ID)
		if !manual {
			s.resolving[items[i].job.ID] = true
		}
	}
	s.resolveCount++
	ctx, inv := s.runCtx, s.cfg.Inventory
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		d := resolveDone{items: items, manual: manual, reply: rep}
		all, err := inv.VMs(ctx)
		if err != nil {
			d.err = fmt.Errorf("list inventory: %w", err)
		}
		for i := range d.items {
			if err == nil {
				d.items[i].res = d.items[i].job.Selection.resolveList(all, d.items[i].previous)
			}
		}
		s.results <- d
	}()
}

func (s *Scheduler) previouslySelected(job string) []string {
	var previous []string
	known := false
	for k, st := range s.states {
		if k.job == job {
			known = true
			if st.Selected {
				previous = append(previous, k.vm)
			}
		}
	}
	if known && previous == nil {
		previous = []string{} // a known job whose selection was empty: everything is new
	}
	return previous
}

func (s *Scheduler) resolved(d resolveDone) {
	s.resolveCount--
	if !d.manual {
		for _, it := range d.items {
			delete(s.resolving, it.job.ID)
		}
	}
	if s.runCtx.Err() != nil {
		if d.reply != nil {
			d.reply <- reply{err: ErrSchedulerStopped}
		}
		return
	}
	now := s.now()
	for _, it := range d.items {
		j, ok := s.jobs[it.job.ID]
		if !ok || !j.Enabled {
			if d.reply != nil {
				err := ErrJobNotFound
				if ok {
					err = ErrJobDisabled
				}
				d.reply <- reply{err: fmt.Errorf("run job %s: %w", it.job.ID, err)}
			}
			continue
		}
		if d.err != nil {
			if d.reply != nil {
				d.reply <- reply{err: fmt.Errorf("run job %s: evaluate selection: %w", j.ID, d.err)}
				continue
			}
			s.resolveWait[j.ID] = now.Add(s.cfg.RetryBackoff)
			s.emit(Event{Severity: SeverityError, Kind: EventSelectionFailed, Subject: j.Name, Job: j.ID,
				Message: fmt.Sprintf("cannot evaluate the selection (retrying at %s): %v", now.Add(s.cfg.RetryBackoff).Format(time.RFC3339), d.err)})
			continue
		}
		if d.manual {
			d.reply <- reply{runID: s.openManualRun(j, s.applyResolution(j, it.res), now)}
			continue
		}
		if occ, open := j.Slot(now); !open || occ.ID() != it.occ.ID() || s.current[j.ID] != nil {
			continue // the window moved on while the inventory answered; step decides afresh
		}
		delete(s.resolveWait, j.ID)
		s.openRun(j, it.occ, s.applyResolution(j, it.res), now)
	}
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
	case s.busyRun(id) != nil:
		// A run of the job still has VMs to back up: a second run would
		// back each of them up again right after (two points in the same
		// second). "Run now" answers with the run already doing it.
		rep <- reply{runID: s.busyRun(id).rec.ID}
	default:
		s.startResolve([]resolveItem{{job: j}}, true, rep)
	}
}

// busyRun returns a run of the job that is open and still has a VM pending
// or running, or nil.
func (s *Scheduler) busyRun(job string) *activeRun {
	var found *activeRun
	for _, ar := range s.runs {
		if ar.rec.Job != job || ar.closing {
			continue
		}
		for _, o := range ar.rec.VMs {
			if o.Status == OutcomePending || o.Status == OutcomeRunning {
				if found == nil || ar.rec.ID < found.rec.ID {
					found = ar // the same answer whatever the map order
				}
				break
			}
		}
	}
	return found
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
// its running backups have finished, or have been cancelled when the window
// closed on a job that cancels (windowClosed false: only the run's slot
// ended, the window is still open, and running backups always finish).
func (s *Scheduler) closeRun(ar *activeRun, why string, windowClosed bool) {
	delete(s.current, ar.rec.Job)
	ar.closing = true
	for _, t := range s.busyVM {
		if t.run == ar && windowClosed && ar.job.OnWindowClose == CloseCancel {
			t.cancelByClose = true
			t.cancel()
		}
	}
	for i := range ar.rec.VMs {
		o := &ar.rec.VMs[i]
		if o.Status == OutcomePending {
			o.Status, o.Error = OutcomeNotRun, why
			s.emit(Event{Severity: SeverityWarning, Kind: EventVMNotBackedUp, Subject: o.Name, Job: ar.rec.Job, VM: o.VM,
				Message: fmt.Sprintf("not backed up in this run: %s", why)})
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
		for _, o := range ar.rec.VMs {
			if o.Status == OutcomePending || o.Status == OutcomeRunning {
				return
			}
			// A scheduled run retries its failed VMs until its slot ends.
			if !ar.rec.Manual && o.Status != OutcomeSucceeded {
				return
			}
		}
		if !ar.rec.Manual {
			// Every VM is backed up: the run is over, and no other starts in
			// its slot (a run that stayed "running" until the window closed
			// read as a backup still going).
			s.doneSlot[ar.rec.Job] = ar.rec.WindowID
			if s.current[ar.rec.Job] == ar {
				delete(s.current, ar.rec.Job)
			}
		}
	}
	ar.rec.End = s.now()
	delete(s.runs, ar.rec.ID)
	s.putRun(ar)
	s.startPostJob(ar)
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
	// Only the outcomes that happened, sizes in units: an administrator
	// reads "3 VMs: 3 succeeded; 66.6 MiB read".
	var parts []string
	for _, c := range []struct {
		s    OutcomeStatus
		word string
	}{{OutcomeSucceeded, "succeeded"}, {OutcomeFailed, "failed"}, {OutcomeCancelled, "cancelled"}, {OutcomeInterrupted, "interrupted"}, {OutcomeNotRun, "not run"}} {
		if n := counts[c.s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c.word))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "none finished")
	}
	return fmt.Sprintf("%s: %s; %s read", pluralVMs(len(r.VMs)), strings.Join(parts, ", "), humanBytes(bytes))
}

// pluralVMs is "1 VM" or "3 VMs".
func pluralVMs(n int) string {
	if n == 1 {
		return "1 VM"
	}
	return fmt.Sprintf("%d VMs", n)
}

// humanBytes writes n in binary units with three significant digits.
func humanBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %ciB", v, units[i])
	case v >= 10:
		return fmt.Sprintf("%.1f %ciB", v, units[i])
	}
	return fmt.Sprintf("%.2f %ciB", v, units[i])
}
