package console

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// Instant recovery in the console (issue 25): the demo serves the NFS
// export on a free loopback port and its lab's hosts mount it for real
// (daemon/demo, vcsim-tests/lab/nas.go), so these tests run the whole flow:
// export, mount, register, power on, Storage vMotion through NFS, stop.

// irSession is a session as GET /instant-recoveries answers it.
type irSession struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Error string `json:"error"`
	VM    struct {
		Name  string `json:"name"`
		MoRef string `json:"moref"`
	} `json:"vm"`
	SourceVM     string `json:"sourceVm"`
	Host         string `json:"host"`
	NFSDatastore string `json:"nfsDatastore"`
	Isolated     bool   `json:"isolated"`
	MigrateTo    string `json:"migrateTo"`
	OverlayLimit int64  `json:"overlayLimitBytes"`
}

// irSessions lists the sessions by VM name.
func irSessions(t *testing.T, b *browsertest.Browser) map[string]irSession {
	t.Helper()
	var list []irSession
	if st := p2API(t, b, "GET", "/instant-recoveries", nil, &list); st != 200 {
		t.Fatalf("GET /instant-recoveries: %d", st)
	}
	out := map[string]irSession{}
	for _, s := range list {
		out[s.VM.Name] = s
	}
	return out
}

// irWaitState waits until the session of the VM named name is in state.
func irWaitState(t *testing.T, b *browsertest.Browser, name, state string) irSession {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s, ok := irSessions(t, b)[name]
		if ok && s.State == state {
			return s
		}
		if ok && s.State == "failed" {
			t.Fatalf("session of %s failed: %s", name, s.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("session of %s: %+v (found %v), want state %s", name, s, ok, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// irStopLeftovers stops, at the end of a test, the sessions of these VMs
// that still run: a running session holds its point against retention.
func irStopLeftovers(t *testing.T, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		b := signedIn(t)
		for _, n := range names {
			if s, ok := irSessions(t, b)[n]; ok && s.State == "running" {
				p2API(t, b, "POST", "/instant-recoveries/"+s.ID+"/stop", nil, nil)
				irWaitState(t, b, n, "stopped")
			}
		}
	})
}

// irRecordPosts makes the page keep the bodies it POSTs to
// /instant-recoveries (window.irPosts).
const irRecordPosts = `(() => { if (window.irPosts) return true; window.irPosts = []; const f = window.fetch;
	window.fetch = (u, o) => { if (String(u).endsWith("/instant-recoveries") && o && o.method === "POST") window.irPosts.push(JSON.parse(o.body)); return f(u, o); };
	return true; })()`

// irFits fails on the layout problems auditOverflowJS finds and on a
// leaked JavaScript value.
func irFits(t *testing.T, b *browsertest.Browser, where string) {
	t.Helper()
	for _, p := range browsertest.Eval[[]string](b, auditOverflowJS) {
		t.Errorf("%s: %s", where, p)
	}
	p2NoJunk(t, b, where)
	if p := b.A11yProblems(); len(p) > 0 {
		t.Errorf("%s:\n  %s", where, strings.Join(p, "\n  "))
	}
}

// TestInstantRecoveryWizardAndPage starts an instant recovery through the
// restore wizard at 1440x900 (web-01, isolated by default since the
// original runs, on the standalone host) and at 400x800 (a VM with a NIC,
// its network mapped and connected, on a cluster's host): the request the
// page sent holds the choices, the task ends with the VM running from the
// NFS datastore, and the Instant recoveries page lists the session with its
// state, host, NFS datastore and overlay bar. At 1440 the session is
// migrated to production (the datastore asked in a dialog), at 400 stopped
// after a confirmation that says what is lost (Escape keeps it running).
func TestInstantRecoveryWizardAndPage(t *testing.T) {
	b := signedIn(t)
	_, web01Point := tablesWeb01(t, b)
	nicVM, ok := liveVMs(t, b)["DC0_H0_VM1"]
	if !ok {
		t.Fatal("the demo has no VM DC0_H0_VM1")
	}
	nicPoint := liveBackup(t, b, nicVM.InstanceUUID)
	cases := []struct {
		w, h          int64
		point, source string
		host          string
		isolated      bool
		end           string // "migrate" or "stop"
	}{
		{1440, 900, web01Point, "web-01", "/DC0/host/DC0_H0/DC0_H0", true, "migrate"},
		{400, 800, nicPoint, "DC0_H0_VM1", "/DC0/host/DC0_C0/DC0_C0_H1", false, "stop"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%dpx", tc.w), func(t *testing.T) {
			b := signedIn(t)
			b.Viewport(tc.w, tc.h)
			name := p2Unique("ir-" + strings.ToLower(tc.source))
			irStopLeftovers(t, name)

			b.Go("#/restore?point=" + tc.point)
			b.WaitVisible("#mode-instant")
			b.Click(`label[for="mode-instant"]`)
			b.Click("#restore-mode .p2-next")
			b.WaitVisible("#instant-host")
			if got := p2Value(b, "#restore-name"); got != tc.source+"-instant" {
				t.Errorf("default name %q, want %s-instant", got, tc.source)
			}
			// Operators choose; the original runs, so isolated is the default.
			if got := browsertest.Eval[[]bool](b, `["instant-isolated", "instant-poweron"].flatMap(id => { const e = document.getElementById(id); return [e.checked, e.disabled]; })`); fmt.Sprint(got) != "[true false true false]" {
				t.Errorf("isolated and power on (checked, disabled): %v, want both checked and enabled", got)
			}
			irFits(t, b, fmt.Sprintf("instant target step at %d px", tc.w))
			// The host is required: the demo has several.
			b.Fill("#restore-name", name)
			b.Click("#restore-target .p2-next")
			b.WaitText("#restore-target .field-error", "Choose the host")
			b.Select("#instant-host", tc.host)
			b.Select("#instant-ds", "LocalDS_0")
			mapped := ""
			if !tc.isolated {
				b.Click(`label[for="instant-isolated"]`)
				sel := `#restore-networks select[data-source]`
				b.WaitVisible(sel)
				same := p2Attr(b, sel, "data-same")
				for _, o := range browsertest.Eval[[]string](b, fmt.Sprintf(`[...document.querySelector(%q).options].map(o => o.value)`, sel)) {
					if o != "" && o != same && !strings.Contains(o, "Uplinks") {
						mapped = o
						break
					}
				}
				if mapped == "" {
					t.Fatalf("no network to map %s to", same)
				}
				b.Select(sel, mapped)
			}
			b.Click("#restore-target .p2-next")
			b.WaitText("#restore-choices", name)
			b.WaitText("#restore-choices", tc.host[strings.LastIndex(tc.host, "/")+1:])
			b.WaitText("#restore-choices", map[bool]string{true: "disconnected (isolated)", false: "connected"}[tc.isolated])
			irFits(t, b, fmt.Sprintf("instant summary at %d px", tc.w))
			browsertest.Eval[bool](b, irRecordPosts)
			b.Click("#restore-start")
			b.WaitVisible("#restore-progress")
			p2WaitJS(b, 2*time.Minute, p2Progress("#restore-progress"), "the instant recovery's task succeeded")
			b.WaitText("#restored-vm-name", name)
			b.WaitText("#instant-result", "vmvault-")
			b.CheckConsole()

			// What the page asked for.
			posts := browsertest.Eval[[]map[string]any](b, `window.irPosts`)
			if len(posts) != 1 {
				t.Fatalf("the page POSTed %d instant recoveries, want 1", len(posts))
			}
			body := posts[0]
			if body["point"] != tc.point || body["name"] != name || body["host"] != tc.host || body["datastore"] != "LocalDS_0" ||
				body["isolated"] != tc.isolated || body["powerOn"] != true || body["datacenter"] != "DC0" {
				t.Errorf("POST /instant-recoveries body %v", body)
			}
			if nets, _ := body["networks"].(map[string]any); !tc.isolated && len(nets) != 1 {
				t.Errorf("networks %v, want the NIC's network mapped to %s", body["networks"], mapped)
			} else if !tc.isolated {
				for _, v := range nets {
					if v != mapped {
						t.Errorf("networks %v, want %s", nets, mapped)
					}
				}
			}
			// What the server made of it.
			s := irWaitState(t, b, name, "running")
			if s.Host != tc.host || s.Isolated != tc.isolated || s.SourceVM != tc.source || !strings.HasPrefix(s.NFSDatastore, "vmvault-") || s.OverlayLimit <= 0 {
				t.Errorf("session %+v", s)
			}

			// The page lists it.
			b.Click("#instant-sessions-link")
			pageTitle(t, b, "Instant recoveries")
			row := fmt.Sprintf(`#instant-list tr[data-session=%q]`, s.ID)
			b.WaitVisible(row)
			b.WaitText(row+` td[data-label="State"]`, "running")
			b.WaitText(row+` td[data-label="Source VM"]`, tc.source)
			b.WaitText(row+` td[data-label="NFS datastore"]`, s.NFSDatastore)
			b.WaitText(row+` td[data-label="Host"]`, tc.host[strings.LastIndex(tc.host, "/")+1:])
			if lvl := p2Attr(b, row+` .p2-ir-overlay`, "data-level"); lvl != "ok" {
				t.Errorf("overlay bar level %q, want ok (an overlay just started)", lvl)
			}
			b.WaitText(row+` .p2-ir-overlay`, "of 1.0 GiB")
			irFits(t, b, fmt.Sprintf("instant recoveries page at %d px", tc.w))
			b.CheckConsole()

			switch tc.end {
			case "migrate":
				b.Click(row + ` [data-migrate]`)
				b.WaitVisible("#ir-migrate-ds")
				if f := b.Focused(); f != "#ir-migrate-ds" {
					t.Errorf("the migrate dialog opened with the focus on %s", f)
				}
				irFits(t, b, "migrate dialog")
				// No datastore chosen: said, nothing sent.
				b.Click("#ir-migrate-ok")
				b.WaitText("#ir-migrate-error", "Choose the datastore")
				if strings.Contains(b.Text("#ir-migrate-ds"), "vmvault-") {
					t.Errorf("the migrate dialog offers the NFS datastores: %s", b.Text("#ir-migrate-ds"))
				}
				b.Select("#ir-migrate-ds", "LocalDS_0")
				b.Click("#ir-migrate-ok")
				b.WaitGone("#ir-migrate")
				// The row follows the session to done (through migrating).
				p2WaitJS(b, 2*time.Minute, fmt.Sprintf(`(() => { const r = document.querySelector(%q); return !!r && r.dataset.state === "done"; })()`, row), "the session done in the list")
				b.WaitText(row+` td[data-label="State"]`, "moved to LocalDS_0")
				if n := b.Count(row + ` [data-migrate], ` + row + ` [data-stop]`); n != 0 {
					t.Errorf("a done session still offers %d actions", n)
				}
				if got := irSessions(t, b)[name]; got.State != "done" || got.MigrateTo != "LocalDS_0" {
					t.Errorf("after the migration: %+v", got)
				}
			case "stop":
				b.Click(row + ` [data-stop]`)
				b.WaitJS(`document.getElementById("confirm").open`, "the confirmation dialog")
				msg := b.Text("#confirm-message")
				for _, w := range []string{"powered off and unregistered", "is lost", name, s.NFSDatastore} {
					if !strings.Contains(msg, w) {
						t.Errorf("the stop dialog says %q, want it to mention %q", msg, w)
					}
				}
				if f := b.Focused(); f != "#confirm-cancel" {
					t.Errorf("the stop dialog's focus is on %s, want Cancel", f)
				}
				b.Keys(kb.Escape)
				b.WaitJS(`!document.getElementById("confirm").open`, "the dialog closed")
				if got := irSessions(t, b)[name]; got.State != "running" {
					t.Fatalf("Escape in the stop dialog: session %s", got.State)
				}
				b.Click(row + ` [data-stop]`)
				b.WaitJS(`document.getElementById("confirm").open`, "the confirmation dialog")
				b.Click("#confirm-ok")
				p2WaitJS(b, 2*time.Minute, fmt.Sprintf(`(() => { const r = document.querySelector(%q); return !!r && r.dataset.state === "stopped"; })()`, row), "the session stopped in the list")
				b.WaitText(row+` td[data-label="Overlay"]`, "no overlay")
			}
			b.WaitText(".toast", "done")
			b.CheckConsole()
		})
	}
}

// TestInstantOverlayBar renders the overlay and state cells for made-up
// sessions (a migrating one with its progress, a failed one with its
// error; the lab moves a VM too fast to see it migrating): up
// to 80 % it is the ordinary colour, above it the warning colour with
// "nearly full", at the limit red with "full"; the word is there besides
// the colour.
func TestInstantOverlayBar(t *testing.T) {
	b := signedIn(t)
	b.Go("#/instant-recoveries")
	pageTitle(t, b, "Instant recoveries")
	b.WaitVisible("#instant-list table, #instant-list .empty, #instant-list .notice")
	got := browsertest.Eval[[]string](b, `(async () => {
		const m = await import("/assets/pages/instant.js");
		const fmt = await import("/assets/lib/fmt.js");
		const {h} = await import("/assets/lib/dom.js");
		const out = [];
		for (const used of [0, 800, 801, 999, 1000]) {
			const el = m.overlayCell({fmt, h}, {id: "x", vm: {name: "v"}, overlayUsedBytes: used * 1048576, overlayLimitBytes: 1000 * 1048576});
			document.querySelector("main").append(el);
			const fill = getComputedStyle(el.querySelector(".p2-ir-fill")).backgroundColor;
			out.push([el.dataset.level, el.dataset.percent, fill, el.textContent].join("|"));
			el.remove();
		}
		out.push(String(m.overlayCell({fmt, h}, {overlayUsedBytes: 0, overlayLimitBytes: 0}).textContent));
		const cell = (s) => { const d = h("div", null, m.stateCell({fmt, h}, s)); document.querySelector("main").append(d); const p = d.querySelector("progress");
			const r = [d.textContent, p ? p.value + "/" + p.max + " " + document.querySelector("label[for='" + p.id + "']").textContent : "no bar"].join("|"); d.remove(); return r; };
		out.push(cell({id: "m1", state: "migrating", progress: 42, migrateTo: "LocalDS_0", vm: {name: "web-01-instant"}}));
		out.push(cell({id: "f1", state: "failed", error: "mount NFS: host unreachable", vm: {name: "x"}}));
		return out;
	})()`)
	if len(got) != 8 {
		t.Fatalf("cells %v", got)
	}
	if want := "migrating 42% to LocalDS_0|42/100 Moving web-01-instant to LocalDS_0"; !strings.Contains(got[6], "42% to LocalDS_0") || !strings.HasSuffix(got[6], "|42/100 Moving web-01-instant to LocalDS_0") {
		t.Errorf("a migrating session's state cell: %q, want like %q", got[6], want)
	}
	if !strings.Contains(got[7], "failed") || !strings.Contains(got[7], "mount NFS: host unreachable") || !strings.HasSuffix(got[7], "|no bar") {
		t.Errorf("a failed session's state cell: %q", got[7])
	}
	colour := func(i int) string { return strings.Split(got[i], "|")[2] }
	for i, want := range []struct{ level, pct, words string }{
		{"ok", "0", "0 B of 1000 MiB (0%)"}, {"ok", "80", "800 MiB of 1000 MiB (80%)"}, {"warn", "80", "nearly full"},
		{"warn", "99", "nearly full"}, {"full", "100", "full: the VM's writes fail"},
	} {
		parts := strings.Split(got[i], "|")
		if parts[0] != want.level || parts[1] != want.pct || !strings.Contains(parts[3], want.words) {
			t.Errorf("overlay %d: %q, want level %s, %s%%, %q", i, got[i], want.level, want.pct, want.words)
		}
	}
	if colour(0) != colour(1) || colour(2) == colour(1) || colour(2) != colour(3) || colour(4) == colour(2) || colour(4) == colour(1) {
		t.Errorf("bar colours ok %s/%s, warn %s/%s, full %s: want one for ok, another above 80%%, a third when full", colour(0), colour(1), colour(2), colour(3), colour(4))
	}
	if got[5] != "no overlay" {
		t.Errorf("a session without an overlay: %q", got[5])
	}
	b.CheckConsole()
}

// TestInstantRestoreOnlyIsolated: a restore-only user gets the isolated
// box ticked and locked with the reason, starts an isolated instant
// recovery, sees the session without Migrate and Stop, and the API
// refuses that user one on the network (403).
func TestInstantRestoreOnlyIsolated(t *testing.T) {
	admin := signedIn(t)
	_, point := tablesWeb01(t, admin)
	user, pass := "ir-restore-only", demo.Password+"-ro"
	if err := createUser(user, pass, "restore-only"); err != nil {
		t.Fatal(err)
	}
	ro := demoServer{URL: demo.URL, User: user, Password: pass}
	if err := ro.login(); err != nil {
		t.Fatal(err)
	}
	b := browsertest.New(t, demo.URL)
	b.SetCookie("vmvault_session", ro.session, true)
	b.SetCookie("vmvault_csrf", ro.csrf, false)
	b.Go("/#/dashboard")
	b.WaitJS(`!document.getElementById("user").hidden && !!document.getElementById("page-title")`, "the signed-in console")
	if n := b.Count(`#nav-list a[href="#/instant-recoveries"]`); n != 1 {
		t.Errorf("restore-only: %d navigation entries for Instant recoveries", n)
	}
	name := p2Unique("ir-ro")
	irStopLeftovers(t, name)

	for _, size := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		b.Viewport(size.w, size.h)
		b.Go("#/dashboard") // the same hash twice would not re-render
		pageTitle(t, b, "Dashboard")
		b.Go("#/restore?point=" + point)
		b.WaitVisible("#mode-instant")
		b.WaitText(`label[for="mode-instant"]`, "Your role starts it isolated")
		b.Click(`label[for="mode-instant"]`)
		b.Click("#restore-mode .p2-next")
		b.WaitVisible("#instant-isolated")
		if got := browsertest.Eval[[]bool](b, `(() => { const e = document.getElementById("instant-isolated"); return [e.checked, e.disabled]; })()`); fmt.Sprint(got) != "[true true]" {
			t.Errorf("restore-only at %d px: isolated (checked, disabled) %v, want forced on", size.w, got)
		}
		b.WaitText("#instant-isolated-hint", "restore-only")
		irFits(t, b, fmt.Sprintf("restore-only target step at %d px", size.w))
	}
	b.Fill("#restore-name", name)
	b.Select("#instant-host", "/DC0/host/DC0_H0/DC0_H0")
	b.Click("#restore-target .p2-next")
	b.WaitText("#restore-choices", "disconnected (isolated)")
	browsertest.Eval[bool](b, irRecordPosts)
	b.Click("#restore-start")
	p2WaitJS(b, 2*time.Minute, p2Progress("#restore-progress"), "the restore-only user's instant recovery succeeded")
	if posts := browsertest.Eval[[]map[string]any](b, `window.irPosts`); len(posts) != 1 || posts[0]["isolated"] != true {
		t.Errorf("restore-only POSTed %v, want isolated true", posts)
	}
	s := irWaitState(t, admin, name, "running")
	if !s.Isolated {
		t.Errorf("restore-only session %+v, want isolated", s)
	}
	b.Go("#/instant-recoveries")
	row := fmt.Sprintf(`#instant-list tr[data-session=%q]`, s.ID)
	b.WaitText(row+` td[data-label="State"]`, "running")
	if n := b.Count(row + ` button`); n != 0 {
		t.Errorf("restore-only sees %d buttons on a running session (migrate and stop need an operator)", n)
	}
	// On the network: refused by the API, as the wizard said.
	res := browsertest.Eval[apiAnswer[map[string]any]](b, apiJS("POST", "/instant-recoveries", fmt.Sprintf(`JSON.stringify({point: %q, name: "ir-ro-net", isolated: false})`, point)))
	if res.Status != http.StatusForbidden {
		t.Errorf("restore-only POST isolated=false: %d %v, want 403", res.Status, res.Body)
	}
	b.CheckConsole()
}
