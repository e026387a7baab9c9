package console

import (
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestPagesAtSizes opens every page of this package's shell at 1440x900 and
// 400x800: each renders its title without console errors or horizontal
// scrolling of the page; at 400 px the navigation folds behind a Menu button.
func TestPagesAtSizes(t *testing.T) {
	b := signedIn(t)
	pages := []struct{ hash, title, ready string }{
		{"#/dashboard", "Dashboard", "#dashboard-repos table, #dashboard-repos .empty"},
		{"#/inventory", "Inventory", "#inventory-tree li, #inventory-tree .empty"},
		{"#/tasks", "Tasks", "#tasks-list table, #tasks-list .empty"},
		{"#/events", "Events", "#events-list table, #events-list .empty"},
		{"#/settings", "Settings", "#tokens-list table, #tokens-list .empty"},
	}
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		b.Viewport(size.w, size.h)
		for _, p := range pages {
			b.Go(p.hash)
			pageTitle(t, b, p.title)
			b.WaitVisible(p.ready)
			if f := b.Focused(); f != "#page-title" {
				t.Errorf("%s at %dpx: focus on %s after the route change, want the page title", p.hash, size.w, f)
			}
			if over := browsertest.Eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); over > 1 {
				t.Errorf("%s at %dpx: the page scrolls sideways by %d px", p.hash, size.w, over)
			}
			b.CheckConsole()
		}
		narrow := size.w < 700
		menuShown := browsertest.Eval[bool](b, `!document.getElementById("nav-toggle").hidden && getComputedStyle(document.getElementById("nav-toggle")).display !== "none"`)
		navShown := browsertest.Eval[bool](b, `getComputedStyle(document.getElementById("nav")).display !== "none"`)
		if narrow != menuShown || narrow == navShown {
			t.Errorf("at %dpx: menu button shown %v, navigation shown %v", size.w, menuShown, navShown)
		}
		if narrow {
			b.Click("#nav-toggle")
			b.WaitVisible(`#nav a[href="#/events"]`)
			b.Click(`#nav a[href="#/events"]`)
			pageTitle(t, b, "Events")
			if browsertest.Eval[bool](b, `getComputedStyle(document.getElementById("nav")).display !== "none"`) {
				t.Errorf("at %dpx: the navigation stays open after choosing a page", size.w)
			}
		}
	}
	b.Go("#/no-such-page")
	pageTitle(t, b, "Not found")
	// A reload on a client route serves the console again.
	b.Go("/#/tasks")
	pageTitle(t, b, "Tasks")
	if !strings.Contains(b.URL(), "#/tasks") {
		t.Errorf("URL after reload: %s", b.URL())
	}
}
