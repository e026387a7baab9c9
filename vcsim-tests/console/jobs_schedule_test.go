package console

import (
	"slices"
	"testing"
)

// TestJobWizardDailyAndEvery schedules "daily at 21:00" with a run every
// 4 hours: the wizard says when runs start, and the job is saved with the
// one-hour gap before 21:00 each day and everyHours 4.
func TestJobWizardDailyAndEvery(t *testing.T) {
	b := signedIn(t)
	b.Go("#/job-wizard")
	b.WaitVisible("#job-name")
	name := p2Unique("Daily")
	b.Fill("#job-name", name)
	id := p2Value(b, "#job-id")
	b.Click("#job-enabled") // disabled: its window must not open during the suite
	b.Click("#wizard-next")
	vm := `.p2-tree li[data-name="web-01"] > .p2-tree-line > input[data-node]`
	b.WaitVisible(vm)
	b.Click(vm)
	b.Click("#wizard-next")
	b.WaitVisible(`input[name=repository]:checked`)
	b.Click("#wizard-next")
	b.WaitVisible(`.p2-step-panel[data-step=schedule]:not([hidden])`)

	b.Select("#daily-at-hour", "21")
	b.Click("#daily-at")
	b.WaitText("#window-openings", "Monday 21:00 until Tuesday 20:00 (23 h)")
	b.WaitText("#window-starts", "runs start Monday 21:00")
	b.Select("#window-every", "4")
	b.WaitText("#window-starts", "runs start Monday 21:00, Tuesday 01:00, Tuesday 05:00, Tuesday 09:00, Tuesday 13:00, Tuesday 17:00")
	for _, step := range []string{"retention", "preview", "summary"} {
		b.Click("#wizard-next")
		b.WaitVisible(`.p2-step-panel[data-step=` + step + `]:not([hidden])`)
		if step == "preview" {
			b.WaitVisible(`#retention-preview[aria-busy=false] #preview-summary`)
		}
	}
	b.WaitText("#job-summary", "a run every 4 h while open")
	b.Click("#wizard-save")
	b.WaitText("#page-title", "Job: "+name)

	var job struct {
		EveryHours int `json:"everyHours"`
		Window     struct {
			Days map[string][]string `json:"days"`
		} `json:"window"`
	}
	if st := p2API(t, b, "GET", "/jobs/"+id, nil, &job); st != 200 {
		t.Fatalf("GET /jobs/%s: %d", id, st)
	}
	if job.EveryHours != 4 {
		t.Errorf("everyHours = %d, want 4", job.EveryHours)
	}
	for _, d := range []string{"monday", "sunday"} {
		if got := job.Window.Days[d]; !slices.Equal(got, []string{"00:00-20:00", "21:00-24:00"}) {
			t.Errorf("window %s = %v, want open but 20:00-21:00", d, got)
		}
	}
	if st := p2API(t, b, "DELETE", "/jobs/"+id, nil, nil); st != 204 && st != 200 {
		t.Errorf("DELETE /jobs/%s: %d", id, st)
	}
	b.CheckConsole()
}
