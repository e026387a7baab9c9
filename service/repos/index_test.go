package repos

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/repos/repostest"
	"github.com/vmvault/vmvault/web/api"
)

// twoRepos is a set of two real repositories, "a" (8 VMs × 5 points, job
// nightly) and "b" (3 VMs × 4 points, job weekly, at the same times as
// some of a's so that ties in time cross repositories).
func twoRepos(t *testing.T) (*Set, map[string]*repository.Repository) {
	t.Helper()
	ctx := context.Background()
	newest := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	a, b := repository.TestRepository(t), repository.TestRepository(t)
	if err := repostest.Seed(ctx, a, repostest.Options{VMs: 8, PerVM: 5, Newest: newest}); err != nil {
		t.Fatal(err)
	}
	if err := repostest.Seed(ctx, b, repostest.Options{VMs: 3, PerVM: 4, Newest: newest, Job: "weekly"}); err != nil {
		t.Fatal(err)
	}
	repos := map[string]*repository.Repository{"a": a, "b": b}
	return New(repos), repos
}

// reference is the list GET /restore-points answered before the index:
// every point of every repository, filtered, sorted newest first.
func reference(t *testing.T, repos map[string]*repository.Repository, q api.PointQuery) []api.RestorePoint {
	t.Helper()
	var out []api.RestorePoint
	for name, r := range repos {
		pts, err := r.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pts {
			v := PointView(name, p)
			if q.PointFilter.Keep(v) && (q.Search == "" || api.PointMatches(v, q.Search)) {
				out = append(out, v)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return api.PointLess(out[i].Key(), out[j].Key()) })
	return out
}

func ids(pts []api.RestorePoint) string {
	var b strings.Builder
	for _, p := range pts {
		b.WriteString(p.Repository + "/" + p.ID[:8] + " ")
	}
	return b.String()
}

func TestPointsPagesWalkTheFilteredListInOrder(t *testing.T) {
	set, repos := twoRepos(t)
	ctx := context.Background()
	newest := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		q    api.PointQuery
	}{
		{"all", api.PointQuery{}},
		{"vm by uuid", api.PointQuery{PointFilter: api.PointFilter{VM: repostest.VMUUID(1)}}},
		{"vm by name", api.PointQuery{PointFilter: api.PointFilter{VM: repostest.VMName(2)}}},
		{"repository", api.PointQuery{PointFilter: api.PointFilter{Repository: "b"}}},
		{"job", api.PointQuery{PointFilter: api.PointFilter{Job: "nightly"}}},
		{"time range", api.PointQuery{PointFilter: api.PointFilter{From: newest.Add(-3 * 24 * time.Hour), To: newest.Add(-24*time.Hour + time.Second)}}},
		{"search", api.PointQuery{Search: "vm-000"}},
		{"vm and range", api.PointQuery{PointFilter: api.PointFilter{VM: repostest.VMUUID(0), From: newest.Add(-2 * 24 * time.Hour)}}},
		{"nothing", api.PointQuery{PointFilter: api.PointFilter{VM: "no-such-vm"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := reference(t, repos, tc.q)
			if tc.name != "nothing" && len(want) == 0 {
				t.Fatal("the reference keeps no point: the case tests nothing")
			}
			for _, limit := range []int{1, 7, 1000} {
				q := tc.q
				q.Limit = limit
				var got []api.RestorePoint
				for pages := 0; ; pages++ {
					pg, err := set.PointsPage(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					if pg.Total != len(want) {
						t.Fatalf("limit %d: total %d, want %d", limit, pg.Total, len(want))
					}
					if len(pg.Items) > limit {
						t.Fatalf("limit %d: page of %d", limit, len(pg.Items))
					}
					got = append(got, pg.Items...)
					if !pg.More {
						break
					}
					if len(pg.Items) == 0 || pages > len(want) {
						t.Fatalf("limit %d: More with an empty page or too many pages", limit)
					}
					k := pg.Items[len(pg.Items)-1].Key()
					q.After = &k
				}
				if ids(got) != ids(want) {
					t.Fatalf("limit %d:\n got %s\nwant %s", limit, ids(got), ids(want))
				}
			}
			all, err := set.Points(ctx, tc.q.PointFilter)
			if err != nil {
				t.Fatal(err)
			}
			if tc.q.Search == "" && ids(all) != ids(want) {
				t.Fatalf("Points:\n got %s\nwant %s", ids(all), ids(want))
			}
		})
	}
}

func TestPointsPageUnknownRepository(t *testing.T) {
	set, _ := twoRepos(t)
	if _, err := set.PointsPage(context.Background(), api.PointQuery{PointFilter: api.PointFilter{Repository: "nope"}, Limit: 10}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v, want not found naming the repository", err)
	}
}

// ageCatalog makes r's catalog look written an hour ago, so that the index
// may trust its file time.
func ageCatalog(t *testing.T, r *repository.Repository) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(r.Dir(), "index.db"), old, old); err != nil {
		t.Fatal(err)
	}
}

func TestPointIndexIsBuiltOncePerChangeAndSeesEveryChange(t *testing.T) {
	set, repos := twoRepos(t)
	ctx := context.Background()
	total := func() int {
		t.Helper()
		pg, err := set.PointsPage(ctx, api.PointQuery{Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		return pg.Total
	}
	n := total()
	if n != 8*5+3*4 {
		t.Fatalf("total %d", n)
	}
	// A point committed by someone else (a backup) right after a query is
	// seen by the next: the catalog was just written, so its file time is
	// not trusted.
	commitPoint(t, repos["a"], testVM, "nightly", time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC))
	if got := total(); got != n+1 {
		t.Fatalf("after a commit: total %d, want %d", got, n+1)
	}
	// Catalogs at rest: one more listing each to trust them, then none.
	ageCatalog(t, repos["a"])
	ageCatalog(t, repos["b"])
	total()
	b0, l0 := set.IndexStats()
	for range 5 {
		total()
	}
	if b, l := set.IndexStats(); b != b0 || l != l0 {
		t.Fatalf("5 queries of unchanged repositories: builds %d→%d, lists %d→%d; want none", b0, b, l0, l)
	}
	// A commit after that changes the catalog file: seen at once.
	commitPoint(t, repos["b"], policy.VM{InstanceUUID: "new-vm", Name: "new01"}, "weekly", time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	pg, err := set.PointsPage(ctx, api.PointQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if pg.Total != n+2 || pg.Items[0].VM.Name != "new01" {
		t.Fatalf("after a second commit: total %d, newest %q", pg.Total, pg.Items[0].VM.Name)
	}
	// Locking through the set shows in the next page even with an aged
	// catalog (the set forgets what it changed).
	ageCatalog(t, repos["b"])
	total()
	if err := set.SetLocked(ctx, pg.Items[0].ID, true); err != nil {
		t.Fatal(err)
	}
	ageCatalog(t, repos["b"])
	pg, err = set.PointsPage(ctx, api.PointQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !pg.Items[0].Locked {
		t.Fatal("a point locked through the set shows unlocked")
	}
}

func TestVMPointsSummary(t *testing.T) {
	set, _ := twoRepos(t)
	vms, err := set.VMPoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != 8 { // b's 3 VMs are a's first 3
		t.Fatalf("%d VMs, want 8", len(vms))
	}
	for _, v := range vms {
		want := 5
		if v.VM.InstanceUUID <= repostest.VMUUID(2) {
			want = 9
		}
		if v.Points != want || v.Last == nil || v.Last.VM.InstanceUUID != v.VM.InstanceUUID {
			t.Fatalf("%s: %d points (want %d), last %+v", v.VM.Name, v.Points, want, v.Last)
		}
	}
	if vms[0].VM.InstanceUUID != repostest.VMUUID(0) {
		t.Fatalf("first VM %s, want the one with the newest point", vms[0].VM.Name)
	}
}
