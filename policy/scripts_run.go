package policy

// Running a job's scripts around its VMs' backups (scripts.go has the
// configuration, policy/jobscript the processes).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmvault/vmvault/policy/jobscript"
)

// Event kinds of scripts.
const (
	EventScriptRan    = "script.ran"
	EventScriptFailed = "script.failed"
)

// ErrScriptFailed is wrapped by a VM's backup error when one of the job's
// scripts failed with onFailure fail.
var ErrScriptFailed = errors.New("script failed")

// cleanupTimeout bounds a post script that is due after its job or VM was
// cancelled: it still runs (it may have to undo what the pre script did,
// such as thawing an application) but not for its whole time limit.
const cleanupTimeout = 30 * time.Second

// Script results in the environment.
const (
	resultSuccess   = "success"
	resultPartial   = "partial"
	resultFailed    = "failed"
	resultCancelled = "cancelled"
)

// runScripts is one job run's script state, shared by its VM tasks: the
// pre-job script runs once, before the first VM's backup, and every VM of
// the run waits for it.
type runScripts struct {
	now     func() time.Time
	once    sync.Once
	preErr  error       // the pre-job script failed with onFailure fail
	started atomic.Bool // a VM reached the pre-job stage: the post-job script is due
}

// scriptReport is one script that ran, for the run's events.
type scriptReport struct {
	hook  string // preJob, postJob, preVM, postVM
	vm    VM     // zero for the job's scripts
	res   jobscript.Result
	took  time.Duration // by the scheduler's clock
	fatal bool          // it failed and fails its VM or job
}

func hookLabel(hook string) string {
	switch hook {
	case "preJob":
		return "pre-job script"
	case "postJob":
		return "post-job script"
	case "preVM":
		return "pre-VM script"
	}
	return "post-VM script"
}

func jobEnv(j Job, runID string) []string {
	return []string{
		"VMVAULT_JOB_ID=" + j.ID,
		"VMVAULT_JOB_NAME=" + j.Name,
		"VMVAULT_RUN_ID=" + runID,
		"VMVAULT_REPOSITORY=" + j.Repository,
	}
}

func vmEnv(j Job, runID string, vm VM) []string {
	return append(jobEnv(j, runID),
		"VMVAULT_VM_NAME="+vm.Name,
		"VMVAULT_VM_UUID="+vm.InstanceUUID,
		"VMVAULT_VM_MOREF="+vm.MoRef)
}

// runHook runs one script. A post script due after ctx was cancelled still
// runs, for at most cleanupTimeout.
func runHook(ctx context.Context, now func() time.Time, hook string, sc *Script, env []string, post bool, vm VM) scriptReport {
	timeout := sc.Timeout()
	if post && ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
		timeout = min(timeout, cleanupTimeout)
	}
	start := now()
	res := jobscript.Run(ctx, jobscript.Spec{Command: sc.Command, Timeout: timeout, Env: env})
	return scriptReport{hook: hook, vm: vm, res: res, took: now().Sub(start), fatal: res.Err != nil && sc.Fails(!post)}
}

// scriptError is the error a fatal script gives its VM: the exit status
// and the end of its stderr.
func (r scriptReport) scriptError() error {
	msg := fmt.Sprintf("%s: %v", hookLabel(r.hook), r.res.Err)
	if tail := strings.TrimSpace(string(r.res.Stderr)); tail != "" {
		msg += "; stderr: " + tail
	}
	return fmt.Errorf("%w: %s", ErrScriptFailed, msg)
}

// backupVM runs the job's pre-job (once per run), pre-VM and post-VM
// scripts around one VM's backup.
func (rs *runScripts) backupVM(ctx context.Context, runner Runner, job Job, runID string, vm VM, progress func(Progress)) (BackupResult, []scriptReport, error) {
	var reps []scriptReport
	sc := job.Scripts
	rs.started.Store(true)
	if sc.PreJob != nil {
		rs.once.Do(func() {
			r := runHook(ctx, rs.now, "preJob", sc.PreJob, jobEnv(job, runID), false, VM{})
			reps = append(reps, r)
			if r.fatal {
				rs.preErr = r.scriptError()
			}
		})
		if rs.preErr != nil {
			return BackupResult{}, reps, fmt.Errorf("not backed up: %w", rs.preErr)
		}
	}
	env := vmEnv(job, runID, vm)
	if sc.PreVM != nil {
		r := runHook(ctx, rs.now, "preVM", sc.PreVM, env, false, vm)
		reps = append(reps, r)
		if r.fatal {
			// No backup, and no post-VM script: nothing was started that
			// it would have to undo, or the pre script undid it itself.
			return BackupResult{}, reps, fmt.Errorf("not backed up: %w", r.scriptError())
		}
	}
	res, err := runner.RunBackup(ctx, job, vm, progress)
	if sc.PostVM != nil {
		result := resultSuccess
		switch {
		case err != nil && ctx.Err() != nil:
			result = resultCancelled
		case err != nil:
			result = resultFailed
		}
		penv := append(env, "VMVAULT_VM_RESULT="+result, "VMVAULT_RESTORE_POINT="+res.PointID)
		r := runHook(ctx, rs.now, "postVM", sc.PostVM, penv, true, vm)
		reps = append(reps, r)
		if r.fatal && err == nil {
			err = fmt.Errorf("backed up to restore point %s (kept), but: %w", res.PointID, r.scriptError())
		}
	}
	return res, reps, err
}

// jobResult is VMVAULT_JOB_RESULT for a finished run.
func jobResult(r JobRun) string {
	ok := 0
	for _, o := range r.VMs {
		if o.Status == OutcomeSucceeded {
			ok++
		}
	}
	switch {
	case ok == len(r.VMs):
		return resultSuccess
	case ok == 0:
		return resultFailed
	}
	return resultPartial
}

// postJobDone carries a post-job script's report back to the scheduler.
type postJobDone struct {
	job Job
	rep scriptReport
}

// startPostJob runs the job's post-job script once the run is over, if a VM
// of the run reached the pre-job stage.
func (s *Scheduler) startPostJob(ar *activeRun) {
	sc := ar.job.Scripts.PostJob
	if sc == nil || ar.scripts == nil || !ar.scripts.started.Load() {
		return
	}
	env := append(jobEnv(ar.job, ar.rec.ID), "VMVAULT_JOB_RESULT="+jobResult(ar.rec))
	job, ctx := ar.job, s.runCtx
	s.scriptsRunning++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.results <- postJobDone{job: job, rep: runHook(ctx, s.now, "postJob", sc, env, true, VM{})}
	}()
}

func (s *Scheduler) postJobFinished(d postJobDone) {
	s.scriptsRunning--
	s.emitScript(d.job, d.rep)
}

// emitScript records what a script did: its outcome and its captured
// output (never its environment).
func (s *Scheduler) emitScript(j Job, r scriptReport) {
	ev := Event{Severity: SeverityInfo, Kind: EventScriptRan, Subject: j.Name, Job: j.ID, Repository: j.Repository}
	if r.vm.InstanceUUID != "" {
		ev.Subject, ev.VM = r.vm.Name, r.vm.InstanceUUID
	}
	var b strings.Builder
	if r.res.Err == nil {
		fmt.Fprintf(&b, "%s succeeded in %s", hookLabel(r.hook), r.took.Round(time.Millisecond))
	} else {
		ev.Kind, ev.Severity = EventScriptFailed, SeverityWarning
		what := "continuing (onFailure continue)"
		if r.fatal {
			ev.Severity = SeverityError
			switch r.hook {
			case "preJob":
				what = "no VM of the run is backed up"
			case "preVM":
				what = "the VM is not backed up"
			case "postVM":
				what = "the VM's backup counts as failed"
			default:
				what = "the run counts as failed"
			}
		}
		fmt.Fprintf(&b, "%s failed after %s: %v; %s", hookLabel(r.hook), r.took.Round(time.Millisecond), r.res.Err, what)
	}
	if len(r.res.Output) > 0 {
		fmt.Fprintf(&b, "\noutput:\n%s", strings.ToValidUTF8(string(r.res.Output), "\uFFFD"))
		if r.res.Truncated > 0 {
			fmt.Fprintf(&b, "\n[%d more bytes of output not kept]", r.res.Truncated)
		}
	}
	ev.Message = b.String()
	s.emit(ev)
}
