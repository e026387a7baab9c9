package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestAccessibility walks every page in the navigation (this package's and
// the others') and the login page: every visible control has an accessible
// name, ids are unique, one h1, one main landmark.
func TestAccessibility(t *testing.T) {
	b := browsertest.New(t, demo.URL)
	b.Go("/#/login")
	b.WaitVisible("#login-user")
	if p := b.A11yProblems(); len(p) > 0 {
		t.Errorf("login page:\n  %s", strings.Join(p, "\n  "))
	}

	b = signedIn(t)
	routes := browsertest.Eval[[]string](b, `[...document.querySelectorAll("#nav-list a")].map(a => a.getAttribute("href"))`)
	if len(routes) < 5 {
		t.Fatalf("navigation lists %d pages: %v", len(routes), routes)
	}
	for _, r := range routes {
		b.Go(r)
		b.WaitJS(`!!document.getElementById("page-title") && !document.querySelector("main .loading")`, "page "+r)
		// Let the page load its data and draw its controls.
		b.WaitJS(`new Promise(res => setTimeout(() => res(true), 300))`, "settle")
		if p := b.A11yProblems(); len(p) > 0 {
			t.Errorf("%s:\n  %s", r, strings.Join(p, "\n  "))
		}
	}
}

// TestPagesAccessibility runs the harness's accessibility audit (named
// controls, unique ids, one h1 and main) and its layout check (no wrapped
// labels, no displayed [hidden] element) on every step of the job and
// restore wizards and on the pages the navigation does not list.
func TestPagesAccessibility(t *testing.T) {
	b := signedIn(t)
	audit := func(where string) {
		t.Helper()
		if p := b.A11yProblems(); len(p) > 0 {
			t.Errorf("%s:\n  %s", where, strings.Join(p, "\n  "))
		}
		// The wizards' steps look whole too: no wrapped button or badge,
		// no displayed [hidden] element (TestLayoutEveryPage's check).
		if p := b.LayoutProblems(); len(p) > 0 {
			t.Errorf("%s (layout):\n  %s", where, strings.Join(p, "\n  "))
		}
	}
	job, repo := p2DemoJobAndRepo(t, b)
	b.Go("#/jobs/" + job)
	b.WaitVisible(".p2-run, .p2-history .empty")
	audit("job page")
	b.Go("#/repositories/" + repo)
	b.WaitVisible(".usage-chart")
	audit("repository page")

	b.Go("#/job-wizard")
	b.WaitVisible("#job-name")
	b.Fill("#job-name", "a11y")
	for _, step := range []string{"basics", "vms", "repository", "schedule", "retention", "preview", "summary"} {
		b.WaitVisible(fmt.Sprintf(`.p2-step-panel[data-step=%s]:not([hidden])`, step))
		if step == "preview" {
			b.WaitText("#preview-summary", "Would keep")
		}
		audit("job wizard step " + step)
		if step == "vms" {
			b.Click(`.p2-tree li[data-name="web-01"] > .p2-tree-line > input[data-node]`)
		}
		if step != "summary" {
			b.Click("#wizard-next")
		}
	}

	b.Go("#/restore")
	b.WaitVisible(`input[name=vm][data-name="web-01"]`)
	audit("restore: VM")
	b.Click(`input[name=vm][data-name="web-01"]`)
	b.Click("#restore-vm .p2-next")
	b.WaitVisible(`#restore-point input[name=point]`)
	audit("restore: point")
	b.Click(`#restore-point input[name=point]`)
	b.Click("#restore-point .p2-next")
	b.WaitVisible("#mode-new")
	audit("restore: mode")
	b.Click("#restore-mode .p2-next")
	b.WaitVisible("#restore-ds")
	audit("restore: target")
	b.Click("#restore-target .p2-next")
	b.WaitVisible("#restore-choices")
	audit("restore: summary")
}
