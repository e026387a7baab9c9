package console

import (
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestCopyJobsPage: the copy jobs page lists none in the demo (it has one
// repository), its form starts with that repository, a copy onto the same
// repository is refused with the error under the target field, the API
// refuses an unknown target, the offsite card and the page's words render
// as they should, and the dashboard shows no offsite card without copy
// jobs. (The daemon's TestServeDisasterRecovery runs copy
// jobs end to end through the API.)
func TestCopyJobsPage(t *testing.T) {
	b := signedIn(t)
	b.Go("#/copy-jobs")
	pageTitle(t, b, "Copy jobs")
	b.WaitText("#copy-jobs-list", "No copy job yet")
	b.Click("#new-copy-job")
	pageTitle(t, b, "New copy job")
	b.WaitVisible("#copy-job-form")
	b.Fill(`#copy-job-form input[name="id"]`, "same-repo")
	b.Fill(`#copy-job-form input[name="uploadLimitMBps"]`, "-1")
	b.Click("#save-copy-job")
	b.WaitText("#copy-job-form", "must differ from the source")
	// The upload limit is sent, and its error shows under its field.
	if got := browsertest.Eval[string](b, `document.querySelector('#copy-job-form input[name="uploadLimitMBps"]').getAttribute("aria-invalid")`); got != "true" {
		t.Errorf("upload limit field aria-invalid = %q", got)
	}
	if got := browsertest.Eval[string](b, `document.querySelector('#copy-job-form select[name="target"]').getAttribute("aria-invalid")`); got != "true" {
		t.Errorf("target field aria-invalid = %q", got)
	}

	var repos []struct {
		Name string `json:"name"`
	}
	if st := p2API(t, b, "GET", "/repositories", nil, &repos); st != 200 || len(repos) == 0 {
		t.Fatalf("GET /repositories: %d", st)
	}
	// The demo has one repository: a copy job to any other name is refused.
	st := p2API(t, b, "POST", "/copy-jobs", map[string]any{"id": "x", "source": repos[0].Name, "target": "nowhere",
		"window": map[string]any{"location": "UTC", "days": map[string]any{"monday": []string{"01:00-05:00"}}}, "retention": map[string]any{"last": 7}}, nil)
	if st != 422 {
		t.Fatalf("a copy job to an unknown repository: %d", st)
	}
	// The dashboard's offsite card (module checked on made-up answers: the
	// demo has no second repository to copy to) and the words of the list.
	got := browsertest.Eval[string](b, `(async () => { const O = await import("/assets/pages/dashboard-offsite.js");
		const C = await import("/assets/pages/copyjobs.js");
		const none = O.offsiteCard(undefined).length;
		const all = O.offsiteCard({protected: 2, copied: 2, missing: []})[0];
		const some = O.offsiteCard({protected: 3, copied: 1, missing: ["db-01", "web-02"]})[0];
		return [none, all.className, all.textContent, some.className, some.querySelector("#offsite-missing").textContent,
			C.describeWindow({location: "UTC", days: {monday: ["01:00-05:00"], tuesday: ["01:00-05:00"]}}),
			C.describeRetention({last: 7, weekly: 4, monthly: 0}),
			C.describeLimit({}), C.describeLimit({uploadLimitMBps: 12.5, uploadSchedule: [{window: {}, mbps: 2}]})].join("|"); })()`)
	want := "0|card ok|2 of 2Protected VMs copied offsite (< 24 h)|card warn|Not yet: db-01, web-02|monday, tuesday 01:00-05:00 (UTC)|keeps last 7, weekly 4|unlimited|12.5 MB/s, other limits in 1 window"
	if got != want {
		t.Errorf("offsite card and words:\n got %s\nwant %s", got, want)
	}
	b.Go("#/dashboard")
	b.WaitVisible("[data-card]")
	if n := b.Count("#offsite-card"); n != 0 {
		t.Errorf("an offsite card without copy jobs")
	}
	if !strings.Contains(b.Text("#nav"), "Copy jobs") {
		t.Errorf("nav lacks Copy jobs: %q", b.Text("#nav"))
	}
	b.CheckConsole()
}
