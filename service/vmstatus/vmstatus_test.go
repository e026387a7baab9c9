package vmstatus

import (
	"slices"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
)

func TestCompute(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	inv := []policy.VM{
		{InstanceUUID: "u-web", Name: "web", MoRef: "vm-1", Tags: []string{"tag-prod"}},
		{InstanceUUID: "u-db", Name: "db", MoRef: "vm-2"},
		{InstanceUUID: "u-new", Name: "new", MoRef: "vm-3"},
	}
	jobs := []policy.Job{
		{ID: "nightly", Enabled: true, Selection: policy.Selection{VMs: []string{"u-web", "u-db"}}},
		{ID: "off", Enabled: false, Selection: policy.Selection{VMs: []string{"u-web"}}},
	}
	pts := []Point{ // newest first
		{InstanceUUID: "u-web", Name: "web", Time: h(5), Partial: true},
		{InstanceUUID: "u-web", Name: "web", Time: h(4)},
		{InstanceUUID: "u-gone", Name: "gone", Time: h(3)},
		{Name: "legacy", Time: h(2)},
	}
	states := []policy.VMState{
		// db: failed at 6 after a success at 1: failed.
		{Job: "nightly", VM: "u-db", Name: "db", Selected: true, LastAttempt: h(6), LastSuccess: h(1), LastError: "snapshot failed"},
		// web: an old failure in a job that no longer selects it says nothing,
		{Job: "old", VM: "u-web", Name: "web", Selected: false, LastAttempt: h(9), LastError: "ancient"},
		// and its latest selected attempt succeeded.
		{Job: "nightly", VM: "u-web", Name: "web", Selected: true, LastAttempt: h(4), LastSuccess: h(4)},
		// a VM known only from a job state (vCenter lost it, no point yet) that failed.
		{Job: "nightly", VM: "u-lost", Name: "lost", Selected: true, LastAttempt: h(2), LastError: "not found"},
	}
	got := Compute(Input{Inventory: inv, HaveInventory: true, Jobs: jobs, Points: Summarize(pts), States: states})
	type want struct {
		key, state  string
		inInv       bool
		jobs, on    []string
		points, idx int
	}
	wants := []want{
		{"u-web", "protected", true, []string{"nightly", "off"}, []string{"nightly"}, 2, 0},
		{"u-db", "failed", true, []string{"nightly"}, []string{"nightly"}, 0, -1},
		{"u-new", "unprotected", true, []string{}, []string{}, 0, -1},
		// Points, but no job covers them (vCenter lost the VM): not protected.
		{"u-gone", "unprotected", false, []string{}, []string{}, 1, 1},
		{"legacy", "unprotected", false, []string{}, []string{}, 1, 2},
		{"u-lost", "failed", false, []string{}, []string{}, 0, -1},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d statuses, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		g := got[i]
		if g.Key != w.key || g.State() != w.state || g.InInventory != w.inInv || !slices.Equal(g.Jobs, w.jobs) || !slices.Equal(g.EnabledJobs, w.on) || g.Points != w.points || g.LastPoint != w.idx {
			t.Errorf("status %d = %+v (state %s), want %+v", i, g, g.State(), w)
		}
	}
	if got[0].Tags[0] != "tag-prod" || got[1].LastError != "snapshot failed" {
		t.Errorf("tags or error lost: %+v %+v", got[0], got[1])
	}
}

// A VM with points in two repositories: counts add up and the newest
// complete point wins, whichever repository holds it.
func TestComputeAcrossRepositories(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sums := []VMPoints{
		{InstanceUUID: "u", Name: "web", Points: 3, HasComplete: true, LastComplete: t0},
		{InstanceUUID: "u", Name: "web", Points: 2, HasComplete: true, LastComplete: t0.Add(time.Hour)},
		{InstanceUUID: "u", Name: "web", Points: 1}, // only a partial point
	}
	got := Compute(Input{Points: sums})
	if len(got) != 1 || got[0].Points != 6 || got[0].LastPoint != 1 {
		t.Fatalf("%+v, want one VM, 6 points, the second summary's point newest", got)
	}
}

// Protected means a job covers the VM: selected by an enabled job, with a
// complete point recent for that job's window. A point of a VM no enabled
// job selects is ad hoc; an old one of a covered VM is overdue.
func TestProtectedMeansAJobCoversIt(t *testing.T) {
	utc := time.UTC
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, utc) // a Friday noon
	monday, err := policy.ParseRange("22:00-24:00")
	if err != nil {
		t.Fatal(err)
	}
	weekly := policy.Window{Location: utc}
	weekly.Days[time.Monday] = []policy.Range{monday}
	lastMonday := time.Date(2026, 11, 30, 22, 0, 0, 0, utc)
	inv := []policy.VM{{InstanceUUID: "u", Name: "web"}}
	cases := []struct {
		name                      string
		jobs                      []policy.Job
		point                     time.Time // zero: none
		states                    []policy.VMState
		noInventory               bool
		protected, adHoc, overdue bool
		state                     string
	}{
		{name: "no point", jobs: []policy.Job{{ID: "j", Enabled: true, Window: policy.AlwaysOpen(utc), Selection: policy.Selection{VMs: []string{"u"}}}}, state: "unprotected"},
		{name: "ad hoc: no job", point: now.Add(-time.Hour), adHoc: true, state: "unprotected"},
		{name: "ad hoc: only a disabled job", jobs: []policy.Job{{ID: "j", Window: policy.AlwaysOpen(utc), Selection: policy.Selection{VMs: []string{"u"}}}}, point: now.Add(-time.Hour), adHoc: true, state: "unprotected"},
		{name: "always open, backed up this morning", jobs: []policy.Job{{ID: "j", Enabled: true, Window: policy.AlwaysOpen(utc), Selection: policy.Selection{VMs: []string{"u"}}}}, point: now.Add(-6 * time.Hour), protected: true, state: "protected"},
		{name: "always open, three days old: yesterday's window is past", jobs: []policy.Job{{ID: "j", Enabled: true, Window: policy.AlwaysOpen(utc), Selection: policy.Selection{VMs: []string{"u"}}}}, point: now.Add(-80 * time.Hour), overdue: true, state: "unprotected"},
		{name: "weekly, backed up in Monday's window", jobs: []policy.Job{{ID: "j", Enabled: true, Window: weekly, Selection: policy.Selection{VMs: []string{"u"}}}}, point: lastMonday.Add(30 * time.Minute), protected: true, state: "protected"},
		{name: "weekly, backed up the Sunday before (grace)", jobs: []policy.Job{{ID: "j", Enabled: true, Window: weekly, Selection: policy.Selection{VMs: []string{"u"}}}}, point: lastMonday.Add(-20 * time.Hour), protected: true, state: "protected"},
		{name: "weekly, missed Monday's window", jobs: []policy.Job{{ID: "j", Enabled: true, Window: weekly, Selection: policy.Selection{VMs: []string{"u"}}}}, point: lastMonday.Add(-7 * 24 * time.Hour), overdue: true, state: "unprotected"},
		{name: "the most lenient of two jobs", jobs: []policy.Job{
			{ID: "daily", Enabled: true, Window: policy.AlwaysOpen(utc), Selection: policy.Selection{VMs: []string{"u"}}},
			{ID: "weekly", Enabled: true, Window: weekly, Selection: policy.Selection{VMs: []string{"u"}}}}, point: lastMonday.Add(time.Hour), protected: true, state: "protected"},
		{name: "vCenter down: the job's last selection covers it", noInventory: true,
			jobs:   []policy.Job{{ID: "j", Enabled: true, Window: policy.AlwaysOpen(utc), Selection: policy.Selection{VMs: []string{"u"}}}},
			states: []policy.VMState{{Job: "j", VM: "u", Name: "web", Selected: true, LastAttempt: now.Add(-time.Hour), LastSuccess: now.Add(-time.Hour)}},
			point:  now.Add(-time.Hour), protected: true, state: "protected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Jobs: c.jobs, States: c.states, Now: now}
			if !c.noInventory {
				in.Inventory, in.HaveInventory = inv, true
			}
			if !c.point.IsZero() {
				in.Points = Summarize([]Point{{InstanceUUID: "u", Name: "web", Time: c.point}})
			}
			got := Compute(in)
			if len(got) != 1 {
				t.Fatalf("%d statuses: %+v", len(got), got)
			}
			g := got[0]
			if g.Protected() != c.protected || g.AdHoc() != c.adHoc || g.Overdue() != c.overdue || g.State() != c.state {
				t.Errorf("protected %v ad hoc %v overdue %v state %s, want %v %v %v %s (%+v)", g.Protected(), g.AdHoc(), g.Overdue(), g.State(), c.protected, c.adHoc, c.overdue, c.state, g)
			}
		})
	}
}
