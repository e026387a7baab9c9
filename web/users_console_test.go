package web

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/browsertest"
)

// The console (served by this package's handler, in Chromium) after an
// import: the sign-in page says why an imported user's login fails; the
// users table marks alice "Password not set" with Set password as its
// primary action; an administrator sets it there, the badge goes, and
// alice signs in with it.
func TestConsoleUsersPasswordNotSet(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: not in -short")
	}
	f := newFixture(t, nil)
	// The session cookie's lifetime is counted from the wall clock (the
	// browser's): the fixture's fake clock must not be in the past.
	f.clk.Set(time.Now())
	if _, err := f.srv.cfg.Auth.ImportUser(context.Background(), "alice", auth.RoleOperator, auth.SourceLocal); err != nil {
		t.Fatal(err)
	}

	who := browsertest.New(t, f.http.URL)
	who.Allow("401") // the refused sign-in below is the point
	who.Go("/#/login")
	who.WaitVisible("#login-user")
	who.Fill("#login-user", "alice")
	who.Fill("#login-pass", "alice-old-password")
	who.Click(".login-form button[type=submit]")
	who.WaitText(".login-form .form-error", "ask an administrator to set yours")

	b := browsertest.New(t, f.http.URL)
	b.Login("admin", testAdminPassword)
	b.Go("#/settings")
	b.WaitText("#users-list td", "alice")
	b.WaitText("#users-list .user-nopass", "Password not set")
	if n := b.Count("#users-list .user-nopass"); n != 1 {
		t.Fatalf("%d users marked, want alice only", n)
	}
	if !browsertest.Eval[bool](b, `document.querySelector('[aria-label="Set the password of alice"]').classList.contains("primary")`) {
		t.Error("Set password is not alice's primary action")
	}
	b.Click(`[aria-label="Set the password of alice"]`)
	b.WaitVisible("#user-set-pass")
	b.Fill("#user-set-pass", "alice-password-2")
	b.Keys(kb.Enter)
	b.WaitText(".toast", "Password of alice set: they can sign in now.")
	b.WaitGone("#users-list .user-nopass")

	who.Fill("#login-user", "alice")
	who.Fill("#login-pass", "alice-password-2")
	who.Click(".login-form button[type=submit]")
	who.WaitText("#user-name", "alice")
	who.WaitText("#user-role", "operator")
}
