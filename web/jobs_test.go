package web

import (
	"context"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
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
