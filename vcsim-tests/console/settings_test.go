package console

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp/kb"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestSettings: an API token is created (its secret shown once, and it
// works), revoked after a confirmation (Escape keeps it); a user is created
// (bad input shown per field), can log in with its role, and is deleted;
// the time zone is saved; the vCenter and SMTP tests answer.
func TestSettings(t *testing.T) {
	b := signedIn(t)
	b.Go("#/settings")
	pageTitle(t, b, "Settings")
	b.WaitVisible("#tokens-create")

	// API token: shown once, works as a bearer token.
	b.Click(`#tokens-create button[type=submit]`)
	b.WaitText("#tokens-create .field-error", "Required.")
	b.Fill("#token-name", "console-test")
	b.Select("#token-role", "restore-only")
	b.Click(`#tokens-create button[type=submit]`)
	b.WaitVisible("#token-secret")
	secret := browsertest.Eval[string](b, `document.getElementById("token-secret").value`)
	if len(secret) < 20 {
		t.Fatalf("token secret %q", secret)
	}
	b.WaitText("#tokens-list td", "console-test")
	who := browsertest.Eval[apiAnswer[map[string]any]](b, fmt.Sprintf(`(async () => { const r = await fetch("/api/v1/auth/me", {headers: {Authorization: "Bearer " + %q}, credentials: "omit"}); return {status: r.status, body: await r.json()}; })()`, secret))
	if who.Status != 200 || who.Body["role"] != "restore-only" {
		t.Errorf("the new token: GET /auth/me status %d, body %v", who.Status, who.Body)
	}

	// Revoke, with the keyboard: Escape keeps it, Tab to Revoke + Enter revokes.
	revoke := `[aria-label="Revoke token console-test"]`
	browsertest.Eval[bool](b, fmt.Sprintf(`(document.querySelector(%q).focus(), true)`, revoke))
	b.Keys(kb.Enter)
	b.WaitJS(`document.getElementById("confirm").open`, "the confirmation dialog")
	b.Keys(kb.Escape)
	b.WaitJS(`!document.getElementById("confirm").open`, "the dialog closed")
	if f := b.Focused(); f == "body" {
		t.Errorf("focus lost after Escape (want it back on the Revoke button)")
	}
	b.WaitText("#tokens-list td", "console-test")
	browsertest.Eval[bool](b, fmt.Sprintf(`(document.querySelector(%q).focus(), true)`, revoke))
	b.Keys(kb.Enter)
	b.WaitJS(`document.getElementById("confirm").open`, "the confirmation dialog")
	b.Keys(kb.Tab)
	if f := b.Focused(); f != "#confirm-ok" {
		t.Fatalf("Tab in the dialog: focus on %s, want #confirm-ok", f)
	}
	b.Keys(kb.Enter)
	b.WaitText(".toast", "Token console-test revoked.")
	b.WaitJS(`!document.querySelector('[aria-label="Revoke token console-test"]')`, "the token gone from the list")

	// Users: client-side checks, a server-side field error, create, log in, delete.
	b.Fill("#user-new-name", "op1")
	b.Fill("#user-new-pass", "short")
	b.Click(`#users-create button[type=submit]`)
	b.WaitText("#users-create .field-error", "At least 8 characters.")
	b.Fill("#user-new-name", "bad name with spaces")
	b.Fill("#user-new-pass", "operator-password-1")
	b.Click(`#users-create button[type=submit]`)
	b.WaitJS(`!!document.querySelector('#users-create .field-error, #users-create .form-error')`, "the server's error for a bad user name")
	b.Fill("#user-new-name", "console-op")
	b.Select("#user-new-role", "operator")
	b.Click(`#users-create button[type=submit]`)
	b.WaitText(".toast", "User console-op added.")
	b.WaitText("#users-list td", "console-op")

	// An administrator sets the new user's password; the user logs in with it.
	b.Click(`[aria-label="Set the password of console-op"]`)
	b.WaitVisible("#user-set-pass")
	if f := b.Focused(); f != "#user-set-pass" {
		t.Errorf("Set password: focus on %s, want the password field", f)
	}
	b.Fill("#user-set-pass", "operator-password-2")
	b.Keys(kb.Enter)
	b.WaitText(".toast", "Password of console-op changed.")

	op := browsertest.New(t, demo.URL)
	op.Login("console-op", "operator-password-2")
	op.WaitText("#user-role", "operator")
	op.Go("#/settings")
	pageTitle(t, op, "Settings")
	op.WaitText(".page", "Only administrators can change settings.")
	if n := op.Count("#tokens-create, #users-create"); n != 0 {
		t.Errorf("an operator sees %d administrator forms", n)
	}
	op.Go("#/inventory")
	op.WaitVisible(`li[data-vm="web-01"] .backup-now`) // operators may back up

	b.Click(`[aria-label="Delete user console-op"]`)
	b.WaitJS(`document.getElementById("confirm").open`, "the confirmation dialog")
	b.Click("#confirm-ok")
	b.WaitText(".toast", "User console-op deleted.")
	b.WaitJS(`!document.querySelector('[aria-label="Delete user console-op"]')`, "the user gone from the list")

	// General settings: a time zone that does not exist is refused here; a real one is saved.
	b.Fill("#settings-tz", "Mars/Olympus")
	b.Click(`#settings-general button[type=submit]`)
	b.WaitText("#settings-general .field-error", "Choose a time zone")
	b.Fill("#settings-tz", "Europe/Paris")
	b.Click(`#settings-general button[type=submit]`)
	b.WaitText(".toast", "Settings saved.")
	st := browsertest.Eval[apiAnswer[map[string]any]](b, apiJS("GET", "/settings", ""))
	if st.Body["timeZone"] != "Europe/Paris" {
		t.Errorf("settings after save: %v", st.Body)
	}
	b.Fill("#settings-tz", "UTC")
	b.Click(`#settings-general button[type=submit]`)
	b.WaitJS(`[...document.querySelectorAll(".toast")].filter(t => t.textContent.includes("Settings saved.")).length >= 1`, "saved again")

	// vCenter test (the demo's lab vCenter) and SMTP test (not configured in the demo).
	b.Click("#vc-test")
	b.WaitJS(`document.getElementById("vc-result").textContent.trim().length > 0`, "a vCenter test result")
	b.Fill("#smtp-to", "not-an-address")
	b.Click("#smtp-test")
	b.WaitText("#settings-smtp .field-error", "One e-mail address")
	b.Fill("#smtp-to", "ops@example.com")
	b.Click("#smtp-test")
	b.WaitJS(`document.getElementById("smtp-result").textContent.trim().length > 0`, "an SMTP test result")
	t.Logf("vCenter test: %s; SMTP test: %s", b.Text("#vc-result"), b.Text("#smtp-result"))
}
