package console

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

type settingsDoc struct {
	Maintenance struct {
		Source string `json:"source"`
		Window *struct {
			Location string              `json:"location"`
			Days     map[string][]string `json:"days"`
		} `json:"window"`
		FullCheckDays int `json:"fullCheckDays"`
	} `json:"maintenance"`
	SMTP struct {
		Source string `json:"source"`
	} `json:"smtp"`
	VCenter struct {
		Source string `json:"source"`
		URL    string `json:"url"`
	} `json:"vcenter"`
}

func settingsNow(t *testing.T, b *browsertest.Browser) settingsDoc {
	t.Helper()
	var s settingsDoc
	if st := p2API(t, b, "GET", "/settings", nil, &s); st != 200 {
		t.Fatalf("GET /settings: %d", st)
	}
	return s
}

// TestSettingsEditMaintenanceAndRepository: the settings page shows where
// each section's values come from (the demo's file for vCenter and the
// maintenance window, nothing for mail); a bad maintenance range is
// refused next to its day (by the page), an overlap next to the window (by
// the server); a good window is saved, applied and shown as the console's,
// then reset to the file's. A repository is created from the page (a path
// inside the demo's repository and two different passphrases refused next
// to their fields) and listed; opening the demo's own repository again is
// refused on the path. The repository it adds is removed again at the end
// (its files stay, as removal keeps data), so the demo every test shares
// keeps its one repository whatever order the tests run in: the job
// wizard preselects the repository only while there is one.
func TestSettingsEditMaintenanceAndRepository(t *testing.T) {
	b := signedIn(t)
	b.Viewport(1440, 900)
	b.Go("#/settings")
	pageTitle(t, b, "Settings")
	b.WaitVisible("#settings-maintenance")
	b.WaitVisible("#settings-repos-list table")
	before := settingsNow(t, b)
	if before.Maintenance.Source != "yaml" || before.VCenter.Source != "yaml" || before.VCenter.URL == "" {
		t.Fatalf("the demo's settings: %+v", before)
	}
	for sel, src := range map[string]string{"#vc-source": "yaml", "#mt-source": "yaml", "#smtp-source": before.SMTP.Source} {
		if got := p2Attr(b, sel, "data-source"); got != src {
			t.Errorf("%s says %q, want %q", sel, got, src)
		}
	}
	if !strings.Contains(b.Text("#mt-source"), "configuration file") {
		t.Errorf("the maintenance source line does not say what wins: %q", b.Text("#mt-source"))
	}
	if v := p2Value(b, "#vc-url"); v != before.VCenter.URL {
		t.Errorf("the configured vCenter is not shown: %q, want %q", v, before.VCenter.URL)
	}

	// A day three days from now, so that the window is never open during the test.
	day := strings.ToLower(time.Now().UTC().Add(72 * time.Hour).Weekday().String())
	clearDays := func() {
		for _, d := range []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"} {
			b.SetValue("#mt-day-"+d, "")
		}
	}
	clearDays()
	b.Fill("#mt-day-"+day, "25:00-26:00")
	b.Click("#mt-save")
	b.WaitText("#settings-maintenance .field-error", "a range such as 01:00-06:00")
	if inv := p2Attr(b, "#mt-day-"+day, "aria-invalid"); inv != "true" {
		t.Errorf("the bad day is not marked invalid (aria-invalid %q)", inv)
	}
	// Two ranges that overlap pass the page's check; the server names the window.
	b.SetValue("#mt-day-"+day, "01:00-03:00, 02:00-04:00")
	b.Click("#mt-save")
	b.WaitText("#settings-maintenance fieldset .field-error", "overlaps")
	if s := settingsNow(t, b); s.Maintenance.Source != "yaml" {
		t.Fatalf("a refused window changed the settings: %+v", s.Maintenance)
	}
	b.SetValue("#mt-day-"+day, "01:00-02:30")
	b.SetValue("#mt-tz", "UTC")
	b.SetValue("#mt-full", "5")
	b.Click("#mt-save")
	b.WaitText(".toast", "Saved and applied")
	b.WaitJS(`document.querySelector("#mt-source") && document.querySelector("#mt-source").dataset.source === "console"`, "the page showing the console's window")
	s := settingsNow(t, b)
	if s.Maintenance.Source != "console" || s.Maintenance.Window == nil || strings.Join(s.Maintenance.Window.Days[day], ",") != "01:00-02:30" || s.Maintenance.FullCheckDays != 5 || len(s.Maintenance.Window.Days) != 1 {
		t.Fatalf("saved maintenance: %+v", s.Maintenance)
	}
	if v := p2Value(b, "#mt-day-"+day); v != "01:00-02:30" {
		t.Errorf("the page shows %q for %s after saving", v, day)
	}
	// The change is an audit event.
	var evs []struct{ Kind, Outcome string }
	p2API(t, b, "GET", "/events?kind=settings&limit=50", nil, &evs)
	found := false
	for _, e := range evs {
		found = found || (e.Kind == "settings.maintenance" && e.Outcome == "ok")
	}
	if !found {
		t.Errorf("no settings.maintenance audit event: %+v", evs)
	}
	// Back to the configuration file's window.
	b.Click("#mt-reset")
	b.WaitJS(`document.getElementById("confirm").open`, "the confirmation dialog")
	b.Click("#confirm-ok")
	b.WaitJS(`document.querySelector("#mt-source") && document.querySelector("#mt-source").dataset.source === "yaml"`, "the file's window again")
	if s := settingsNow(t, b); s.Maintenance.Source != "yaml" || s.Maintenance.Window == nil || len(s.Maintenance.Window.Days) != len(before.Maintenance.Window.Days) {
		t.Fatalf("after the reset: %+v", s.Maintenance)
	}

	// Repositories.
	var repos []struct{ Name, Path string }
	p2API(t, b, "GET", "/repositories", nil, &repos)
	if len(repos) == 0 {
		t.Fatal("the demo has no repository")
	}
	name := p2Unique("zz-console")
	b.Fill("#repo-name", name)
	b.Fill("#repo-path", filepath.Join(repos[0].Path, "inside"))
	b.Fill("#repo-pass", "console-repo-pass")
	b.Fill("#repo-pass2", "another-pass")
	b.Click("#repo-add-submit")
	b.WaitText("#repo-add .field-error", "The two passphrases differ.")
	b.Fill("#repo-pass2", "console-repo-pass")
	b.Click("#repo-add-submit")
	b.WaitText("#repo-add .field-error", "inside repository")
	if p2Attr(b, "#repo-path", "aria-invalid") != "true" {
		t.Error("the path inside a repository is not marked invalid")
	}
	dir := filepath.Join(filepath.Dir(demo.State), "console-repos", name)
	b.Fill("#repo-path", dir)
	b.Click("#repo-test")
	b.WaitText("#repo-result", "can be created")
	b.Click("#repo-add-submit")
	t.Cleanup(func() {
		if st := p2API(t, b, "DELETE", "/repositories/"+name, nil, nil); st != 200 {
			t.Errorf("remove the repository the test added: %d", st)
		}
	})
	b.WaitText(".toast", fmt.Sprintf("Repository %s created", name))
	b.WaitText("#settings-repos-list td", name)
	if v := p2Value(b, "#repo-pass"); v != "" {
		t.Error("the passphrase stays in the form after adding")
	}
	var after []struct{ Name, Path string }
	p2API(t, b, "GET", "/repositories", nil, &after)
	if len(after) != len(repos)+1 {
		t.Fatalf("repositories after adding: %+v", after)
	}
	// Opening the demo's repository again: refused on the path.
	b.Click("#repo-mode-open")
	b.WaitJS(`document.getElementById("repo-pass2").closest(".field").hidden`, "the repeat field hidden for open")
	b.Fill("#repo-name", name+"-again")
	b.Fill("#repo-path", dir)
	b.Fill("#repo-pass", "console-repo-pass")
	b.Click("#repo-add-submit")
	b.WaitText("#repo-add .field-error", "already open")
	raw, _ := json.Marshal(after)
	if strings.Contains(string(raw), "console-repo-pass") {
		t.Fatal("the passphrase is in GET /repositories")
	}
	p2NoJunk(t, b, "settings")
	if over := browsertest.Eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); over > 1 {
		t.Errorf("the settings page scrolls sideways by %d px", over)
	}
	b.Viewport(400, 800)
	if over := browsertest.Eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); over > 1 {
		t.Errorf("the settings page at 400 px scrolls sideways by %d px", over)
	}
}
