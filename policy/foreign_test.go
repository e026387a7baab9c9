package policy

import (
	"testing"
	"time"
)

// A job's retention only sees its own appliance's points: in a repository
// several appliances share, another appliance's job of the same name is
// not this job.
func TestRetentionSkipsForeignPoints(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var pts []Point
	for i := range 6 {
		pts = append(pts,
			Point{ID: "own" + string(rune('a'+i)), Repository: "r", VM: "vm", Job: "daily", Time: t0.Add(time.Duration(i) * time.Hour), Status: PointComplete, Writer: "app-1"},
			Point{ID: "other" + string(rune('a'+i)), Repository: "r", VM: "vm", Job: "daily", Time: t0.Add(time.Duration(i) * time.Hour), Status: PointComplete, Writer: "app-2", Foreign: true})
	}
	got := pointsOf(pts, "daily")
	if len(got) != 6 {
		t.Fatalf("pointsOf kept %d points, want this appliance's 6", len(got))
	}
	plan := Retention{Last: 1}.DryRun(got, time.UTC)
	for _, p := range plan.Removals() {
		if p.Foreign {
			t.Fatalf("retention would remove another appliance's point %s", p.ID)
		}
	}
	if n := len(plan.Removals()); n != 5 {
		t.Fatalf("removals %d, want 5 of its own", n)
	}
}
