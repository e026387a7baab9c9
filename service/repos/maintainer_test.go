package repos

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

// A copy in the repository (a copy job's, tagged copy.source) keeps the
// job tag of the backup that made the original, but the backup job's
// retention never thins it: its copy job's retention does. Without this a
// backup job pointed at a copy target would remove the copies a copy job
// promised to keep.
func TestMaintainerLeavesCopiesToTheirCopyJob(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	src := repository.TestRepository(t)
	orig := commitPoint(t, src, testVM, "nightly", time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC))
	if _, err := repository.Copy(ctx, src, f.repo, repository.CopyOptions{Points: []string{orig.ID}}); err != nil {
		t.Fatal(err)
	}
	m := Maintainer{Set: f.set}
	pts, err := m.Points(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, p := range pts {
		if p.Time.Equal(orig.Time) {
			copies++
			if p.Job != "" {
				t.Fatalf("the copy counts as job %q's point", p.Job)
			}
		}
	}
	if copies != 1 {
		t.Fatalf("%d copies in the target, want 1", copies)
	}
	plan, err := policy.PlanRetention(ctx, m, policy.Job{ID: "nightly", Repository: "main", Retention: policy.Retention{Last: 1}}, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	// The job's own two points: the newer is kept, the older removed; the
	// newest point of all (the copy) is not the job's.
	if plan.Keep != 1 || plan.Remove != 1 || plan.Removals()[0].ID != f.points[0].ID {
		t.Fatalf("plan %+v", plan)
	}
}
