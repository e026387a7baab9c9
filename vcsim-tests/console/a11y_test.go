package console

import (
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
