package console

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/browsertest"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/repos/repostest"
)

// scaleEnv asks TestConsoleAtScale for the full size: 1,000 VMs
// and 30,000 restore points (seeding takes 20-40 s). Without it the test
// runs at 200 VMs and 2,000 points, in `make test`.
const scaleEnv = "VMVAULT_CONSOLE_SCALE"

// pageTiming is what a page's performance marks say about one visit, in
// ms: from the route change to the page drawn (total), from the page's
// start to its data arriving (data), and from the data to the page drawn
// (render).
type pageTiming struct {
	Total  float64 `json:"total"`
	Data   float64 `json:"data"`
	Render float64 `json:"render"`
}

// visit changes the console's route to route and returns the page's
// timing once it marked vmvault:<page>:ready.
func visit(t *testing.T, b *browsertest.Browser, route, page string) pageTiming {
	t.Helper()
	browsertest.Eval[bool](b, fmt.Sprintf(`(() => { performance.clearMarks(); window.__scaleT0 = performance.now(); location.hash = %q; return true; })()`, route))
	b.WaitJS(fmt.Sprintf(`performance.getEntriesByName("vmvault:%s:ready").length > 0`, page), page+" page ready")
	return browsertest.Eval[pageTiming](b, fmt.Sprintf(`(() => {
		const m = (n) => performance.getEntriesByName("vmvault:%s:" + n)[0].startTime;
		return { total: m("ready") - window.__scaleT0, data: m("data") - m("start"), render: m("ready") - m("data") };
	})()`, page))
}

// leave opens the tasks page, so that the next visit draws its page anew
// (setting the route a page already has draws nothing).
func leave(t *testing.T, b *browsertest.Browser) {
	t.Helper()
	browsertest.Eval[bool](b, `(() => { location.hash = "#/tasks"; return true; })()`)
	pageTitle(t, b, "Tasks")
}

// seedScaleDemo writes a demo state directory whose repository already
// holds vms × perVM synthetic points (real commits), as `appliance demo`
// would find it on a restart.
func seedScaleDemo(t *testing.T, state string, vms, perVM int) {
	t.Helper()
	ctx := context.Background()
	repoDir := filepath.Join(state, "repository")
	pass := "scale-" + fmt.Sprint(time.Now().UnixNano())
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "repository-passphrase"), []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := dedup.DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	if err := repository.Init(ctx, repoDir, []byte(pass), repository.InitOptions{KDF: repository.TestKDF,
		Chunker: repository.ChunkerConfig{Algorithm: p.Algorithm, Polynomial: p.Polynomial, MinSize: p.MinSize, AvgSize: p.AvgSize, MaxSize: p.MaxSize}}); err != nil {
		t.Fatal(err)
	}
	r, err := repository.Open(ctx, repoDir, []byte(pass), repository.OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := repostest.Seed(ctx, r, repostest.Options{VMs: vms, PerVM: perVM, Newest: time.Now().Add(-time.Hour).UTC().Truncate(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d VMs × %d points in %s", vms, perVM, time.Since(start).Round(time.Millisecond))
}

// TestConsoleAtScale: an appliance whose repository holds many VMs' restore
// points (200 VMs × 10 in make test; 1,000 × 30 with VMVAULT_CONSOLE_SCALE=1)
// opens the dashboard, the inventory and the restore points page each in
// under a second (the best of three visits, measured in the page; the data
// and the drawing are logged apart), shows the points a page at a time with
// "Show more", and filters on the server. Before paging the points page
// fetched and drew every point (30,000 rows).
func TestConsoleAtScale(t *testing.T) {
	vms, perVM := 200, 10
	if os.Getenv(scaleEnv) != "" {
		vms, perVM = 1000, 30
	}
	tmp := t.TempDir()
	state := filepath.Join(tmp, "state")
	seedScaleDemo(t, state, vms, perVM)
	d := &demoServer{}
	stop, err := startDemoAt(tmp, d, state, "--vms", "1", "--churn", "0")
	if err != nil {
		if d.log != nil {
			if b, rerr := os.ReadFile(d.log.Name()); rerr == nil {
				t.Logf("demo log:\n%s", tail(string(b), 4000))
			}
		}
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := d.login(); err != nil {
		t.Fatal(err)
	}
	b := browsertest.New(t, d.URL)
	b.Timeout = 60 * time.Second
	b.SetCookie("vmvault_session", d.session, true)
	b.SetCookie("vmvault_csrf", d.csrf, false)
	b.Go("/#/dashboard")
	b.WaitJS(`!document.getElementById("user").hidden && !!document.getElementById("page-title")`, "the signed-in console")

	// The API's own count of the points, to check the page against (the
	// demo's own backups add one now and then).
	apiTotal := func() int {
		t.Helper()
		var pg struct {
			Total int `json:"total"`
		}
		got := browsertest.Eval[apiAnswer[json.RawMessage]](b, apiJS("GET", "/restore-points?limit=1", ""))
		if got.Status != 200 || json.Unmarshal(got.Body, &pg) != nil || pg.Total < vms*perVM {
			t.Fatalf("GET /restore-points?limit=1: %d %s; want a total of at least %d", got.Status, got.Body, vms*perVM)
		}
		return pg.Total
	}
	total := apiTotal()

	for _, tc := range []struct{ route, page string }{
		{"#/dashboard", "dashboard"},
		{"#/inventory", "inventory"},
		{"#/restore-points", "points"},
	} {
		var runs []pageTiming
		for range 3 {
			leave(t, b)
			runs = append(runs, visit(t, b, tc.route, tc.page))
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].Total < runs[j].Total })
		t.Logf("%s at %d VMs, %d points: ready in %.0f / %.0f / %.0f ms (data %.0f ms, drawing %.0f ms for the best)",
			tc.route, vms, total, runs[0].Total, runs[1].Total, runs[2].Total, runs[0].Data, runs[0].Render)
		if runs[0].Total >= 1000 {
			t.Errorf("%s: ready in %.0f ms at best of 3, want under 1 s", tc.route, runs[0].Total)
		}
	}

	// The points page: one page of 100 rows of the total, then 100 more.
	rows := `document.querySelectorAll("#points-body tr[data-point]").length`
	for attempt := 0; ; attempt++ {
		before := apiTotal()
		leave(t, b)
		visit(t, b, "#/restore-points", "points")
		shown := -1
		fmt.Sscanf(b.Text("#points-count"), "%d restore points.", &shown)
		after := apiTotal()
		if shown == before || shown == after {
			break
		}
		if attempt == 3 {
			t.Fatalf("the points page counts %d points (%q), the API %d then %d", shown, b.Text("#points-count"), before, after)
		}
	}
	if n := b.Count("#points-body tr[data-point]"); n != 100 {
		t.Fatalf("the first page shows %d rows, want 100", n)
	}
	b.Click("#points-more")
	b.WaitJS(rows+` === 200`, "200 rows after Show more")
	// Filtered on the server: one VM's points, a search, a date range.
	vm := repostest.VMUUID(vms / 2)
	b.Select("#points-vm", vm)
	b.WaitJS(rowsAll(vm, perVM), fmt.Sprintf("the %d points of %s", perVM, repostest.VMName(vms/2)))
	if hint := b.Text("#points-body section.p2-vm-group p.hint"); !strings.Contains(hint, fmt.Sprintf("%d restore points", perVM)) {
		t.Errorf("group hint %q, want %d restore points", hint, perVM)
	}
	b.Select("#points-vm", "")
	b.Fill("#points-q", repostest.VMName(7))
	b.WaitText("#points-count", fmt.Sprintf("%d restore points match the filter.", perVM))
	b.Fill("#points-q", "scale-vm-00")
	want := min(vms, 100) * perVM // scale-vm-0000 … 0099
	b.WaitText("#points-count", fmt.Sprintf("%d restore points match the filter.", want))
	if n := b.Count("#points-body tr[data-point]"); n != min(want, 100) {
		t.Errorf("a search matching %d points shows %d rows, want a page of %d", want, n, min(want, 100))
	}

	// The inventory: every VM counted, a folder draws 100 VMs and more on
	// demand; the search finds one VM among them.
	leave(t, b)
	visit(t, b, "#/inventory", "inventory")
	drawn := `document.querySelectorAll("#inventory-tree li[data-vm]").length`
	n := browsertest.Eval[int](b, drawn)
	if n > 200 || n < 100 {
		t.Fatalf("the inventory draws %d VM rows of %d+ VMs, want at most 100 per folder", n, vms)
	}
	b.Click("button.inventory-more")
	b.WaitJS(fmt.Sprintf(`%s >= %d`, drawn, n+100), "100 more VMs drawn")
	b.Fill("#inventory-search", repostest.VMName(vms-1))
	b.WaitJS(drawn+` === 1`, "one VM found by name")
	b.CheckConsole()
}
