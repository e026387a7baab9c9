package policy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/policy"
)

// hookScript appends what a hook saw to log; preVM fails for vm-v2.
func hookScript(log, hook string) *policy.Script {
	body := `echo "` + hook + ` job=$VMVAULT_JOB_ID vm=$VMVAULT_VM_NAME uuid=$VMVAULT_VM_UUID repo=$VMVAULT_REPOSITORY vmresult=$VMVAULT_VM_RESULT point=$VMVAULT_RESTORE_POINT jobresult=$VMVAULT_JOB_RESULT" >> "` + log + `"`
	if hook == "preVM" {
		body += `; if [ "$VMVAULT_VM_NAME" = vm-v2 ]; then echo "cannot quiesce the database" >&2; exit 4; fi`
	}
	return &policy.Script{Command: []string{"/bin/sh", "-c", body}, TimeoutSeconds: 60}
}

func TestSchedulerScriptsAroundRun(t *testing.T) {
	log := filepath.Join(t.TempDir(), "hooks.log")
	j := nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2"}})
	j.Scripts = policy.Scripts{
		PreJob: hookScript(log, "preJob"), PostJob: hookScript(log, "postJob"),
		PreVM: hookScript(log, "preVM"), PostVM: hookScript(log, "postVM"),
	}
	h := newHarness(t, monday, vms("v1", "v2"), j)
	h.start()
	id, err := h.sched.RunNow(h.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// v2's pre-VM script fails: only v1 reaches the backup engine.
	c := h.startedOne("v1")
	h.finish(c, nil)
	h.events.waitCount(t, policy.EventVMFailed, "v2", 1)
	// preJob, preVM v1, postVM v1, postJob ran; preVM v2 failed.
	h.events.waitCount(t, policy.EventScriptRan, "", 4)
	h.events.waitCount(t, policy.EventScriptFailed, "v2", 1)
	h.sync()
	if n := len(h.runner.calls); n != 0 {
		t.Fatalf("%d more backups reached the runner", n)
	}
	run, err := h.db.Run(h.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	o := run.Outcome("v2")
	if o.Status != policy.OutcomeFailed || o.Point != "" || !strings.Contains(o.Error, "exited with status 4") || !strings.Contains(o.Error, "cannot quiesce the database") {
		t.Errorf("v2 outcome %+v", *o)
	}
	if o := run.Outcome("v1"); o.Status != policy.OutcomeSucceeded || o.Point != "pt-v1" {
		t.Errorf("v1 outcome %+v", *o)
	}
	failed := h.events.all(policy.EventScriptFailed)
	if len(failed) != 1 || failed[0].Severity != policy.SeverityError || !strings.Contains(failed[0].Message, "cannot quiesce the database") {
		t.Errorf("script failure events %+v", failed)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := map[string]bool{
		"preJob job=a vm= uuid= repo=repo1 vmresult= point= jobresult=":                    false,
		"preVM job=a vm=vm-v1 uuid=v1 repo=repo1 vmresult= point= jobresult=":              false,
		"preVM job=a vm=vm-v2 uuid=v2 repo=repo1 vmresult= point= jobresult=":              false,
		"postVM job=a vm=vm-v1 uuid=v1 repo=repo1 vmresult=success point=pt-v1 jobresult=": false,
		"postJob job=a vm= uuid= repo=repo1 vmresult= point= jobresult=partial":            false,
	}
	for _, l := range lines {
		if _, ok := want[l]; !ok {
			t.Errorf("unexpected hook line %q", l)
		}
		want[l] = true
	}
	for l, seen := range want {
		if !seen {
			t.Errorf("hook line missing: %q", l)
		}
	}
	if len(lines) != len(want) || !strings.HasPrefix(lines[0], "preJob") || !strings.HasPrefix(lines[len(lines)-1], "postJob") {
		t.Errorf("hooks ran in the wrong order or number:\n%s", b)
	}
}

func TestSchedulerPreJobFailureFailsEveryVM(t *testing.T) {
	j := nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2"}})
	j.Concurrency = 2
	j.Scripts.PreJob = &policy.Script{Command: []string{"/bin/sh", "-c", "echo no storage >&2; exit 2"}}
	h := newHarness(t, monday, vms("v1", "v2"), j)
	h.start()
	id, err := h.sched.RunNow(h.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	h.events.waitCount(t, policy.EventJobFinished, "", 1)
	h.sync()
	if n := len(h.runner.calls); n != 0 {
		t.Fatalf("%d backups ran after the pre-job script failed", n)
	}
	if n := h.events.count(policy.EventScriptFailed, ""); n != 1 {
		t.Errorf("pre-job script ran %d times, want once per run", n)
	}
	run, err := h.db.Run(h.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range run.VMs {
		if o.Status != policy.OutcomeFailed || !strings.Contains(o.Error, "pre-job script") || !strings.Contains(o.Error, "no storage") {
			t.Errorf("outcome %+v", o)
		}
	}
}
