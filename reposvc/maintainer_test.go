package reposvc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web/api"
)

// The scheduler's maintenance over a real repository: retention's plan
// computed from Points removes the older nightly point, reclaim frees its
// bytes, checks come back clean; a locked point is refused.
func TestMaintainer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m := Maintainer{Set: f.set}
	j := policy.Job{ID: "nightly", Repository: "main", Retention: policy.Retention{Last: 1}}
	plan, err := policy.PlanRetention(ctx, m, j, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Keep != 1 || plan.Remove != 1 || plan.BytesFreed <= 0 || plan.Removals()[0].ID != f.points[0].ID {
		t.Fatalf("plan %+v", plan)
	}
	if err := f.repo.Lock(ctx, f.points[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := m.RemovePoints(ctx, "main", []string{f.points[0].ID}); !errors.Is(err, repository.ErrPointLocked) {
		t.Fatalf("remove locked: %v", err)
	}
	_ = f.repo.Unlock(ctx, f.points[0].ID)
	if err := m.RemovePoints(ctx, "main", []string{f.points[0].ID, f.points[0].ID}); err != nil {
		t.Fatal(err)
	}
	freed, err := m.Reclaim(ctx, "main")
	if err != nil || freed <= 0 {
		t.Fatalf("reclaim freed %d: %v", freed, err)
	}
	for _, full := range []bool{false, true} {
		res, err := m.Check(ctx, policy.CheckRequest{Repository: "main", Full: full}, func(policy.CheckProgress) {})
		if err != nil || res.Damaged != 0 {
			t.Fatalf("check full=%v: %+v %v", full, res, err)
		}
	}
	// The full check reports each pack as a cursor and resumes after one.
	var seen []policy.CheckProgress
	if _, err := m.Check(ctx, policy.CheckRequest{Repository: "main", Full: true}, func(p policy.CheckProgress) { seen = append(seen, p) }); err != nil || len(seen) == 0 {
		t.Fatalf("full check progress %v: %v", seen, err)
	}
	if last := seen[len(seen)-1]; last.Done != last.Total || last.Cursor == "" {
		t.Fatalf("last progress %+v", last)
	}
	mid := seen[(len(seen)-1)/2]
	var resumed []policy.CheckProgress
	if _, err := m.Check(ctx, policy.CheckRequest{Repository: "main", Full: true, Resume: mid.Cursor}, func(p policy.CheckProgress) { resumed = append(resumed, p) }); err != nil {
		t.Fatal(err)
	}
	if len(resumed) != len(seen)-int(mid.Done) || len(resumed) > 0 && resumed[0].Done != mid.Done+1 {
		t.Fatalf("resumed after %+v: %v (whole check %v)", mid, resumed, seen)
	}
	var again []policy.CheckProgress
	if _, err := m.Check(ctx, policy.CheckRequest{Repository: "main", Full: true, Resume: "garbage"}, func(p policy.CheckProgress) { again = append(again, p) }); err != nil || len(again) != len(seen) {
		t.Fatalf("a meaningless cursor restarts the check: %d packs of %d, %v", len(again), len(seen), err)
	}
	if _, err := m.Points(ctx, "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown repository: %v", err)
	}
}
