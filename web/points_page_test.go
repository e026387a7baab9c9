package web

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/policy"
)

// walkPages follows next from path (which has limit) and returns every
// item's id (or name) in order, checking total on each page.
func walkPages[T any](t *testing.T, f *fixture, path string, key func(T) string) (ids []string, total int) {
	t.Helper()
	next := ""
	for pages := 0; ; pages++ {
		p := path
		if next != "" {
			p += "&cursor=" + url.QueryEscape(next)
		}
		r := f.admin("GET", p, nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", p, r.status, r.body)
		}
		var pg struct {
			Items []T    `json:"items"`
			Next  string `json:"next"`
			Total int    `json:"total"`
		}
		r.json(t, &pg)
		if pages > 0 && pg.Total != total {
			t.Fatalf("total changed between pages: %d, then %d", total, pg.Total)
		}
		total = pg.Total
		for _, it := range pg.Items {
			ids = append(ids, key(it))
		}
		if pg.Next == "" {
			return ids, total
		}
		if len(pg.Items) == 0 || pages > 100 {
			t.Fatalf("GET %s: next with an empty page", p)
		}
		next = pg.Next
	}
}

func TestRestorePointsPages(t *testing.T) {
	pointID := func(p RestorePoint) string { return p.ID }
	for _, tc := range []struct {
		name string
		// noPager serves the same points through a Points service without
		// PointPager: pages are cut from the full list.
		noPager bool
	}{{"reposvc index", false}, {"cut from the list", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			if tc.noPager {
				all, err := f.srv.cfg.Points.Points(context.Background(), PointFilter{})
				if err != nil {
					t.Fatal(err)
				}
				f = newFixture(t, func(c *Config) { c.Points = &synthPoints{pts: all} })
			}
			for _, q := range []string{"", "vm=" + testVM.InstanceUUID, "q=old", "job=nightly", "from=2026-11-28T00:00:00Z", "vm=nobody"} {
				var whole []RestorePoint
				r := f.admin("GET", "/api/v1/restore-points?"+q, nil)
				r.json(t, &whole)
				if q == "" && len(whole) != 3 {
					t.Fatalf("%d points, want the fixture's 3", len(whole))
				}
				var want []string
				for _, p := range whole {
					want = append(want, p.ID)
				}
				for _, limit := range []int{1, 2, 100} {
					got, total := walkPages(t, f, fmt.Sprintf("/api/v1/restore-points?limit=%d&%s", limit, q), pointID)
					if strings.Join(got, ",") != strings.Join(want, ",") || total != len(want) {
						t.Fatalf("%q limit %d: pages %v (total %d), want %v", q, limit, got, total, want)
					}
				}
			}
		})
	}
}

func TestPagingParametersRefused(t *testing.T) {
	f := newFixture(t, nil)
	b64 := base64.RawURLEncoding.EncodeToString
	for _, path := range []string{
		"/api/v1/restore-points?limit=0",
		"/api/v1/restore-points?limit=1001",
		"/api/v1/restore-points?limit=ten",
		"/api/v1/restore-points?cursor=%25%25%25",
		"/api/v1/restore-points?cursor=" + b64([]byte("{}")),
		"/api/v1/restore-points?cursor=" + b64([]byte("o:1")),
		"/api/v1/restore-points?limit=5&cursor=" + strings.Repeat("A", 2000),
		"/api/v1/vms?limit=0",
		"/api/v1/vms?cursor=" + b64([]byte("o:-1")),
		"/api/v1/vms?cursor=" + b64([]byte("x:1")),
		"/api/v1/vms?status=happy",
		"/api/v1/vms?q=" + strings.Repeat("x", 300),
	} {
		r := f.admin("GET", path, nil)
		if r.status != 400 {
			t.Errorf("GET %s: %d %s, want 400", path, r.status, r.body)
			continue
		}
		if e := r.errBody(t); e.Details == nil {
			t.Errorf("GET %s: error names no field: %+v", path, e)
		}
	}
}

func TestVMsFilterAndPages(t *testing.T) {
	bare := policy.VM{InstanceUUID: "4210a1b2-0000-0000-0000-00000000beef", Name: "Bare-VM", MoRef: "vm-77"}
	f := newFixture(t, func(c *Config) { c.Inventory = policy.NewMemInventory(testVM, bare) })
	// A job covers web01; old01's points are ad hoc (no job, not in vCenter).
	if r := f.admin("POST", "/api/v1/jobs", validJob("nightly")); r.status != 201 {
		t.Fatal(r.status)
	}
	name := func(v VMStatus) string { return v.Name }
	for _, tc := range []struct {
		q    string
		want string
	}{
		{"", testVM.Name + ",Bare-VM,old01"},
		{"status=protected", testVM.Name},
		{"status=unprotected", "Bare-VM,old01"},
		{"status=missing", "old01"},
		{"q=bare", "Bare-VM"},
		{"q=4210A1B2", testVM.Name + ",Bare-VM"},
		{"q=bare&status=protected", ""},
	} {
		var whole []VMStatus
		r := f.admin("GET", "/api/v1/vms?"+tc.q, nil)
		if r.status != 200 {
			t.Fatalf("%q: %d %s", tc.q, r.status, r.body)
		}
		r.json(t, &whole)
		var got []string
		for _, v := range whole {
			got = append(got, v.Name)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("GET /vms?%s: %v, want %s", tc.q, got, tc.want)
		}
		for _, limit := range []int{1, 2, 10} {
			paged, total := walkPages(t, f, fmt.Sprintf("/api/v1/vms?limit=%d&%s", limit, tc.q), name)
			if strings.Join(paged, ",") != tc.want || total != len(got) {
				t.Errorf("GET /vms?%s limit %d: pages %v (total %d), want %s", tc.q, limit, paged, total, tc.want)
			}
		}
	}
}
