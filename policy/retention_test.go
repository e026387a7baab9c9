package policy

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// simPoints simulates backups of one VM into one repository.
type simPoints struct {
	name   string
	points []Point
}

func simulate(t *testing.T) []simPoints {
	t.Helper()
	berlin := mustLoc(t, "Europe/Berlin")
	start := time.Date(2023, 1, 1, 22, 0, 0, 0, berlin)
	end := start.AddDate(3, 1, 0) // a little over 3 years
	mk := func(i int, at time.Time) Point {
		p := Point{ID: fmt.Sprintf("p%04d", i), Repository: "repo1", VM: "vm-a", Time: at, Status: PointComplete, Bytes: int64(1+i%7) << 20}
		switch {
		case i%17 == 5:
			p.Status = PointFailed
		case i%23 == 7:
			p.Status = PointPartial
		}
		if i == 100 || i == 400 || i == 401 {
			p.Locked = true
		}
		return p
	}
	var daily []Point
	for i, at := 0, start; at.Before(end); i, at = i+1, at.AddDate(0, 0, 1) {
		daily = append(daily, mk(i, at))
	}
	// The newest points failed: newest good must still be the last complete one.
	daily[len(daily)-1].Status = PointFailed
	daily[len(daily)-1].Locked = false

	rng := rand.New(rand.NewPCG(6, 6))
	var irregular []Point
	for i, at := 0, start; at.Before(end); i++ {
		irregular = append(irregular, mk(i, at))
		// Gaps of 0 (several a day) to 9 days, at uneven hours.
		at = at.Add(time.Duration(rng.IntN(9*24*60)) * time.Minute)
		if rng.IntN(10) == 0 {
			at = at.AddDate(0, 1, 0) // appliance off for a month
		}
	}
	return []simPoints{{"daily", daily}, {"irregular", irregular}}
}

func TestRetentionGolden(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	sims := simulate(t)
	policies := []Retention{}
	for _, n := range PresetNames() {
		r, err := Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		policies = append(policies, r)
	}
	policies = append(policies, Retention{Last: 3, Daily: 7, Weekly: 5, Monthly: 13, Quarterly: 6, Yearly: 10})
	var buf bytes.Buffer
	for _, sim := range sims {
		for _, r := range policies {
			name := r.Preset
			if name == "" {
				name = fmt.Sprintf("custom(last=%d,d=%d,w=%d,m=%d,q=%d,y=%d)", r.Last, r.Daily, r.Weekly, r.Monthly, r.Quarterly, r.Yearly)
			}
			plan := r.DryRun(sim.points, berlin)
			checkRetentionInvariants(t, r, sim.points, plan)
			fmt.Fprintf(&buf, "== %s points=%d policy=%s keep=%d remove=%d freed=%d\n", sim.name, len(sim.points), name, plan.Keep, plan.Remove, plan.BytesFreed)
			for _, d := range plan.Decisions {
				if d.Keep {
					fmt.Fprintf(&buf, "keep %s %s %-8s %s\n", d.Point.ID, d.Point.Time.In(berlin).Format("2006-01-02 15:04 Mon"), d.Point.Status, strings.Join(d.Reasons, ", "))
				}
			}
		}
	}
	checkGolden(t, "retention", buf.Bytes())
}

// checkRetentionInvariants states the rules every policy must obey.
func checkRetentionInvariants(t *testing.T, r Retention, points []Point, plan Plan) {
	t.Helper()
	if len(plan.Decisions) != len(points) || plan.Keep+plan.Remove != len(points) {
		t.Fatalf("decisions %d keep %d remove %d for %d points", len(plan.Decisions), plan.Keep, plan.Remove, len(points))
	}
	type group struct{ repo, vm string }
	newestGood := map[group]Point{}
	for _, p := range points {
		g := group{p.Repository, p.VM}
		if n, ok := newestGood[g]; p.Status == PointComplete && (!ok || p.Time.After(n.Time)) {
			newestGood[g] = p
		}
	}
	var freed int64
	goodKept := 0
	for _, d := range plan.Decisions {
		if d.Point.Locked && !d.Keep {
			t.Errorf("locked point %s removed", d.Point.ID)
		}
		if n, ok := newestGood[group{d.Point.Repository, d.Point.VM}]; ok && d.Point.ID == n.ID && !d.Keep {
			t.Errorf("newest good point %s removed", d.Point.ID)
		}
		if d.Point.Status != PointComplete && d.Keep && !slices.Equal(d.Reasons, []string{"locked"}) {
			t.Errorf("%s point %s kept for %v", d.Point.Status, d.Point.ID, d.Reasons)
		}
		if len(d.Reasons) == 0 {
			t.Errorf("point %s has no reason", d.Point.ID)
		}
		if !d.Keep {
			freed += d.Point.Bytes
		}
		if d.Keep && d.Point.Status == PointComplete && !d.Point.Locked {
			goodKept++
		}
	}
	if freed != plan.BytesFreed {
		t.Errorf("bytes freed %d, sum of removed %d", plan.BytesFreed, freed)
	}
	if limit := r.Last + r.Daily + r.Weekly + r.Monthly + r.Quarterly + r.Yearly + 1; goodKept > limit*len(newestGood) {
		t.Errorf("kept %d good unlocked points, more than the %d per group the rules allow", goodKept, limit)
	}
}

func TestRetentionRules(t *testing.T) {
	day := func(d int, h int) time.Time { return time.Date(2026, 1, d, h, 0, 0, 0, time.UTC) }
	pt := func(id string, at time.Time, st PointStatus, locked bool) Point {
		return Point{ID: id, Repository: "r", VM: "vm", Time: at, Status: st, Locked: locked, Bytes: 10}
	}
	tests := []struct {
		name   string
		r      Retention
		points []Point
		keep   []string
		reason map[string]string // id -> a reason that must be present
	}{
		{"keep last skips failed", Retention{Last: 2}, []Point{
			pt("a", day(1, 1), PointComplete, false), pt("b", day(2, 1), PointComplete, false),
			pt("c", day(3, 1), PointFailed, false), pt("d", day(4, 1), PointPartial, false),
		}, []string{"a", "b"}, map[string]string{"c": "failed point never counts", "d": "partial point never counts", "b": "newest good point"}},
		{"daily keeps newest of each day", Retention{Daily: 2}, []Point{
			pt("a", day(1, 1), PointComplete, false), pt("b", day(1, 5), PointComplete, false),
			pt("c", day(2, 1), PointComplete, false), pt("d", day(2, 9), PointComplete, false),
		}, []string{"b", "d"}, map[string]string{"b": "daily 2026-01-01", "d": "daily 2026-01-02"}},
		{"locked kept even if failed", Retention{Last: 1}, []Point{
			pt("a", day(1, 1), PointFailed, true), pt("b", day(2, 1), PointComplete, false), pt("c", day(3, 1), PointComplete, false),
		}, []string{"a", "c"}, map[string]string{"a": "locked"}},
		{"newest good kept when only yearly wants an older one", Retention{Yearly: 1}, []Point{
			pt("a", day(1, 1), PointComplete, false), pt("b", day(5, 1), PointComplete, false), pt("c", day(6, 1), PointFailed, false),
		}, []string{"b"}, map[string]string{"b": "yearly 2026"}},
		{"weekly uses ISO weeks", Retention{Weekly: 2}, []Point{
			pt("sun", day(4, 1), PointComplete, false), pt("mon", day(5, 1), PointComplete, false), pt("tue", day(6, 1), PointComplete, false),
		}, []string{"sun", "tue"}, map[string]string{"sun": "weekly 2026-W01", "tue": "weekly 2026-W02"}},
		{"groups are independent", Retention{Last: 1}, []Point{
			pt("a", day(1, 1), PointComplete, false), pt("b", day(2, 1), PointComplete, false),
			{ID: "x", Repository: "r", VM: "other", Time: day(1, 1), Status: PointComplete},
			{ID: "y", Repository: "r2", VM: "vm", Time: day(1, 1), Status: PointComplete},
		}, []string{"b", "x", "y"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := tc.r.DryRun(tc.points, time.UTC)
			checkRetentionInvariants(t, tc.r, tc.points, plan)
			var kept []string
			for _, d := range plan.Decisions {
				if d.Keep {
					kept = append(kept, d.Point.ID)
				}
				if want, ok := tc.reason[d.Point.ID]; ok && !slices.Contains(d.Reasons, want) {
					t.Errorf("%s reasons %v, want %q", d.Point.ID, d.Reasons, want)
				}
			}
			slices.Sort(kept)
			if !slices.Equal(kept, tc.keep) {
				t.Errorf("kept %v, want %v", kept, tc.keep)
			}
			if int64(plan.Remove*10) != plan.BytesFreed || len(plan.Removals()) != plan.Remove {
				t.Errorf("remove %d, freed %d, removals %d", plan.Remove, plan.BytesFreed, len(plan.Removals()))
			}
		})
	}
}

func TestRetentionValidate(t *testing.T) {
	if err := (Retention{}).Validate(); !errors.Is(err, ErrKeepsNothing) || !errors.Is(err, ErrInvalid) {
		t.Errorf("empty retention: %v", err)
	}
	var ve *ValidationError
	if err := (Retention{Last: 1, Weekly: -1}).Validate(); !errors.As(err, &ve) || ve.Field != "retention.weekly" {
		t.Errorf("negative weekly: %v", err)
	}
	if err := (Retention{Preset: "lots", Last: 1}).Validate(); !errors.Is(err, ErrUnknownPreset) {
		t.Errorf("unknown preset: %v", err)
	}
	if _, err := Preset("lots"); !errors.Is(err, ErrUnknownPreset) {
		t.Errorf("Preset(lots): %v", err)
	}
	for _, n := range PresetNames() {
		r, err := Preset(n)
		if err != nil || r.Validate() != nil {
			t.Errorf("preset %s: %v %v", n, err, r.Validate())
		}
	}
}
