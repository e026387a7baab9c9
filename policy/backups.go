package policy

// Backups: choosing, starting and recording the end of each VM backup.

import (
	"context"
	"fmt"
	"sort"
	"time"
)

type candidate struct {
	run *activeRun
	vm  VM
	st  *VMState
}

// startBackups starts what may start now. Maintenance on the repository is
// no reason to wait: the repository supports both at once.
func (s *Scheduler) startBackups(now time.Time) {
	if s.running >= s.cfg.MaxConcurrent {
		return // nothing could start: skip ranking every waiting VM
	}
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
	for _, c := range cands {
		if s.running >= s.cfg.MaxConcurrent {
			break
		}
		if s.jobRunning[c.run.rec.Job] >= c.run.job.concurrency() || s.busyVM[c.vm.InstanceUUID] != nil {
			continue
		}
		s.startBackup(c, now)
	}
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
	s.markRun(ar)

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
	if ar.scripts == nil && job.Scripts.any() {
		ar.scripts = &runScripts{now: s.now}
	}
	scripts, runID := ar.scripts, ar.rec.ID
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var d backupDone
		if scripts != nil {
			d.res, d.scripts, d.err = scripts.backupVM(ctx, s.cfg.Runner, job, runID, vm, progress)
		} else {
			d.res, d.err = s.cfg.Runner.RunBackup(ctx, job, vm, progress)
		}
		cancel()
		d.task = t
		s.results <- d
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

	for _, r := range d.scripts {
		s.emitScript(ar.job, r)
	}
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
		ev.Message = fmt.Sprintf("backed up to restore point %s (%s read, %s new in the repository)", d.res.PointID, humanBytes(d.res.Bytes), humanBytes(d.res.Stored))
		if d.res.Bytes == 0 {
			// A backup that read nothing succeeded: say why it is 0 B.
			ev.Message = fmt.Sprintf("backed up to restore point %s (0 B read: nothing changed or allocated on its disks since the last backup)", d.res.PointID)
		}
	case t.cancelByClose:
		st.LastError = d.err.Error()
		o.Status, o.Error = OutcomeCancelled, "cancelled at window close: "+d.err.Error()
		ev.Severity, ev.Kind, ev.Message = SeverityWarning, EventVMCancelled, "backup cancelled because its window closed"
	case s.runCtx.Err() != nil:
		// Not a failure of the VM: retry at once when the scheduler is back,
		// and give the attempt back, so a restart (an upgrade) never uses up
		// Job.MaxAttempts. An attempt a crash cut short does count: the
		// backup may be what crashed the appliance.
		o.Status, o.Error = OutcomeInterrupted, interruptedDuring
		st.NextRetry = time.Time{}
		if !ar.rec.Manual && sameWindow && st.Attempts > 0 {
			st.Attempts--
		}
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
	s.markRun(ar)
	s.emit(ev)
	if s.runCtx.Err() == nil {
		s.finishIfDone(ar)
	}
}
