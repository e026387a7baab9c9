package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stubRunner answers every backup with res/err; cancel, when set, is
// called first (the job is cancelled while the VM is being backed up).
type stubRunner struct {
	res    BackupResult
	err    error
	cancel context.CancelFunc
	calls  int
}

func (r *stubRunner) RunBackup(ctx context.Context, _ Job, _ VM, _ func(Progress)) (BackupResult, error) {
	r.calls++
	if r.cancel != nil {
		r.cancel()
		return BackupResult{}, ctx.Err()
	}
	return r.res, r.err
}

func TestBackupVMScripts(t *testing.T) {
	vm := VM{InstanceUUID: "u1", Name: "web-01", MoRef: "vm-1"}
	record := func(t *testing.T) (string, *Script) {
		p := filepath.Join(t.TempDir(), "post.log")
		return p, &Script{Command: []string{"/bin/sh", "-c", `echo "$VMVAULT_VM_RESULT $VMVAULT_RESTORE_POINT $VMVAULT_VM_MOREF" > "` + p + `"`}}
	}
	tests := []struct {
		name     string
		post     func(log string) *Script // nil: record
		runner   func(cancel context.CancelFunc) *stubRunner
		wantErr  string // "" : success
		wantLog  string
		isScript bool
	}{
		{"success", nil, func(context.CancelFunc) *stubRunner { return &stubRunner{res: BackupResult{PointID: "p1"}} }, "", "success p1 vm-1\n", false},
		{"backup failed", nil, func(context.CancelFunc) *stubRunner { return &stubRunner{err: errors.New("snapshot refused")} }, "snapshot refused", "failed  vm-1\n", false},
		// The job is cancelled during the backup: the post script still
		// runs (to undo what the pre script did), told so.
		{"cancelled", nil, func(c context.CancelFunc) *stubRunner { return &stubRunner{cancel: c} }, "context canceled", "cancelled  vm-1\n", false},
		{"post fails with fail", func(log string) *Script {
			return &Script{Command: []string{"/bin/sh", "-c", "echo thaw failed >&2; exit 5"}, OnFailure: ScriptFail}
		}, func(context.CancelFunc) *stubRunner { return &stubRunner{res: BackupResult{PointID: "p1"}} }, "restore point p1 (kept)", "", true},
		{"post fails with the default continue", func(log string) *Script {
			return &Script{Command: []string{"/bin/sh", "-c", "exit 5"}}
		}, func(context.CancelFunc) *stubRunner { return &stubRunner{res: BackupResult{PointID: "p1"}} }, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log, post := record(t)
			if tc.post != nil {
				post = tc.post(log)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			job := Job{ID: "j", Name: "J", Repository: "r", Scripts: Scripts{PostVM: post}}
			rs := &runScripts{now: time.Now}
			res, reps, err := rs.backupVM(ctx, tc.runner(cancel), job, "run1", vm, func(Progress) {})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if errors.Is(err, ErrScriptFailed) != tc.isScript {
				t.Errorf("err %v: is ErrScriptFailed %v, want %v", err, errors.Is(err, ErrScriptFailed), tc.isScript)
			}
			if tc.isScript && !strings.Contains(err.Error(), "thaw failed") {
				t.Errorf("err %v lacks the stderr tail", err)
			}
			if len(reps) != 1 || reps[0].hook != "postVM" {
				t.Fatalf("reports %+v", reps)
			}
			if tc.wantErr == "" && res.PointID != "p1" {
				t.Errorf("result %+v", res)
			}
			if tc.wantLog != "" {
				b, err := os.ReadFile(log)
				if err != nil || string(b) != tc.wantLog {
					t.Errorf("post script saw %q (%v), want %q", b, err, tc.wantLog)
				}
			}
		})
	}
}

func TestJobResult(t *testing.T) {
	run := func(st ...OutcomeStatus) JobRun {
		var r JobRun
		for _, s := range st {
			r.VMs = append(r.VMs, VMOutcome{Status: s})
		}
		return r
	}
	for _, tc := range []struct {
		r    JobRun
		want string
	}{
		{run(), "success"},
		{run(OutcomeSucceeded, OutcomeSucceeded), "success"},
		{run(OutcomeSucceeded, OutcomeFailed), "partial"},
		{run(OutcomeSucceeded, OutcomeNotRun), "partial"},
		{run(OutcomeFailed, OutcomeCancelled), "failed"},
	} {
		if got := jobResult(tc.r); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.r.VMs, got, tc.want)
		}
	}
}
