package console

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vmvault/vmvault/internal/browsertest"
)

var shotName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// shot saves a full-page screenshot as $VMVAULT_SHOTS/<test>-<name>.png
// when that variable names a directory: pictures to look at by eye, kept
// apart from the failure screenshots browsertest replaces on every run.
func shot(t *testing.T, b *browsertest.Browser, name string) {
	t.Helper()
	dir := os.Getenv("VMVAULT_SHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.Ctx(), chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	file := filepath.Join(dir, shotName.ReplaceAllString(t.Name()+"-"+name, "_")+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
}

// settle lets the page load its data and draw its controls.
func settle(t *testing.T, b *browsertest.Browser, what string) {
	t.Helper()
	b.WaitJS(`!!document.getElementById("page-title") && !document.querySelector("main .loading")`, what)
	b.WaitJS(`new Promise(res => setTimeout(() => res(true), 400))`, "settle")
}

// TestLayoutEveryPage opens every page of the navigation and the pages it
// links to (a job, a repository, a VM, a folder in Restore files) at
// 1440x900 and at 400x800, with a job named "Web nightly" in the lists: no
// button or badge label wraps onto a second line (the jobs list squeezed
// Run now / Edit / Delete to one letter per line), no short word breaks
// across lines ("Web nightl|y"), no element with the hidden attribute is
// displayed ("Show 0 more" under every list, the events page's date
// fields) and the page does not scroll sideways. In the file browser the
// breadcrumbs read "/etc" on the page's background (the sidebar's nav rule
// gave them a white 13rem box, and hid them at 400 px).
func TestLayoutEveryPage(t *testing.T) {
	b := signedIn(t)
	job, repo := p2DemoJobAndRepo(t, b)
	web := p2VMUUID(t, b, "web-01")
	nightly := p2Unique("web-nightly")
	// Its window says much (four nights and evenings, three days
	// ahead at the earliest): the table's columns share the width.
	days := map[string]any{}
	for i := 3; i <= 6; i++ {
		days[strings.ToLower(time.Now().UTC().AddDate(0, 0, i).Weekday().String())] = []string{"01:00-02:30", "20:15-23:45"}
	}
	body := map[string]any{"id": nightly, "name": "Web nightly", "enabled": true, "repository": repo,
		"description": "Nightly backups of the web servers, kept for a week.",
		"selection":   map[string]any{"vms": []string{web}}, "window": map[string]any{"location": "Europe/Berlin", "days": days},
		"retention": map[string]any{"last": 7}}
	if st := p2API(t, b, "POST", "/jobs", body, nil); st != 201 && st != 200 {
		t.Fatalf("POST /jobs: %d", st)
	}
	t.Cleanup(func() { p2API(t, b, "DELETE", "/jobs/"+nightly, nil, nil) })
	// One run, so that its name stands in the events, tasks and dashboard tables.
	if st := p2API(t, b, "POST", "/jobs/"+nightly+"/run", nil, nil); st != 202 {
		t.Fatalf("POST /jobs/%s/run: %d", nightly, st)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		var runs []h11Run
		p2API(t, b, "GET", "/jobs/"+nightly+"/runs?limit=1", nil, &runs)
		if len(runs) == 1 && runs[0].State != "running" && runs[0].State != "pending" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run of %s did not end in 2 minutes: %+v", nightly, runs)
		}
	}
	point := liveNewestPoint(t, b, web)
	// Its point time-locked: the Lock column's badge "locked until DATE"
	// takes its width from the others (the Job column's "Web nightly").
	until := time.Now().AddDate(0, 0, 2).UTC().Truncate(time.Second).Format(time.RFC3339)
	if st := p2API(t, b, "POST", "/restore-points/"+point+"/lock", map[string]string{"until": until}, nil); st != 200 {
		t.Fatalf("time-lock %s: %d", point, st)
	}

	routes := browsertest.Eval[[]string](b, `[...document.querySelectorAll("#nav-list a")].map(a => a.getAttribute("href"))`)
	routes = append(routes, "#/jobs/"+job, "#/jobs/"+nightly, "#/repositories/"+repo, "#/vms/"+web)
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		b.Viewport(size.w, size.h)
		check := func(what string) {
			t.Helper()
			where := fmt.Sprintf("%s at %d px", what, size.w)
			shot(t, b, fmt.Sprintf("%d-%s", size.w, what))
			if p := b.LayoutProblems(); len(p) > 0 {
				t.Errorf("%s:\n  %s", where, strings.Join(p, "\n  "))
			}
			if over := browsertest.Eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); over > 1 {
				t.Errorf("%s: the page scrolls sideways by %d px", where, over)
			}
		}
		for _, r := range routes {
			b.Go(r)
			settle(t, b, r)
			if r == "#/restore-points" {
				b.WaitJS(`![...document.querySelectorAll("tr[data-point] td[data-label=Unique]")].some(td => td.textContent === "…")`, "the Unique column filled")
			}
			check(r)
		}

		b.Go("#/files?point=" + point + "&path=%2Fetc")
		b.WaitVisible(`a.files-get[data-path="/etc/hostname"]`)
		settle(t, b, "file browser")
		check("file browser /etc")
		crumbs := browsertest.Eval[struct {
			Path, Background, Border string
			Shown                    bool
		}](b, `(() => { const n = document.getElementById("files-crumbs"); const cs = getComputedStyle(n); const r = n.getBoundingClientRect();
			return {path: [...n.querySelectorAll("li")].map(li => { const c = getComputedStyle(li, "::before").content;
				return (c && c !== "none" ? c.replace(/"/g, "") : "") + li.textContent; }).join(""),
				background: cs.backgroundColor, border: cs.borderRightStyle + " " + cs.borderBottomStyle, shown: r.width > 0 && r.height > 0}; })()`)
		if crumbs.Path != "/etc" || !crumbs.Shown || crumbs.Background != "rgba(0, 0, 0, 0)" || crumbs.Border != "none none" {
			t.Errorf("file browser at %d px: breadcrumbs %+v, want \"/etc\" shown on the page's background without borders", size.w, crumbs)
		}
	}
	b.CheckConsole()
}

// liveNewestPoint is the id of the newest restore point of the VM with
// instance UUID uuid (the demo backs every sample VM up at its start).
func liveNewestPoint(t *testing.T, b *browsertest.Browser, uuid string) string {
	t.Helper()
	var pts []struct {
		ID      string `json:"id"`
		Partial bool   `json:"partial"`
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		if st := p2API(t, b, "GET", "/restore-points?vm="+uuid, nil, &pts); st != 200 {
			t.Fatalf("GET /restore-points?vm=%s: %d", uuid, st)
		}
		for _, p := range pts {
			if !p.Partial {
				return p.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no restore point of %s after two minutes", uuid)
		}
	}
}

// TestPointsUniqueColumn: the restore points page's Unique column shows
// each point's unique bytes from its repository's statistics (GET
// /repositories/{name} stats.perPoint), not "…" for ever.
func TestPointsUniqueColumn(t *testing.T) {
	b := signedIn(t)
	liveNewestPoint(t, b, p2VMUUID(t, b, "web-01"))
	b.Viewport(1440, 900)
	b.Go("#/restore-points")
	b.WaitVisible("tr[data-point] td[data-label=Unique]")
	b.WaitJS(`![...document.querySelectorAll("tr[data-point] td[data-label=Unique]")].some(td => td.textContent === "…")`, "the Unique column filled")
	bad := browsertest.Eval[[]string](b, `(async () => {
		const fmt = await import("/assets/lib/fmt.js");
		const repos = new Map();
		const out = [];
		for (const td of document.querySelectorAll("tr[data-point] td[data-label=Unique]")) {
			const id = td.closest("tr").dataset.point;
			const repo = td.closest("tr").querySelector("td[data-label=Repository]").textContent;
			if (!repos.has(repo)) {
				const r = await fetch("/api/v1/repositories/" + encodeURIComponent(repo));
				const d = await r.json();
				repos.set(repo, new Map(((d.stats && d.stats.perPoint) || []).map(p => [p.id, p.uniqueBytes])));
			}
			const want = repos.get(repo).get(id);
			if (want === undefined || td.textContent !== fmt.bytes(want)) out.push(id.slice(0, 12) + ": shows " + JSON.stringify(td.textContent) + ", statistics say " + want);
		}
		return out; })()`)
	if len(bad) > 0 {
		t.Errorf("Unique column:\n  %s", strings.Join(bad, "\n  "))
	}
	if n := b.Count("tr[data-point] td[data-label=Unique]"); n == 0 {
		t.Fatal("no Unique cells")
	}
	b.CheckConsole()
}

// TestOffsiteCardLines: with a copy job, the dashboard's offsite card puts
// "Not yet: …" on a line of its own under its label, not run on after
// "(< 24 h)".
func TestOffsiteCardLines(t *testing.T) {
	b := signedIn(t)
	_, repo := p2DemoJobAndRepo(t, b)
	spare := p2Unique("offsite")
	create := map[string]any{"mode": "create", "name": spare, "path": filepath.Join(t.TempDir(), spare), "passphrase": "offsite-passphrase-1"}
	if st := p2API(t, b, "POST", "/repositories", create, nil); st != 201 {
		t.Fatalf("create the offsite repository: %d", st)
	}
	t.Cleanup(func() { p2API(t, b, "DELETE", "/repositories/"+spare, nil, nil) })
	cj := p2Unique("offsite-copy")
	body := map[string]any{"id": cj, "name": "Offsite copy", "source": repo, "target": spare, "window": liveWindow(), "retention": map[string]any{"last": 7}}
	if st := p2API(t, b, "POST", "/copy-jobs", body, nil); st != 201 && st != 200 {
		t.Fatalf("POST /copy-jobs: %d", st)
	}
	// Before the repository: a repository a copy job uses is not removed.
	t.Cleanup(func() { p2API(t, b, "DELETE", "/copy-jobs/"+cj, nil, nil) })
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		b.Viewport(size.w, size.h)
		b.Go("#/dashboard")
		b.WaitVisible("#offsite-card #offsite-missing")
		shot(t, b, fmt.Sprintf("%d-dashboard", size.w))
		got := browsertest.Eval[struct {
			Text  string
			Apart bool
		}](b, `(() => { const c = document.getElementById("offsite-card"); const m = document.getElementById("offsite-missing");
			const labels = [...c.querySelectorAll(".label")].filter(l => l !== m);
			const last = labels[labels.length - 1].getBoundingClientRect();
			return {text: c.innerText, apart: m.getBoundingClientRect().top >= last.bottom - 1}; })()`)
		if !got.Apart || strings.Contains(got.Text, "h)Not") || !strings.Contains(got.Text, "Not yet: ") {
			t.Errorf("offsite card at %d px: %q (on a line of its own: %v)", size.w, got.Text, got.Apart)
		}
		if p := b.LayoutProblems(); len(p) > 0 {
			t.Errorf("dashboard at %d px:\n  %s", size.w, strings.Join(p, "\n  "))
		}
	}
	b.CheckConsole()
}

// TestUsageChartLabelsApart draws the repository usage chart of samples
// bunched in time (three backups a minute apart, one three days later:
// the middle sample sits next to the first) and of the demo's repository
// at 1440 and 400 px: no two axis labels overlap.
func TestUsageChartLabelsApart(t *testing.T) {
	b := signedIn(t)
	_, repo := p2DemoJobAndRepo(t, b)
	overlaps := `(() => { const svg = document.querySelector("svg.usage-chart"); const out = [];
		const ls = [...svg.querySelectorAll("text.chart-label")].map(e => ({t: e.textContent, r: e.getBoundingClientRect()}));
		for (let i = 0; i < ls.length; i++) for (let j = i + 1; j < ls.length; j++) {
			const a = ls[i].r, b = ls[j].r;
			if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) out.push(ls[i].t + " / " + ls[j].t);
		}
		return out; })()`
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		b.Viewport(size.w, size.h)
		b.Go("#/dashboard") // a new route: the page draws its own chart again
		pageTitle(t, b, "Dashboard")
		b.Go("#/repositories/" + repo)
		b.WaitVisible("svg.usage-chart")
		if o := browsertest.Eval[[]string](b, overlaps); len(o) > 0 {
			t.Errorf("%s's chart at %d px: labels overlap: %v", repo, size.w, o)
		}
		// The same page's chart, redrawn from bunched samples, each label a full date and time.
		n := browsertest.Eval[int](b, `(async () => {
			const C = await import("/assets/pages/repositories-chart.js");
			const fmt = await import("/assets/lib/fmt.js");
			const t0 = Date.parse("2026-12-01T21:00:00Z"), min = 60e3, day = 86400e3;
			const samples = [0, min, 2 * min, 3 * day].map((d, i) => ({time: new Date(t0 + d).toISOString(), points: i + 1, logicalBytes: (i + 1) * 64 << 20, storedBytes: (i + 1) * 17 << 20}));
			const svg = C.usageChart(samples, {fmtBytes: fmt.bytes, fmtDate: fmt.time});
			document.querySelector("svg.usage-chart").replaceWith(svg);
			return svg.querySelectorAll(".chart-xlabels text").length; })()`)
		shot(t, b, fmt.Sprintf("%d-chart", size.w))
		if o := browsertest.Eval[[]string](b, overlaps); len(o) > 0 || n < 2 {
			t.Errorf("bunched samples' chart at %d px: %d time labels, overlapping: %v", size.w, n, o)
		}
	}
	b.CheckConsole()
}
