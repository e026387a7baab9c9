package console

// Helpers of the jobs, job wizard, restore, restore points and repositories
// page tests (pages2_*_test.go). The session, the demo appliance and apiJS
// come from main_test.go and helpers_test.go.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// p2API calls the REST API from the signed-in page and decodes the answer's
// body into out (nil: ignore it). It returns the HTTP status.
func p2API(t *testing.T, b *browsertest.Browser, method, path string, body any, out any) int {
	t.Helper()
	js := ""
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("encode %s %s body: %v", method, path, err)
		}
		js = fmt.Sprintf("JSON.stringify(%s)", j)
	}
	res := browsertest.Eval[apiAnswer[json.RawMessage]](b, apiJS(method, path, js))
	if out != nil && res.Status < 300 && len(res.Body) > 0 && string(res.Body) != "null" {
		if err := json.Unmarshal(res.Body, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, res.Body, err)
		}
	}
	return res.Status
}

// p2Center returns the centre of the first element matching sel in
// viewport pixels, after scrolling it into view.
func p2Center(t *testing.T, b *browsertest.Browser, sel string) (x, y float64) {
	t.Helper()
	p := browsertest.Eval[[]float64](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return [];
		e.scrollIntoView({block: "center", inline: "center"}); const r = e.getBoundingClientRect();
		return [r.left + r.width / 2, r.top + r.height / 2]; })()`, sel))
	if len(p) != 2 {
		t.Fatalf("no element %s at %s", sel, b.URL())
	}
	return p[0], p[1]
}

// p2Drag presses the left mouse button on from, moves across to to and
// releases there: a user painting the window grid.
func p2Drag(t *testing.T, b *browsertest.Browser, from, to string) {
	t.Helper()
	x0, y0 := p2Center(t, b, from)
	x1, y1 := p2Center(t, b, to)
	acts := []chromedp.Action[chromedp.Void]{
		chromedp.MouseEvent(chromedp.MouseMoved, x0, y0),
		chromedp.MouseEvent(chromedp.MousePressed, x0, y0, chromedp.ButtonLeft, chromedp.ClickCount(1)),
	}
	const steps = 8
	for i := 1; i <= steps; i++ {
		x := x0 + (x1-x0)*float64(i)/steps
		y := y0 + (y1-y0)*float64(i)/steps
		acts = append(acts, chromedp.MouseEvent(chromedp.MouseMoved, x, y, chromedp.ButtonLeft))
	}
	acts = append(acts, chromedp.MouseEvent(chromedp.MouseReleased, x1, y1, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	b.Do("drag "+from+" to "+to, acts...)
}

// p2Key sends one key, with Shift when shift is set, to the focused element.
func p2Key(b *browsertest.Browser, key string, shift bool) {
	var opts []chromedp.KeyOption
	if shift {
		opts = append(opts, chromedp.KeyModifiers(chromedp.ModifierShift))
	}
	b.Do("key "+key, chromedp.KeyEvent(key, opts...))
}

// p2Cell selects the window grid cell of day (0 = Monday) and hour.
func p2Cell(day, hour int) string {
	return fmt.Sprintf(`#window-grid td[data-day="%d"][data-hour="%d"]`, day, hour)
}

// p2Unique makes a name unique per run (the suite may run twice against
// one appliance while iterating with VMVAULT_APPLIANCE_BIN).
func p2Unique(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000)
}

// p2WaitJS is WaitJS with a timeout for backups, restores and checks.
func p2WaitJS(b *browsertest.Browser, d time.Duration, expr, what string) {
	old := b.Timeout
	b.Timeout = d
	defer func() { b.Timeout = old }()
	b.WaitJS(expr, what)
}

// p2Value reads the value of the input matching sel.
func p2Value(b *browsertest.Browser, sel string) string {
	return browsertest.Eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {value: ""}).value`, sel))
}

// p2Attr reads an attribute of the first element matching sel ("" if none).
func p2Attr(b *browsertest.Browser, sel, attr string) string {
	return browsertest.Eval[string](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? (e.getAttribute(%q) || "") : ""; })()`, sel, attr))
}

// p2Progress is the expression "the progress element sel reached 100% and
// succeeded" (the shell's progress bars and the job run bar keep
// data-percent and data-state current).
func p2Progress(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.dataset.percent === "100" && e.dataset.state === "succeeded"; })()`, sel)
}

// p2TabTo presses Tab until the focused element matches sel (at most 60
// times): the control is reachable from the keyboard, in tab order.
func p2TabTo(t *testing.T, b *browsertest.Browser, sel string) {
	t.Helper()
	for range 60 {
		if browsertest.Eval[bool](b, fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%q)`, sel)) {
			return
		}
		b.Keys(kb.Tab)
	}
	t.Fatalf("%s not reached with Tab (focus on %s)", sel, b.Focused())
}

// p2NoJunk fails when the page shows a JavaScript value that leaked into
// its text ("null", "undefined", "NaN", "[object Object]").
func p2NoJunk(t *testing.T, b *browsertest.Browser, where string) {
	t.Helper()
	if junk := browsertest.Eval[string](b, `((document.querySelector("main").innerText.match(/\b(null|undefined|NaN)\b|\[object Object\]/) || [""])[0])`); junk != "" {
		t.Errorf("%s: the page shows %q", where, junk)
	}
}

// p2DemoJobAndRepo returns the id of the demo's first job and the name of
// its first repository.
func p2DemoJobAndRepo(t *testing.T, b *browsertest.Browser) (job, repo string) {
	t.Helper()
	var jobs []struct {
		ID string `json:"id"`
	}
	var repos []struct {
		Name string `json:"name"`
	}
	if st := p2API(t, b, "GET", "/jobs", nil, &jobs); st != 200 || len(jobs) == 0 {
		t.Fatalf("GET /jobs: %d, %d jobs", st, len(jobs))
	}
	if st := p2API(t, b, "GET", "/repositories", nil, &repos); st != 200 || len(repos) == 0 {
		t.Fatalf("GET /repositories: %d, %d repositories", st, len(repos))
	}
	return jobs[0].ID, repos[0].Name
}

// p2WaitTask waits (up to two minutes) until the task ends, and fails the
// test unless it succeeded.
func p2WaitTask(t *testing.T, b *browsertest.Browser, id string) {
	t.Helper()
	var task struct {
		State string `json:"state"`
		Error string `json:"error"`
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st := p2API(t, b, "GET", "/tasks/"+id, nil, &task); st != 200 {
			t.Fatalf("GET /tasks/%s: %d", id, st)
		}
		switch task.State {
		case "succeeded":
			return
		case "failed", "cancelled":
			t.Fatalf("task %s %s: %s", id, task.State, task.Error)
		}
	}
	t.Fatalf("task %s still %s after two minutes", id, task.State)
}

// p2VMUUID returns the instance UUID of the demo's VM named name.
func p2VMUUID(t *testing.T, b *browsertest.Browser, name string) string {
	t.Helper()
	var vms []struct {
		InstanceUUID string `json:"instanceUuid"`
		Name         string `json:"name"`
	}
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	for _, v := range vms {
		if v.Name == name {
			return v.InstanceUUID
		}
	}
	t.Fatalf("no VM %s in GET /vms", name)
	return ""
}

// shownJS is true when the element with id takes space on the page (the
// hidden attribute alone is not enough: a CSS display rule overrides it).
func shownJS(id string) string {
	return `(() => { const e = document.getElementById("` + id + `"); if (!e) return false;
		const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden"; })()`
}

// liveVM and the helpers below drive the demo as the scheduler does: list
// its VMs, back one up, wait for a task, a window that opens now.
type liveVM struct {
	InstanceUUID string   `json:"instanceUuid"`
	Name         string   `json:"name"`
	InInventory  bool     `json:"inInventory"`
	Tags         []string `json:"tags"`
}

func liveVMs(t *testing.T, b *browsertest.Browser) map[string]liveVM {
	t.Helper()
	var vms []liveVM
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	out := map[string]liveVM{}
	for _, v := range vms {
		if v.InInventory {
			out[v.Name] = v
		}
	}
	return out
}

// liveWaitTask waits for an API task to succeed and returns its result.
func liveWaitTask(t *testing.T, b *browsertest.Browser, id, what string) any {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var tk struct {
			State  string `json:"state"`
			Error  string `json:"error"`
			Result any    `json:"result"`
		}
		if st := p2API(t, b, "GET", "/tasks/"+id, nil, &tk); st != 200 {
			t.Fatalf("GET /tasks/%s: %d", id, st)
		}
		switch tk.State {
		case "succeeded":
			return tk.Result
		case "failed", "cancelled":
			t.Fatalf("%s: task %s %s: %s", what, id, tk.State, tk.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: task %s still %s", what, id, tk.State)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// liveBackup backs a VM up through POST /backups and returns its newest point.
func liveBackup(t *testing.T, b *browsertest.Browser, uuid string) string {
	t.Helper()
	var tk struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "POST", "/backups", map[string]any{"vms": []string{uuid}}, &tk); st != 202 {
		t.Fatalf("POST /backups %s: %d", uuid, st)
	}
	liveWaitTask(t, b, tk.ID, "backup of "+uuid)
	var pts []struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "GET", "/restore-points?vm="+uuid, nil, &pts); st != 200 || len(pts) == 0 {
		t.Fatalf("restore points of %s after its backup: %d, %d points", uuid, st, len(pts))
	}
	return pts[0].ID // newest first
}

// liveWindow is a window three days ahead: no scheduled window opens while
// the suite runs, whatever the day.
func liveWindow() map[string]any {
	day := strings.ToLower(time.Now().UTC().Add(72 * time.Hour).Weekday().String())
	return map[string]any{"location": "UTC", "days": map[string]any{day: []string{"10:00-11:00"}}}
}
