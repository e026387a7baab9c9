package console

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestEventsPageShowsChangesInConsoleZone (issue 29 item 3): a job's
// retention change is an event naming the job by id and name, with the
// changed fields listed under its message; its time is in the console's
// time zone (Asia/Tokyo here, never UTC+0) with the UTC time on hover; the
// Kind filter offers every kind, a repository's Test and instant
// recoveries included. Before, the row said "admin changed a job <id>"
// with neither the name nor what changed, and the filter had twelve
// prefixes.
func TestEventsPageShowsChangesInConsoleZone(t *testing.T) {
	b := signedIn(t)
	b.Viewport(1440, 900)

	var general map[string]any
	if st := p2API(t, b, "GET", "/settings", nil, &general); st != 200 {
		t.Fatalf("GET /settings: %d", st)
	}
	oldZone := general["timeZone"]
	put := func(zone any) {
		t.Helper()
		if st := p2API(t, b, "PUT", "/settings", map[string]any{"timeZone": zone, "eventRetentionDays": general["eventRetentionDays"]}, nil); st != 200 {
			t.Fatalf("PUT /settings timeZone %v: %d", zone, st)
		}
	}
	put("Asia/Tokyo")
	t.Cleanup(func() { put(oldZone) })

	_, repo := p2DemoJobAndRepo(t, b)
	web01 := p2VMUUID(t, b, "web-01")
	id := p2Unique("audit-diff")
	name := "Audit diff " + id[len(id)-6:]
	job := map[string]any{
		"id": id, "name": name, "enabled": false, "repository": repo,
		"selection": map[string]any{"vms": []string{web01}},
		"window":    map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"01:00-02:00"}}},
		"retention": map[string]any{"last": 3},
	}
	if st := p2API(t, b, "POST", "/jobs", job, nil); st != 201 {
		t.Fatalf("POST /jobs: %d", st)
	}
	t.Cleanup(func() { p2API(t, b, "DELETE", "/jobs/"+id, nil, nil) })
	job["retention"] = map[string]any{"last": 9, "weekly": 4}
	if st := p2API(t, b, "PUT", "/jobs/"+id, job, nil); st != 200 {
		t.Fatalf("PUT /jobs/%s: %d", id, st)
	}
	var evs []struct {
		Time    time.Time `json:"time"`
		Message string    `json:"message"`
	}
	if st := p2API(t, b, "GET", "/events?kind=job.update&job="+id, nil, &evs); st != 200 || len(evs) != 1 {
		t.Fatalf("GET /events of the change: %d, %d events", st, len(evs))
	}

	b.Go("#/events?range=24h&kind=job.update&job=" + id)
	b.Reload() // the console reads its time zone when it starts
	pageTitle(t, b, "Events")
	row := `#events-list tbody tr`
	b.WaitVisible(row + ` .event-changes`)
	if n := b.Count(row); n != 1 {
		t.Fatalf("%d rows for the one change", n)
	}
	msg := b.Text(row + ` td[data-label="Message"]`)
	if !strings.Contains(msg, fmt.Sprintf("changed job %s (%s)", id, name)) {
		t.Errorf("the message does not name the job by id and name: %q", msg)
	}
	var items []string
	for i := 1; i <= b.Count(row+` .event-changes li`); i++ {
		items = append(items, b.Text(fmt.Sprintf(`%s .event-changes li:nth-child(%d)`, row, i)))
	}
	if got, want := strings.Join(items, " | "), "retention.last: 3 → 9 | retention.weekly: 0 → 4"; got != want {
		t.Errorf("changes under the message: %q, want %q", got, want)
	}
	if strings.Count(msg, "retention.last") != 1 {
		t.Errorf("the change shows twice (message and list): %q", msg)
	}

	when := evs[0].Time
	title := p2Attr(b, row+` td[data-label="Time"] time`, "title")
	if want := when.UTC().Format("2006-01-02 15:04:05") + " UTC"; title != want {
		t.Errorf("the time's title %q, want the UTC time %q", title, want)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	shown := b.Text(row + ` td[data-label="Time"]`)
	if !strings.Contains(shown, when.In(tokyo).Format("15:04:05")) || !strings.Contains(shown, when.In(tokyo).Format("2006")) {
		t.Errorf("the time %q is not %s in the console's zone (Asia/Tokyo)", shown, when.In(tokyo).Format("2006-01-02 15:04:05"))
	}

	// The Kind filter lists every kind, in groups.
	kinds := browsertest.Eval[[]string](b, `[...document.querySelectorAll("#events-kind option")].map(o => o.value)`)
	have := map[string]bool{}
	for _, k := range kinds {
		have[k] = true
	}
	for _, k := range []string{"repository.test", "repository.add", "instant.start", "instant.stop", "file.download", "restore.vm",
		"copyjob.update", "token.scope", "settings.smtp", "job.finished", "vm.failed", "copy.failed", "check.damage"} {
		if !have[k] {
			t.Errorf("the Kind filter lacks %s (has %d kinds)", k, len(kinds))
		}
	}
	if n := b.Count("#events-kind optgroup"); n < 8 {
		t.Errorf("the Kind filter has %d groups", n)
	}
	if b.Text(`#events-kind option:checked`) == "" || p2Value(b, "#events-kind") != "job.update" {
		t.Errorf("the Kind filter does not show the kind of the link: %q", p2Value(b, "#events-kind"))
	}
	// Times inside messages (a point's time) are in the same zone: no "UTC" text left in a message but in titles.
	if re := regexp.MustCompile(`\d{2}:\d{2}:\d{2} UTC`); re.MatchString(msg) {
		t.Errorf("the message shows a UTC time: %q", msg)
	}
}
