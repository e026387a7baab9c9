package console

import (
	"fmt"
	"testing"
	"time"
)

// TestRepositoryCheck opens the demo's repository from the list (its
// usage chart and ratios), runs a check from its page to completion and sees
// the result and the last check recorded, then a reclaim after confirming
// it.
func TestRepositoryCheck(t *testing.T) {
	b := signedIn(t)
	var repos []struct {
		Name string `json:"name"`
	}
	if st := p2API(t, b, "GET", "/repositories", nil, &repos); st != 200 || len(repos) == 0 {
		t.Fatalf("GET /repositories: %d %v", st, repos)
	}
	b.Go("#/repositories")
	b.WaitText("#repositories-table", repos[0].Name)
	b.Click(fmt.Sprintf(`#repositories-table tr[data-repository=%q] a`, repos[0].Name))
	b.WaitText("#page-title", "Repository: "+repos[0].Name)
	b.WaitVisible(".usage-chart")
	b.WaitJS(`document.querySelectorAll(".usage-chart circle").length > 0`, "usage samples in the chart")
	b.WaitText("#repo-dedup", "×")
	b.Click("#run-check")
	b.WaitVisible("#check-progress")
	p2WaitJS(b, 2*time.Minute, p2Progress("#check-progress"), "the check's progress at 100%, succeeded")
	b.WaitText("#check-result", "no problems found")
	b.WaitText("#last-check", "no problems found")

	// Reclaim says beforehand what it would free, asks, then runs to the end.
	if got := b.Text("#repo-reclaimable"); got == "" || got == "–" {
		t.Errorf("reclaim would free: %q", got)
	}
	b.WaitText("#reclaim-info", "Reclaim removes the data of deleted restore points")
	b.Click("#run-reclaim")
	b.WaitVisible("#confirm[open]")
	b.Click("#confirm-ok")
	b.WaitVisible("#reclaim-progress")
	p2WaitJS(b, 2*time.Minute, p2Progress("#reclaim-progress"), "the reclaim's progress at 100%, succeeded")
	b.WaitText("#reclaim-result", "Reclaim finished")
	b.CheckConsole()
}
