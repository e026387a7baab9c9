package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/repos/repostest"
)

// synthPoints is a catalog of restore points held in memory, for measuring
// the API's own cost at scale (the repository's listing is measured in
// repository's benchmarks).
type synthPoints struct{ pts []RestorePoint } // newest first

func (s *synthPoints) Points(ctx context.Context, f PointFilter) ([]RestorePoint, error) {
	var out []RestorePoint
	for _, p := range s.pts {
		switch {
		case f.VM != "" && p.VM.InstanceUUID != f.VM && p.VM.Name != f.VM,
			f.Job != "" && p.Job != f.Job,
			f.Repository != "" && p.Repository != f.Repository,
			!f.From.IsZero() && p.Time.Before(f.From),
			!f.To.IsZero() && !p.Time.Before(f.To):
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func (s *synthPoints) Point(ctx context.Context, id string) (RestorePoint, error) {
	for _, p := range s.pts {
		if p.ID == id {
			return p, nil
		}
	}
	return RestorePoint{}, ErrNotFound
}
func (s *synthPoints) SetLocked(context.Context, string, bool) error { return nil }
func (s *synthPoints) Delete(context.Context, string) error          { return nil }

// BenchmarkScaleAPI: GET /vms, GET /restore-points and GET /dashboard over
// real HTTP with 1,000 VMs in the inventory (20 folders, 10 tags), 30,000
// restore points (30 per VM) in a real repository served by service/repos (the
// daemon's path; its catalog at rest, as outside a backup window) and three
// jobs (by folder, by tag, and one listing every VM). Whole lists, pages of
// 100 (first and second), filtered and searched pages. Reports p50 and p99
// latency in ms and the response size. Seeding the repository takes
// 20-30 s before the first figure.
//
//	go test -run XXX -bench ScaleAPI -benchtime 40x ./web
func BenchmarkScaleAPI(b *testing.B) {
	const nVMs, perVM = 1000, 30
	var vms []policy.VM
	var ids []string
	for i := range nVMs {
		id := repostest.VMUUID(i)
		vm := policy.VM{InstanceUUID: id, Name: repostest.VMName(i), MoRef: fmt.Sprintf("vm-%d", 5000+i),
			Containers: []policy.ContainerRef{{Kind: policy.KindDatacenter, ID: "datacenter-1"}, {Kind: policy.KindFolder, ID: fmt.Sprintf("group-v%d", i%20)}},
			Tags:       []string{fmt.Sprintf("urn:tag:%d", i%10)}}
		vms = append(vms, vm)
		ids = append(ids, id)
	}
	repo := repository.TestRepository(b)
	if err := repostest.Seed(context.Background(), repo, repostest.Options{VMs: nVMs, PerVM: perVM, Newest: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}); err != nil {
		b.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // at rest: the index may trust the catalog's file time
	if err := os.Chtimes(filepath.Join(repo.Dir(), "index.db"), old, old); err != nil {
		b.Fatal(err)
	}
	rs := repos.New(map[string]*repository.Repository{"main": repo})
	f := newFixture(b, func(c *Config) {
		c.Inventory = policy.NewMemInventory(vms...)
		c.Points, c.Repositories = rs, rs
	})
	w := policy.Window{Location: time.UTC}
	for d := range w.Days {
		w.Days[d] = []policy.Range{{Start: 22 * 60, End: 6 * 60}}
	}
	for _, j := range []policy.Job{
		{ID: "by-folder", Name: "by folder", Enabled: true, Repository: "main", Window: w, Retention: policy.Retention{Last: 7},
			Selection: policy.Selection{Containers: []policy.ContainerRef{{Kind: policy.KindFolder, ID: "group-v3"}}}},
		{ID: "by-tag", Name: "by tag", Enabled: true, Repository: "main", Window: w, Retention: policy.Retention{Last: 7},
			Selection: policy.Selection{Tags: []string{"urn:tag:1"}}},
		{ID: "listed", Name: "every VM listed", Enabled: true, Repository: "main", Window: w, Retention: policy.Retention{Last: 7},
			Selection: policy.Selection{VMs: ids}},
	} {
		if err := f.db.PutJob(context.Background(), j); err != nil {
			b.Fatal(err)
		}
	}
	tok := "Bearer " + f.tokens[auth.RoleAdministrator]
	client := &http.Client{}
	get := func(path string) ([]byte, int, time.Duration) {
		req, _ := http.NewRequest("GET", f.http.URL+path, nil)
		req.Header.Set("Authorization", tok)
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return body, res.StatusCode, time.Since(start)
	}
	first, _, _ := get("/api/v1/restore-points?limit=100")
	var pg struct {
		Next string `json:"next"`
	}
	if err := json.Unmarshal(first, &pg); err != nil || pg.Next == "" {
		b.Fatalf("first page: %v, next %q", err, pg.Next)
	}
	from := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	for _, path := range []string{
		"/api/v1/vms",
		"/api/v1/vms?limit=100",
		"/api/v1/vms?limit=100&status=protected&q=vm-05",
		"/api/v1/restore-points",
		"/api/v1/restore-points?limit=100",
		"/api/v1/restore-points?limit=100&cursor=" + pg.Next,
		"/api/v1/restore-points?limit=100&q=vm-05",
		"/api/v1/restore-points?limit=100&job=nightly&from=" + from,
		"/api/v1/restore-points?vm=" + ids[500],
		"/api/v1/dashboard",
	} {
		b.Run(path, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			var size int
			for range b.N {
				body, st, d := get(path)
				if st != 200 {
					b.Fatalf("status %d: %s", st, body)
				}
				size = len(body)
				lat = append(lat, d)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(size)/1e6, "MB/resp")
		})
	}
}
