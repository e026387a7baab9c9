package repos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web/api"
)

// Statistics (a walk of every point) are computed once for concurrent
// readers, again as soon as the points change, and again after the TTL.
func TestStatsCached(t *testing.T) {
	f := newFixture(t, WithStatsTTL(time.Minute))
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.set.Repository(ctx, "main"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, err := f.set.Repository(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if n := f.set.StatsLoads(); n != 1 {
		t.Fatalf("statistics computed %d times for unchanged points", n)
	}
	commitPoint(t, f.repo, testVM, "nightly", time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC))
	ri, err := f.set.Repository(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if n := f.set.StatsLoads(); n != 2 || ri.Stats.Points != len(f.points)+1 || ri.Points != ri.Stats.Points {
		t.Fatalf("after a new point: %d computations, %+v", n, ri)
	}
	f.clk.Advance(59 * time.Second)
	f.set.Repository(ctx, "main")
	if n := f.set.StatsLoads(); n != 2 {
		t.Fatalf("within the TTL: %d computations", n)
	}
	f.clk.Advance(time.Second)
	f.set.Repository(ctx, "main")
	if n := f.set.StatsLoads(); n != 3 {
		t.Fatalf("after the TTL: %d computations", n)
	}
}

// The API's copy of the statistics and of a check finding say exactly what
// the repository's own types say: web serves api's, the task result and
// older clients have the repository's.
func TestViewsMatchRepository(t *testing.T) {
	f := newFixture(t)
	st, err := f.repo.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(st)
	got, _ := json.Marshal(StatsView(st))
	if string(got) != string(want) {
		t.Fatalf("stats view\n got %s\nwant %s", got, want)
	}
	rep := &repository.CheckReport{Problems: []repository.Problem{
		{Kind: repository.ProblemCorruptBlob, Pack: "p1", Blob: "b1", Message: "checksum mismatch", Points: []string{"aa", "bb"}},
		{Kind: repository.ProblemMissingPack, Message: "pack gone"},
	}}
	b, _ := json.Marshal(rep)
	var view api.CheckReport
	if err := json.Unmarshal(b, &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Problems) != len(rep.Problems) {
		t.Fatalf("problems %v", view.Problems)
	}
	for i, p := range rep.Problems {
		if view.Problems[i].String() != p.String() {
			t.Errorf("finding %d: %q, repository says %q", i, view.Problems[i].String(), p.String())
		}
	}
}

// kind marks each repository sentinel with web's kind, keeps the sentinel
// and the message, and leaves other errors alone.
func TestErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		sentinel, want error
	}{
		{repository.ErrNotFound, api.ErrNotFound},
		{repository.ErrAmbiguous, api.ErrAmbiguous},
		{repository.ErrPointLocked, api.ErrPointLocked},
		{repository.ErrBusy, api.ErrBusy},
		{repository.ErrLocked, api.ErrBusy},
	} {
		err := kind(fmt.Errorf("point ab12: %w", tc.sentinel))
		if !errors.Is(err, tc.want) || !errors.Is(err, tc.sentinel) || err.Error() != "point ab12: "+tc.sentinel.Error() {
			t.Errorf("%v: got %v (is kind %v, is sentinel %v)", tc.sentinel, err, errors.Is(err, tc.want), errors.Is(err, tc.sentinel))
		}
	}
	other := errors.New("disk on fire")
	if kind(other) != other || kind(nil) != nil {
		t.Fatal("kind changed an error it does not know")
	}
}

// Through the set: unknown points and repositories, a locked point.
func TestSetErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.set.Point(ctx, "0123456789abcdef"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown point: %v", err)
	}
	if _, err := f.set.Repository(ctx, "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown repository: %v", err)
	}
	if _, err := f.set.Points(ctx, api.PointFilter{Repository: "nope"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("points of an unknown repository: %v", err)
	}
	id := f.points[0].ID
	if err := f.set.SetLocked(ctx, id[:12], true); err != nil {
		t.Fatal(err)
	}
	err := f.set.Delete(ctx, id)
	if !errors.Is(err, api.ErrPointLocked) || !errors.Is(err, repository.ErrPointLocked) {
		t.Fatalf("delete a locked point: %v", err)
	}
	p, err := f.set.Point(ctx, id[:12])
	if err != nil || !p.Locked || p.ID != id || p.Job != "nightly" || p.VM.InstanceUUID != testVM.InstanceUUID || len(p.Disks) != 1 {
		t.Fatalf("point %+v: %v", p, err)
	}
	pts, err := f.set.Points(ctx, api.PointFilter{Job: "nightly"})
	if err != nil || len(pts) != 2 || !pts[0].Time.After(pts[1].Time) {
		t.Fatalf("nightly points, newest first: %+v %v", pts, err)
	}
}

// While the walk over changed points runs longer than the stale wait, and
// the previous walk was slow, callers get the previous statistics marked
// stale; once the walk ends they get the new ones.
func TestStatsServedStaleWhileWalkRuns(t *testing.T) {
	for _, tc := range []struct {
		name          string
		after, wait   time.Duration
		wantStaleNext bool
	}{
		{"slow walks: stale", 0, time.Nanosecond, true},
		{"fast walks: wait", time.Hour, time.Nanosecond, false},
		{"walk ends in time: fresh", 0, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, WithStatsTTL(time.Minute), WithStaleStats(tc.after, tc.wait))
			ctx := context.Background()
			ri, err := f.set.Repository(ctx, "main")
			if err != nil || ri.Stats.Stale {
				t.Fatalf("first statistics: %+v, %v", ri.Stats, err)
			}
			commitPoint(t, f.repo, testVM, "nightly", time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC))
			ri, err = f.set.Repository(ctx, "main")
			if err != nil {
				t.Fatal(err)
			}
			if ri.Points != len(f.points)+1 {
				t.Fatalf("points %d: the count is always current", ri.Points)
			}
			if ri.Stats.Stale != tc.wantStaleNext {
				t.Fatalf("stale = %v, want %v (%+v)", ri.Stats.Stale, tc.wantStaleNext, ri.Stats)
			}
			if tc.wantStaleNext && ri.Stats.Points != len(f.points) {
				t.Fatalf("stale statistics count %d points, want the previous %d", ri.Stats.Points, len(f.points))
			}
			if err := f.set.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			ri, err = f.set.Repository(ctx, "main")
			if err != nil || ri.Stats.Stale || ri.Stats.Points != len(f.points)+1 {
				t.Fatalf("after the walk: %+v, %v", ri.Stats, err)
			}
		})
	}
}
