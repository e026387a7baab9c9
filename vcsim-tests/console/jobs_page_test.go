package console

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"
	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestJobWizard creates a job with the wizard: one VM ticked in the
// inventory tree, a window painted by dragging the mouse and extended with
// the keyboard, a retention preset and its preview. The server's field error
// (a time zone it does not know) lands on the window step; once fixed the job
// is saved as painted. Then it runs from its page until the progress bar
// reaches 100%, shows in the list with its last run, reopens in the wizard
// as saved, and is deleted after a confirmation.
func TestJobWizard(t *testing.T) {
	b := signedIn(t)
	var vms []struct {
		InstanceUUID string `json:"instanceUuid"`
		Name         string `json:"name"`
		InInventory  bool   `json:"inInventory"`
	}
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	web := ""
	for _, v := range vms {
		if v.Name == "web-01" && v.InInventory {
			web = v.InstanceUUID
		}
	}
	if web == "" {
		t.Fatalf("the demo has no VM web-01 in its inventory: %+v", vms)
	}

	b.Go("#/jobs")
	b.WaitVisible("#new-job")
	b.Click("#new-job")
	b.WaitVisible("#job-name")
	// Client-side validation: Next without a name stays and says why.
	b.Click("#wizard-next")
	b.WaitText(`.p2-step-panel[data-step=basics] .field-error`, "Enter a name")
	name := p2Unique("Web nightly")
	b.Fill("#job-name", name)
	id := p2Value(b, "#job-id")
	if id == "" || strings.ContainsAny(id, " /") {
		t.Fatalf("job ID derived from %q = %q", name, id)
	}
	b.Click("#wizard-next")

	// VMs: tick web-01 in the tree.
	vm := `.p2-tree li[data-name="web-01"] > .p2-tree-line > input[data-node]`
	b.WaitVisible(vm)
	b.Click(vm)
	b.WaitText("#selection-match", "Selected now: 1 VM (web-01)")
	b.Click("#wizard-next")

	// Repository: the demo has one, chosen already.
	b.WaitVisible(`input[name=repository]:checked`)
	b.Click("#wizard-next")

	// Window: clear; paint day1 20:00-24:00 by dragging; then day2
	// 00:00-02:00 with the keyboard (Space toggles, Shift+arrow paints).
	// The days lie three days ahead, so no window opens while the test runs.
	week := []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
	d1 := (int(time.Now().UTC().Weekday()) + 6 + 3) % 7
	d2 := (d1 + 1) % 7
	day1, day2 := week[d1], week[d2]
	b.WaitVisible("#window-grid")
	b.Click(`.p2-step-panel[data-step=schedule] .p2-actions button:nth-child(4)`) // Clear
	b.WaitText("#window-words", "Never open")
	p2Drag(t, b, p2Cell(d1, 20), p2Cell(d1, 23))
	b.WaitText("#window-words", day1+": 20:00–24:00")
	b.Click(p2Cell(d2, 0)) // a click toggles day2 00:00 on and focuses it
	b.WaitText("#window-words", day2+": 00:00–01:00")
	p2Key(b, " ", false) // Space: off again
	b.WaitJS(fmt.Sprintf(`!document.querySelector("#window-words").textContent.includes(%q)`, day2), day2+" off again")
	p2Key(b, " ", false) // and on
	p2Key(b, kb.ArrowRight, true)
	b.WaitText("#window-words", day2+": 00:00–02:00")
	b.WaitText("#window-openings li", day1+" 20:00 until "+day2+" 02:00 (6 h)")
	if f := b.Focused(); !strings.Contains(f, day2+" 01:00") {
		t.Errorf("focus after Shift+ArrowRight = %q, want the %s 01:00 cell", f, day2)
	}
	if got := p2Attr(b, p2Cell(d2, 1), "aria-selected"); got != "true" {
		t.Errorf("%s 01:00 aria-selected = %q, want true", day2, got)
	}
	// A zone the browser accepts and the appliance does not (zone names
	// are case-sensitive files there): only the server can refuse it.
	b.Fill("#window-tz", "utc")
	b.Click("#wizard-next")

	// Retention: the "7 daily, 4 weekly, 12 monthly" preset; quiesce.
	b.WaitVisible("#ret-daily-weekly-monthly")
	b.Click(`label[for="ret-daily-weekly-monthly"]`)
	b.WaitText("#retention-words", "7 daily, 4 weekly, 12 monthly")
	b.Click(`label[for="q-application"]`)
	b.Click("#wizard-next")

	// Preview: what the retention would do, before saving.
	b.WaitText("#preview-summary", "Would keep")
	b.WaitText("#retention-preview", "web-01")
	b.Click("#wizard-next")
	b.WaitText("#job-summary", name)
	b.WaitText("#job-summary", day1+": 20:00–24:00")
	p2NoJunk(t, b, "wizard summary")
	b.Click("#wizard-save")

	// The server's field error is shown on the window step, next to the zone.
	b.WaitVisible(`.p2-step-panel[data-step=schedule]:not([hidden])`)
	b.WaitVisible(`#window-tz[aria-invalid=true]`)
	b.WaitText(`.p2-step-panel[data-step=schedule] .field-error`, "utc")
	b.Fill("#window-tz", "UTC")
	// One step at a time: the preview loads from the server and its table
	// pushes the Next button down, so a click aimed while it loads can land
	// where the button was (it did, once, on a loaded machine).
	for _, step := range []string{"retention", "preview", "summary"} {
		b.Click("#wizard-next")
		b.WaitVisible(`.p2-step-panel[data-step=` + step + `]:not([hidden])`)
		if step == "preview" {
			b.WaitVisible(`#retention-preview[aria-busy=false] #preview-summary`)
		}
	}
	b.WaitText("#job-summary", "(UTC)")
	b.Click("#wizard-save")
	b.WaitJS(fmt.Sprintf(`location.hash === %q`, "#/jobs/"+id), "the new job's page")
	b.WaitText("#page-title", "Job: "+name)

	var job struct {
		Selection struct {
			VMs []string `json:"vms"`
		} `json:"selection"`
		Window struct {
			Location string              `json:"location"`
			Days     map[string][]string `json:"days"`
		} `json:"window"`
		Retention map[string]any `json:"retention"`
		Quiesce   string         `json:"quiesce"`
	}
	if st := p2API(t, b, "GET", "/jobs/"+id, nil, &job); st != 200 {
		t.Fatalf("GET /jobs/%s: %d", id, st)
	}
	if !slices.Equal(job.Selection.VMs, []string{web}) {
		t.Errorf("selection.vms = %v, want [%s]", job.Selection.VMs, web)
	}
	want := map[string][]string{strings.ToLower(day1): {"20:00-24:00"}, strings.ToLower(day2): {"00:00-02:00"}}
	if fmt.Sprint(job.Window.Days) != fmt.Sprint(want) || job.Window.Location != "UTC" {
		t.Errorf("window = %s %v, want UTC %v", job.Window.Location, job.Window.Days, want)
	}
	for k, v := range map[string]float64{"last": 0, "daily": 7, "weekly": 4, "monthly": 12, "quarterly": 0, "yearly": 0} {
		if job.Retention[k] != v {
			t.Errorf("retention.%s = %v, want %v (all: %v)", k, job.Retention[k], v, job.Retention)
		}
	}
	if job.Quiesce != "application" {
		t.Errorf("quiesce = %q, want application", job.Quiesce)
	}

	// Run it now and watch the run's progress reach 100%.
	b.Click(`.page-actions button[data-action=run]`)
	b.WaitVisible(".p2-run-progress")
	p2WaitJS(b, 3*time.Minute, p2Progress(".p2-run-progress"), "the run's progress at 100%, succeeded")
	b.WaitText(".p2-run-result", "finished: succeeded")
	b.WaitText(".p2-run summary", "manual")
	b.WaitText(".p2-run", "web-01")

	// The list shows it with its last run; the wizard reopens it as saved.
	b.Go("#/jobs")
	row := fmt.Sprintf(`#jobs-table tr[data-job=%q]`, id)
	b.WaitText(row, name)
	b.WaitText(row, "succeeded")
	b.WaitText(row, "web-01")
	b.Go("#/job-wizard/" + id)
	b.WaitVisible("#job-name")
	if got := p2Value(b, "#job-name"); got != name {
		t.Errorf("edit wizard name = %q, want %q", got, name)
	}
	for _, step := range []string{"vms", "repository", "schedule"} {
		b.Click("#wizard-next")
		b.WaitVisible(`.p2-step-panel[data-step=` + step + `]:not([hidden])`)
	}
	b.WaitText("#window-words", day1+": 20:00–24:00")
	b.WaitText("#window-words", day2+": 00:00–02:00")
	b.CheckConsole()

	// Delete asks first: Cancel keeps the job, Delete removes it.
	b.Go("#/jobs")
	b.WaitVisible(row + ` button[data-action=delete]`)
	b.Click(row + ` button[data-action=delete]`)
	b.WaitVisible("#confirm[open]")
	b.Click("#confirm-cancel")
	b.WaitGone("#confirm[open]")
	if st := p2API(t, b, "GET", "/jobs/"+id, nil, nil); st != 200 {
		t.Fatalf("GET the job after cancelling its deletion: %d", st)
	}
	b.Click(row + ` button[data-action=delete]`)
	b.WaitVisible("#confirm[open]")
	b.Click("#confirm-ok")
	b.WaitGone(row)
	if st := p2API(t, b, "GET", "/jobs/"+id, nil, nil); st != 404 {
		t.Fatalf("GET the deleted job: %d, want 404", st)
	}
}

// TestJobWizardKeyboardOnly creates a job with the keyboard alone:
// Enter moves on from a text field, Tab reaches every control in order,
// Space ticks a VM, the arrow keys change the retention preset.
func TestJobWizardKeyboardOnly(t *testing.T) {
	b := signedIn(t)
	b.Go("#/jobs/new") // the shell README's address for it
	b.WaitVisible("#job-name")
	b.WaitJS(`location.hash === "#/job-wizard"`, "#/jobs/new replaced by #/job-wizard")
	if f := b.Focused(); f != "#job-name" {
		t.Fatalf("focus on the wizard's first step = %s, want #job-name", f)
	}
	name := p2Unique("Keyboard job")
	b.Keys(name)
	id := p2Value(b, "#job-id")
	// Disabled: its default window (nights and weekends) may be open now,
	// and a window run would back up while the other tests run.
	p2TabTo(t, b, "#job-enabled")
	b.Keys(" ")
	b.ShiftTab()
	b.ShiftTab()
	b.ShiftTab()
	if f := b.Focused(); f != "#job-name" {
		t.Fatalf("Shift+Tab three times from Enabled reached %s, want #job-name", f)
	}
	b.Keys(kb.Enter) // Enter in a text field moves on
	b.WaitVisible(`.p2-step-panel[data-step=vms]:not([hidden])`)
	if f := b.Focused(); f != "#tree-filter" {
		t.Fatalf("focus on the VMs step = %s, want #tree-filter", f)
	}
	b.Keys("web-01")
	p2TabTo(t, b, `.p2-tree li[data-name="web-01"] > .p2-tree-line > input[data-node]`)
	b.Keys(" ")
	b.WaitText("#selection-match", "Selected now: 1 VM (web-01)")
	p2TabTo(t, b, "#wizard-next")
	b.Keys(kb.Enter) // repository: the only one is chosen
	b.WaitVisible(`.p2-step-panel[data-step=repository]:not([hidden])`)
	p2TabTo(t, b, "#wizard-next")
	b.Keys(kb.Enter) // window: the default nights and weekends
	b.WaitVisible(`.p2-step-panel[data-step=schedule]:not([hidden])`)
	p2TabTo(t, b, "#wizard-next")
	b.Keys(kb.Enter)
	b.WaitVisible(`.p2-step-panel[data-step=retention]:not([hidden])`)
	if f := b.Focused(); f != "#ret-more" {
		t.Fatalf("focus on the retention step = %s, want the chosen preset #ret-more", f)
	}
	b.Keys(kb.ArrowDown) // More -> Many
	b.WaitText("#retention-words", "15 most recent")
	p2TabTo(t, b, "#wizard-next")
	b.Keys(kb.Enter)
	b.WaitText("#preview-summary", "Would keep")
	p2TabTo(t, b, "#wizard-next")
	b.Keys(kb.Enter)
	b.WaitText("#job-summary", name)
	p2TabTo(t, b, "#wizard-save")
	b.Keys(kb.Enter)
	b.WaitJS(fmt.Sprintf(`location.hash === %q`, "#/jobs/"+id), "the new job's page")
	var job struct {
		Enabled   bool `json:"enabled"`
		Retention struct {
			Preset string `json:"preset"`
		} `json:"retention"`
	}
	if st := p2API(t, b, "GET", "/jobs/"+id, nil, &job); st != 200 || job.Retention.Preset != "many" || job.Enabled {
		t.Fatalf("GET /jobs/%s: %d, preset %q (want many), enabled %v (want false)", id, st, job.Retention.Preset, job.Enabled)
	}
	if st := p2API(t, b, "DELETE", "/jobs/"+id, nil, nil); st != 204 {
		t.Fatalf("DELETE /jobs/%s: %d", id, st)
	}
	b.CheckConsole()
}

// TestTagPickerAndQuiesceRequired selects VMs by the demo's tag in the job
// wizard: the picker names it "Environment / production", the wizard's
// "Selected now" shows exactly the two tagged VMs, the saved job stores the
// tag's id, and the jobs list names the tag. The quiesce step's
// requirement is off with quiescing off, and saved when ticked.
func TestTagPickerAndQuiesceRequired(t *testing.T) {
	b := signedIn(t)
	var tags []struct{ ID, Name, Category string }
	if st := p2API(t, b, "GET", "/tags", nil, &tags); st != 200 {
		t.Fatalf("GET /tags: %d", st)
	}
	prod := ""
	for _, tg := range tags {
		if tg.Category == "Environment" && tg.Name == "production" {
			prod = tg.ID
		}
	}
	if prod == "" {
		t.Fatalf("GET /tags has no Environment/production: %+v", tags)
	}
	var tagged []string
	for name, v := range liveVMs(t, b) {
		if slices.Contains(v.Tags, prod) {
			tagged = append(tagged, name)
		}
	}
	slices.Sort(tagged)
	if !slices.Equal(tagged, []string{"db-01", "web-01"}) {
		t.Fatalf("VMs carrying Environment/production: %v, want db-01 and web-01", tagged)
	}

	b.Go("#/job-wizard")
	b.WaitVisible("#job-name")
	name := p2Unique("By tag")
	b.Fill("#job-name", name)
	id := p2Value(b, "#job-id")
	b.Click("#job-enabled") // disabled: its default window must not open during the suite
	b.Click("#wizard-next")

	row := `#tag-picker li[data-tag-label="Environment / production"]`
	b.WaitVisible(row)
	b.WaitText(row, "2 VMs now")
	b.Click(row + ` input[data-tag-include]`)
	b.WaitText("#selection-match", "Selected now: 2 VMs (db-01, web-01).")
	// Excluding the tag instead unticks the inclusion and selects nothing.
	b.Click(row + ` input[data-tag-exclude]`)
	b.WaitText("#selection-match", "Selected now: 0 VMs.")
	if browsertest.Eval[bool](b, fmt.Sprintf(`document.querySelector(%q).checked`, row+` input[data-tag-include]`)) {
		t.Error("excluding a tag left it included")
	}
	b.Click(row + ` input[data-tag-include]`)
	b.WaitText("#selection-match", "Selected now: 2 VMs (db-01, web-01).")
	b.Click("#wizard-next")

	b.WaitVisible(`input[name=repository]:checked`)
	b.Click("#wizard-next")
	b.WaitVisible("#window-grid")
	b.Click("#wizard-next")

	// Quiescing: "require" is meaningless with quiescing off.
	b.WaitVisible("#q-required")
	b.Click(`label[for="q-none"]`)
	b.WaitJS(`document.getElementById("q-required").disabled && !document.getElementById("q-required").checked`, "require disabled with quiescing off")
	b.Click(`label[for="q-filesystem"]`)
	b.WaitJS(`!document.getElementById("q-required").disabled`, "require enabled with file-system quiescing")
	b.WaitJS(`document.getElementById("q-vss").disabled`, "VSS type disabled without application quiescing")
	b.WaitText("#q-required-hint", "its snapshot is removed")
	b.Click(`label[for="q-application"]`)
	b.WaitJS(`!document.getElementById("q-vss").disabled`, "VSS type enabled with application quiescing")
	browsertest.Eval[bool](b, `(() => { const s = document.getElementById("q-vss"); s.value = "full"; s.dispatchEvent(new Event("change", {bubbles: true})); return true })()`)
	b.Click(`label[for="q-required"]`)
	b.Click("#wizard-next")

	b.WaitText("#preview-summary", "Would keep")
	b.Click("#wizard-next")
	b.WaitText("#job-summary", "tag Environment / production")
	b.WaitText("#job-summary", "required: a VM that cannot be quiesced fails")
	b.WaitText("#job-summary", "VSS full")
	p2NoJunk(t, b, "wizard summary")
	b.Click("#wizard-save")
	b.WaitJS(fmt.Sprintf(`location.hash === %q`, "#/jobs/"+id), "the new job's page")
	b.WaitText(".p2-dl", "tag Environment / production")
	b.WaitText(".p2-dl", "required")

	var job struct {
		Enabled   bool `json:"enabled"`
		Selection struct {
			VMs     []string `json:"vms"`
			Tags    []string `json:"tags"`
			Exclude struct {
				Tags []string `json:"tags"`
			} `json:"exclude"`
		} `json:"selection"`
		Quiesce         string `json:"quiesce"`
		QuiesceRequired bool   `json:"quiesceRequired"`
		VSSType         string `json:"vssType"`
	}
	if st := p2API(t, b, "GET", "/jobs/"+id, nil, &job); st != 200 {
		t.Fatalf("GET /jobs/%s: %d", id, st)
	}
	if !slices.Equal(job.Selection.Tags, []string{prod}) || len(job.Selection.VMs) != 0 || len(job.Selection.Exclude.Tags) != 0 {
		t.Errorf("selection = %+v, want the tag id %s only", job.Selection, prod)
	}
	if job.Quiesce != "application" || job.VSSType != "full" || !job.QuiesceRequired || job.Enabled {
		t.Errorf("quiesce %q vssType %q required %v enabled %v, want application, full, required, disabled", job.Quiesce, job.VSSType, job.QuiesceRequired, job.Enabled)
	}
	b.Go("#/jobs")
	jrow := fmt.Sprintf(`#jobs-table tr[data-job=%q]`, id)
	b.WaitText(jrow, "tag Environment / production")
	b.WaitText(jrow, "2 now")

	// Reopened, the wizard shows the saved choices.
	b.Go("#/job-wizard/" + id)
	b.WaitVisible("#job-name")
	b.Click("#wizard-next")
	b.WaitVisible(row)
	if !browsertest.Eval[bool](b, fmt.Sprintf(`document.querySelector(%q).checked`, row+` input[data-tag-include]`)) {
		t.Error("the reopened wizard does not show the tag included")
	}
	b.CheckConsole()
	if st := p2API(t, b, "DELETE", "/jobs/"+id, nil, nil); st != 204 && st != 200 {
		t.Errorf("DELETE /jobs/%s: %d", id, st)
	}
}
