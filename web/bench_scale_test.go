package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
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

// BenchmarkScaleAPI: GET /vms and GET /restore-points over real HTTP with
// 1,000 VMs in the inventory (20 folders, 10 tags), 30,000 restore points
// (30 per VM) and three jobs (by folder, by tag, and one listing every VM).
// Reports p50 and p99 latency in ms and the response size.
//
//	go test -run XXX -bench ScaleAPI -benchtime 40x ./web
func BenchmarkScaleAPI(b *testing.B) {
	const nVMs, perVM = 1000, 30
	var vms []policy.VM
	var ids []string
	pts := &synthPoints{}
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for i := range nVMs {
		id := fmt.Sprintf("4210a1b2-0000-0000-0000-%012d", i)
		vm := policy.VM{InstanceUUID: id, Name: fmt.Sprintf("vm-%04d", i), MoRef: fmt.Sprintf("vm-%d", 100+i),
			Containers: []policy.ContainerRef{{Kind: policy.KindDatacenter, ID: "datacenter-1"}, {Kind: policy.KindFolder, ID: fmt.Sprintf("group-v%d", i%20)}},
			Tags:       []string{fmt.Sprintf("urn:tag:%d", i%10)}}
		vms = append(vms, vm)
		ids = append(ids, id)
	}
	for d := range perVM {
		for i, vm := range vms {
			pts.pts = append(pts.pts, RestorePoint{ID: fmt.Sprintf("p-%02d-%04d", d, i), Repository: "main", Job: "nightly",
				VM: VMRef{Name: vm.Name, InstanceUUID: vm.InstanceUUID, MoRef: vm.MoRef}, Time: t0.Add(-time.Duration(d)*24*time.Hour - time.Duration(i)*time.Second),
				Consistency: "crash", LogicalBytes: 40 << 30, Disks: []PointDisk{{Key: 2000, Label: "Hard disk 1", Capacity: 40 << 30}}})
		}
	}
	f := newFixture(b, func(c *Config) {
		c.Inventory = policy.NewMemInventory(vms...)
		c.Points = pts
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
	tok := "Bearer " + f.tokens[auth.RoleRestoreOnly]
	client := &http.Client{}
	for _, path := range []string{"/api/v1/vms", "/api/v1/restore-points", "/api/v1/restore-points?vm=" + ids[500]} {
		b.Run(path, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			var size int64
			for range b.N {
				req, _ := http.NewRequest("GET", f.http.URL+path, nil)
				req.Header.Set("Authorization", tok)
				start := time.Now()
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				size, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				lat = append(lat, time.Since(start))
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
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
