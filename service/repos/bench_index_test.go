package repos

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/repos/repostest"
	"github.com/vmvault/vmvault/web/api"
)

// BenchmarkPointIndex: one real repository of 1,000 VMs × 30 points
// (repostest.Seed, reported as seed-s), then the index's cost: the first
// build (List, convert, sort, merge: build-ms), and per query with the
// catalog at rest: a page of 100, the next page, one VM's points, a search
// and the whole list (p50/p99 in µs).
//
//	go test -run XXX -bench PointIndex -benchtime 200x ./service/repos
func BenchmarkPointIndex(b *testing.B) {
	ctx := context.Background()
	r := repository.TestRepository(b)
	start := time.Now()
	o := repostest.Options{VMs: 1000, PerVM: 30, Newest: time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)}
	if err := repostest.Seed(ctx, r, o); err != nil {
		b.Fatal(err)
	}
	seed := time.Since(start)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(r.Dir(), "index.db"), old, old); err != nil {
		b.Fatal(err)
	}
	set := New(map[string]*repository.Repository{"main": r})
	start = time.Now()
	first, err := set.PointsPage(ctx, api.PointQuery{Limit: 100})
	if err != nil {
		b.Fatal(err)
	}
	build := time.Since(start)
	if first.Total != 30000 {
		b.Fatalf("total %d", first.Total)
	}
	after := first.Items[99].Key()
	for _, tc := range []struct {
		name string
		q    api.PointQuery
	}{
		{"page", api.PointQuery{Limit: 100}},
		{"next-page", api.PointQuery{Limit: 100, After: &after}},
		{"vm", api.PointQuery{Limit: 100, PointFilter: api.PointFilter{VM: repostest.VMUUID(500)}}},
		{"search", api.PointQuery{Limit: 100, Search: "vm-05"}},
		{"whole", api.PointQuery{Limit: 30000}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				t0 := time.Now()
				if _, err := set.PointsPage(ctx, tc.q); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Nanoseconds())/1e3, "p99-µs")
			b.ReportMetric(seed.Seconds(), "seed-s")
			b.ReportMetric(float64(build.Milliseconds()), "build-ms")
		})
	}
	if builds, lists := set.IndexStats(); builds != 1 || lists != 1 {
		b.Fatalf("the index was built %d times from %d listings over an unchanged catalog, want once", builds, lists)
	}
}
