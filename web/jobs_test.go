package web

import (
	"context"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// GET /jobs/{id}/runs says when an open scheduled run's slot closes: the
// console shows "all VMs backed up; the window stays open until 06:00"
// instead of a run "running" for hours after its last VM.
func TestJobRunSlotCloses(t *testing.T) {
	f := newFixture(t, nil)
	job := validJob("nightly") // Monday 22:00-06:00 UTC
	job["everyHours"] = 4
	if r := f.admin("POST", "/api/v1/jobs", job); r.status != 201 {
		t.Fatalf("create job: %d %s", r.status, r.body)
	}
	ctx := context.Background()
	mon := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC) // a Monday
	second := mon.Add(4 * time.Hour)                      // the night's second slot: 02:00-06:00
	done := []policy.VMOutcome{{VM: testVM.InstanceUUID, Name: "web01", Status: policy.OutcomeSucceeded, Point: "abc"}}
	for _, r := range []policy.JobRun{
		{ID: "nightly/1", Job: "nightly", WindowID: mon.Format(time.RFC3339), Start: mon, End: second, VMs: done},
		{ID: "nightly/2", Job: "nightly", WindowID: second.Format(time.RFC3339), Start: second.Add(time.Minute), VMs: done},
		{ID: "nightly/3", Job: "nightly", Manual: true, Start: second.Add(2 * time.Minute)},
		{ID: "nightly/4", Job: "nightly", WindowID: "2026-11-30T23:00:00Z", Start: second.Add(3 * time.Minute)}, // no such slot (the window changed)
	} {
		if err := f.db.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var got []JobRunView
	r := f.do("GET", "/api/v1/jobs/nightly/runs", nil, bearer(f.tokens[auth.RoleRestoreOnly]))
	if r.status != 200 {
		t.Fatalf("runs: %d %s", r.status, r.body)
	}
	r.json(t, &got)
	want := map[string]string{"nightly/1": "", "nightly/2": "2026-12-01T06:00:00Z", "nightly/3": "", "nightly/4": ""}
	if len(got) != len(want) {
		t.Fatalf("%d runs: %s", len(got), r.body)
	}
	for _, v := range got {
		s := ""
		if v.SlotCloses != nil {
			s = v.SlotCloses.UTC().Format(time.RFC3339)
		}
		if s != want[v.ID] {
			t.Errorf("run %s (%s): slotCloses %q, want %q", v.ID, v.State, s, want[v.ID])
		}
	}
}

// A job's VSS type goes through the API as given and comes back; copy
// is the default and is not written.
func TestJobVSSType(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		id, quiesce, vss string
	}{
		{"full", "application", "full"},
		{"copy", "application", "copy"},
		{"default", "application", ""},
		{"fs-copy", "filesystem", "copy"},
	} {
		job := validJob(tc.id)
		job["quiesce"] = tc.quiesce
		if tc.vss != "" {
			job["vssType"] = tc.vss
		}
		if r := f.admin("POST", "/api/v1/jobs", job); r.status != 201 {
			t.Fatalf("%s: create: %d %s", tc.id, r.status, r.body)
		}
		r := f.admin("GET", "/api/v1/jobs/"+tc.id, nil)
		var got map[string]any
		r.json(t, &got)
		if v, _ := got["vssType"].(string); v != tc.vss || got["quiesce"] != tc.quiesce {
			t.Errorf("%s: stored quiesce %v vssType %v, want %s %q", tc.id, got["quiesce"], got["vssType"], tc.quiesce, tc.vss)
		}
		j, err := f.db.Job(context.Background(), tc.id)
		if err != nil || string(j.VSSType) != tc.vss {
			t.Errorf("%s: job in the store %+v (%v)", tc.id, j, err)
		}
	}
}

// A job's scripts go through the API (validated against the OpenAPI Job
// schema by the fixture) and into the store as given.
func TestJobScripts(t *testing.T) {
	f := newFixture(t, nil)
	job := validJob("hooks")
	job["scripts"] = map[string]any{
		"preVM":   map[string]any{"command": []string{"/usr/local/bin/freeze", "--all"}, "timeoutSeconds": 120},
		"postJob": map[string]any{"command": []string{"sh", "-c", "logger $VMVAULT_JOB_RESULT"}, "onFailure": "fail"},
	}
	if r := f.admin("POST", "/api/v1/jobs", job); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r := f.admin("GET", "/api/v1/jobs/hooks", nil)
	var got struct {
		Scripts policy.Scripts `json:"scripts"`
	}
	r.json(t, &got)
	if sc := got.Scripts; sc.PreVM == nil || sc.PreVM.TimeoutSeconds != 120 || len(sc.PreVM.Command) != 2 || sc.PostJob == nil || sc.PostJob.OnFailure != policy.ScriptFail || sc.PreJob != nil || sc.PostVM != nil {
		t.Errorf("served scripts %+v", sc)
	}
	j, err := f.db.Job(context.Background(), "hooks")
	if err != nil || j.Scripts.PreVM == nil || j.Scripts.PreVM.Command[0] != "/usr/local/bin/freeze" {
		t.Errorf("job in the store %+v (%v)", j.Scripts, err)
	}
}

// A point's quiesce record (its quiesce.* tags) is served as the quiesce
// object, which the OpenAPI document describes; an older point has none.
func TestJobPointQuiesceDetail(t *testing.T) {
	f := newFixture(t, nil)
	detail := "VSS with writers (ctx_backup, full): VSS writer 'SqlServerWriter' failed"
	p := commitPointWith(t, f.repo, testVM, "nightly", time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC), "filesystem", map[string]string{
		"quiesce": "prefer", "quiesce.requested": "application", "quiesce.vss_type": "full", "quiesce.reason": "quiesce-failed",
		"quiesce.detail": detail, "quiesce.spec": "vss:ctx_file_share_backup:copy", "quiesce.tools_version": "12.2.0", "quiesce.tools_status": "guestToolsCurrent",
	})
	var got api.RestorePoint
	f.admin("GET", "/api/v1/restore-points/"+p.ID, nil).json(t, &got)
	want := api.PointQuiesce{Requested: "application", VSSType: "full", Obtained: "filesystem", Reason: "quiesce-failed", Detail: detail,
		Spec: "vss:ctx_file_share_backup:copy", ToolsVersion: "12.2.0", ToolsStatus: "guestToolsCurrent"}
	if got.Quiesce == nil || *got.Quiesce != want {
		t.Errorf("quiesce %+v, want %+v", got.Quiesce, want)
	}
	old := commitPoint(t, f.repo, testVM, "nightly", time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC))
	var oldGot api.RestorePoint
	f.admin("GET", "/api/v1/restore-points/"+old.ID, nil).json(t, &oldGot)
	if oldGot.Quiesce != nil {
		t.Errorf("point without the record: quiesce %+v", oldGot.Quiesce)
	}
}
