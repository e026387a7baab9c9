package console

import (
	"testing"

	"github.com/chromedp/chromedp/kb"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestLogin: errors are shown, the session survives a reload, logout and an
// expired session both lead back to the login page with a message, and after
// signing in again the user is back where they were.
func TestLogin(t *testing.T) {
	b := browsertest.New(t, demo.URL)
	b.Go("/")
	b.WaitVisible("#login-user")
	if f := b.Focused(); f != "#login-user" {
		t.Errorf("focus on the login page: %s, want #login-user", f)
	}
	if !browsertest.Eval[bool](b, `document.getElementById("nav").hidden`) {
		t.Error("the navigation is shown before signing in")
	}

	// Client-side validation: both fields are required.
	b.Click(".login-form button[type=submit]")
	b.WaitText(".login-form .field-error", "Enter your username.")
	b.WaitText(".login-form .field-error", "Enter your password.")
	if f := b.Focused(); f != "#login-user" {
		t.Errorf("focus after a failed submit: %s, want the first bad field", f)
	}

	// Wrong password: the server's answer, in words.
	b.Fill("#login-user", demo.LoginUser)
	b.Fill("#login-pass", "not-the-password")
	b.Click(".login-form button[type=submit]")
	b.WaitText(".login-form .form-error", "Wrong username or password.")
	if v := browsertest.Eval[string](b, `document.getElementById("login-pass").value`); v != "" {
		t.Error("the password field keeps the wrong password")
	}

	b.Fill("#login-pass", demo.LoginPassword)
	b.Click(".login-form button[type=submit]")
	pageTitle(t, b, "Dashboard")
	b.WaitText("#user-name", demo.LoginUser)
	b.WaitText("#user-role", "administrator")

	b.Reload()
	pageTitle(t, b, "Dashboard")

	b.Click("#logout")
	b.WaitText(".login-form .notice", "You have signed out.")
	b.Go("#/events")
	b.WaitVisible("#login-user") // no page without a session

	// An expired session (ended on the server) sends the user to the login
	// page on their next request, and back to their page after signing in.
	b.Fill("#login-user", demo.LoginUser)
	b.Fill("#login-pass", demo.LoginPassword)
	b.Click(".login-form button[type=submit]")
	pageTitle(t, b, "Events")
	if a := browsertest.Eval[apiAnswer[any]](b, apiJS("POST", "/auth/logout", "")); a.Status != 204 {
		t.Fatalf("logout through the API: status %d", a.Status)
	}
	b.Go("#/tasks")
	b.WaitText(".login-form .notice", "Your session has expired")
	b.Fill("#login-user", demo.LoginUser)
	b.Fill("#login-pass", demo.LoginPassword)
	b.Click(".login-form button[type=submit]")
	pageTitle(t, b, "Tasks")
}

// TestKeyboardLogin signs in and moves around with the keyboard only.
func TestKeyboardLogin(t *testing.T) {
	b := browsertest.New(t, demo.URL)
	b.Go("/#/login")
	b.WaitVisible("#login-user")
	if f := b.Focused(); f != "#login-user" {
		t.Fatalf("focus on the login page: %s, want #login-user", f)
	}
	b.Keys(demo.KeyboardUser)
	b.Keys(kb.Tab)
	if f := b.Focused(); f != "#login-pass" {
		t.Fatalf("Tab from the username: focus on %s, want #login-pass", f)
	}
	b.Keys(demo.KeyboardPassword)
	b.Keys(kb.Enter)
	pageTitle(t, b, "Dashboard")
	if f := b.Focused(); f != "#page-title" {
		t.Errorf("after signing in the focus is on %s, want the page title", f)
	}

	// Shift+Tab from the page title walks back through the navigation to
	// the skip link; Enter on it focuses the page title again.
	// Bounded by the navigation's length (13 entries), Sign out and the brand.
	for i := 0; i < 25 && b.Focused() != "#skip-link"; i++ {
		b.ShiftTab()
	}
	if f := b.Focused(); f != "#skip-link" {
		t.Fatalf("Shift+Tab never reached the skip link (focus on %s)", f)
	}
	if !browsertest.Eval[bool](b, `getComputedStyle(document.activeElement).outlineStyle !== "none" && document.activeElement.getBoundingClientRect().top >= 0`) {
		t.Error("the focused skip link is not visible with an outline")
	}
	b.Keys(kb.Enter)
	if f := b.Focused(); f != "#page-title" {
		t.Errorf("Enter on the skip link: focus on %s, want #page-title", f)
	}

	// Tab through the navigation to the Events link and follow it with Enter.
	browsertest.Eval[bool](b, `(document.querySelector(".brand").focus(), true)`)
	for i := 0; i < 25 && b.Focused() != `a Events`; i++ {
		b.Keys(kb.Tab)
	}
	if f := b.Focused(); f != "a Events" {
		t.Fatalf("Tab never reached the Events link (focus on %s)", f)
	}
	b.Keys(kb.Enter)
	pageTitle(t, b, "Events")
	if f := b.Focused(); f != "#page-title" {
		t.Errorf("after following a link the focus is on %s, want the page title", f)
	}
}

// TestLoginPageHasNoSignOut: before anyone signed in there is nothing to
// sign out of. The header's user box (name, role, "Sign out") showed on the
// login page because `.topbar .user { display: flex }` beat its hidden
// attribute.
func TestLoginPageHasNoSignOut(t *testing.T) {
	for _, vp := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		b := browsertest.New(t, demo.URL)
		b.Viewport(vp.w, vp.h)
		b.Go("/")
		b.WaitVisible("#login-user")
		if browsertest.Eval[bool](b, shownJS("logout")) {
			t.Errorf("at %dx%d the login page shows a %q button", vp.w, vp.h, b.Text("#logout"))
		}
		if browsertest.Eval[bool](b, shownJS("user")) {
			t.Errorf("at %dx%d the login page shows the signed-in user box", vp.w, vp.h)
		}
		b.CheckConsole()
	}
	// Signed in, the button is there.
	b := signedIn(t)
	if !browsertest.Eval[bool](b, shownJS("logout")) {
		t.Error("the signed-in console shows no Sign out button")
	}
	b.CheckConsole()
}
