package console

import (
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// shownJS is true when the element with id takes space on the page (the
// hidden attribute alone is not enough: a CSS display rule overrides it).
func shownJS(id string) string {
	return `(() => { const e = document.getElementById("` + id + `"); if (!e) return false;
		const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden"; })()`
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

// TestOverwriteRestoreDoesNotPrePowerOff: powering a production VM off is
// the administrator's decision; the overwrite step used to arrive with
// "Power the VM off first" already ticked.
func TestOverwriteRestoreDoesNotPrePowerOff(t *testing.T) {
	b := signedIn(t)
	var vms []struct {
		InstanceUUID string `json:"instanceUuid"`
		Name         string `json:"name"`
	}
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	uuid := ""
	for _, v := range vms {
		if v.Name == "web-01" {
			uuid = v.InstanceUUID
		}
	}
	if uuid == "" {
		t.Fatalf("no web-01 in %+v", vms)
	}
	b.Go("#/restore?vm=" + uuid)
	b.WaitVisible(`#restore-point input[name=point]`)
	b.Click(`#restore-point input[name=point]`)
	b.Click("#restore-point .p2-next")
	b.WaitVisible("#mode-original")
	b.Click(`label[for="mode-original"]`)
	b.Click("#restore-mode .p2-next")
	b.WaitVisible("#power-off")
	if browsertest.Eval[bool](b, `document.getElementById("power-off").checked`) {
		t.Error(`"Power the VM off first" is ticked before the administrator chose it`)
	}
	summary := func(want string) {
		t.Helper()
		b.WaitJS(`(() => { const s = document.getElementById("restore-start"); return !!s && s.closest("form").innerText.includes(`+"`"+want+"`"+`); })()`,
			"the summary saying "+want)
	}
	b.Fill("#confirm-name", "web-01")
	b.Click("#restore-target .p2-next")
	summary("leave as is")
	// Ticked on purpose (Back from the summary), the summary says so.
	b.Click("#restore-start ~ .p2-back, .p2-wizard-nav:has(#restore-start) .p2-back")
	b.WaitVisible("#power-off")
	if browsertest.Eval[bool](b, `document.getElementById("power-off").checked`) {
		t.Error(`"Power the VM off first" is ticked after Back although it was left unticked`)
	}
	b.Click(`label[for="power-off"]`)
	b.Click("#restore-target .p2-next")
	summary("power off first")
	b.CheckConsole()
}
