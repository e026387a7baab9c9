package console

import (
	"strings"
	"testing"
)

// TestJobPageShowsScripts: a job's appliance-side scripts (set through the
// API) are listed read-only on its page with their timeout and failure
// policy, defaults filled in; unset hooks are not listed.
func TestJobPageShowsScripts(t *testing.T) {
	b := signedIn(t)
	_, repo := p2DemoJobAndRepo(t, b)
	web01 := p2VMUUID(t, b, "web-01")
	id := p2Unique("scripts")
	job := map[string]any{
		"id": id, "name": "Scripts " + id[len(id)-6:], "enabled": false, "repository": repo,
		"selection": map[string]any{"vms": []string{web01}},
		"window":    map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"01:00-02:00"}}},
		"retention": map[string]any{"last": 3},
		"scripts": map[string]any{
			"preVM":   map[string]any{"command": []string{"/usr/local/bin/db-freeze", "--all"}, "timeoutSeconds": 120},
			"postJob": map[string]any{"command": []string{"logger", "done"}, "onFailure": "fail"},
		},
	}
	if st := p2API(t, b, "POST", "/jobs", job, nil); st != 201 {
		t.Fatalf("POST /jobs: %d", st)
	}
	t.Cleanup(func() { p2API(t, b, "DELETE", "/jobs/"+id, nil, nil) })
	b.Go("#/jobs/" + id)
	b.WaitText(".p2-dl", "Pre-VM script/usr/local/bin/db-freeze --all (timeout 120 s, on failure: fail)")
	b.WaitText(".p2-dl", "Post-job scriptlogger done (timeout 300 s, on failure: fail)")
	if got := b.Text(".p2-dl"); strings.Contains(got, "Pre-job script") || strings.Contains(got, "Post-VM script") {
		t.Errorf("unset hooks listed: %q", got)
	}
	b.CheckConsole()
}
