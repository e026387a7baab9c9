package console

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestTimeLockRefusesUnlock time-locks a restore point from the restore
// points page (the dialog's date field) and sees the badge "locked until
// DATE". A time lock cannot be removed before its date by anyone, so the
// row offers no Unlock, and its Delete says until when in the console's
// words. A page that still shows Unlock (the point was time-locked
// elsewhere meanwhile) gets the server's 409 in words too, no 64-digit id
// nor RFC 3339 time, and the message stays when the list is drawn again.
func TestTimeLockRefusesUnlock(t *testing.T) {
	b := signedIn(t)
	b.Go("#/restore-points")
	b.WaitVisible(`button[data-action=timelock]`)
	// An unlocked point, so that the other tests' plain locks are not disturbed.
	id := p2Attr(b, `tr[data-locked="false"] button[data-action=timelock]`, "data-point")
	if id == "" {
		t.Fatal("no unlocked restore point to time-lock")
	}
	row := fmt.Sprintf(`tr[data-point=%q]`, id)
	b.Click(row + ` button[data-action=timelock]`)
	b.WaitVisible(`#timelock[open] #timelock-until`)
	// Two days ahead: the dialog's date field allows tomorrow on.
	day := time.Now().AddDate(0, 0, 2).Format("2006-01-02")
	b.SetValue("#timelock-until", day)
	b.Click("#timelock-ok")
	b.WaitGone("#timelock")
	b.WaitVisible(row + `[data-locked="true"] [data-locked-until]`)
	b.WaitText(row, "locked until")
	b.WaitText("#points-status", "locked until")

	var p struct {
		Locked      bool      `json:"locked"`
		LockedUntil time.Time `json:"lockedUntil"`
	}
	if st := p2API(t, b, "GET", "/restore-points/"+id, nil, &p); st != 200 || !p.Locked || p.LockedUntil.IsZero() {
		t.Fatalf("after the time lock: status %d, %+v", st, p)
	}
	if got := p.LockedUntil.In(time.Local).Format("2006-01-02"); got != day {
		t.Errorf("locked until %s (%s local), want the start of %s", p.LockedUntil, got, day)
	}

	// No Unlock on a time-locked point; Delete says until when.
	if n := b.Count(row + ` button[data-action=unlock]`); n != 0 {
		t.Errorf("a time-locked point offers Unlock")
	}
	b.Click(row + ` button[data-action=delete]`)
	b.WaitText(fmt.Sprintf("#msg-%s", id), "Time-locked until")
	readable(t, "Delete of a time-locked point", b.Text(fmt.Sprintf("#msg-%s", id)))

	if st := p2API(t, b, "POST", "/restore-points/"+id+"/unlock", nil, nil); st != 409 {
		t.Errorf("unlock through the API: %d, want 409", st)
	}
	if st := p2API(t, b, "DELETE", "/restore-points/"+id, nil, nil); st != 409 {
		t.Errorf("delete through the API: %d, want 409", st)
	}
	if st := p2API(t, b, "GET", "/restore-points/"+id, nil, &p); st != 200 || !p.Locked {
		t.Fatalf("after the refused unlock: status %d, locked %v", st, p.Locked)
	}

	// A second point, locked plainly on this page (it offers Unlock), then
	// time-locked through the API and unlocked from the page at once,
	// before the page hears of the time lock.
	other := p2Attr(b, `tr[data-locked="false"] button[data-action=lock]`, "data-point")
	if other == "" {
		t.Fatal("no second unlocked restore point")
	}
	orow := fmt.Sprintf(`tr[data-point=%q]`, other)
	b.Click(orow + ` button[data-action=lock]`)
	b.WaitVisible(orow + `[data-locked="true"] button[data-action=unlock]`)
	until := time.Now().AddDate(0, 0, 3).UTC().Truncate(time.Second).Format(time.RFC3339)
	st := browsertest.Eval[int](b, fmt.Sprintf(`(async () => { const r = await %s; document.querySelector(%q).click(); return r.status; })()`,
		apiJS("POST", "/restore-points/"+other+"/lock", fmt.Sprintf("JSON.stringify({until: %q})", until)), orow+` button[data-action=unlock]`))
	if st != 200 {
		t.Fatalf("time-lock %s through the API: %d", other, st)
	}
	msg := fmt.Sprintf("#msg-%s", other)
	b.WaitText(msg, "Could not unlock")
	readable(t, "the refused Unlock", b.Text(msg))
	if !strings.Contains(b.Text(msg), "Time-locked until") {
		t.Errorf("the refused Unlock does not say until when: %q", b.Text(msg))
	}
	b.WaitVisible(orow + ` [data-locked-until]`)
	if n := b.Count(orow + ` button[data-action=unlock]`); n != 0 {
		t.Errorf("Unlock still offered once the page knows of the time lock")
	}
	// The list is drawn again on the lock's event: the message stays.
	b.WaitJS(fmt.Sprintf(`(() => { const r = document.querySelector(%q); if (!r) return false; if (!window.__row) window.__row = r; return r !== window.__row; })()`, orow),
		"the list drawn again after the point events")
	if got := b.Text(msg); !strings.Contains(got, "Could not unlock") {
		t.Errorf("the refusal vanished when the list was drawn again: %q", got)
	}
	b.CheckConsole()
}

var (
	rfc3339 = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}`)
	longHex = regexp.MustCompile(`[0-9a-f]{64}`)
)

// readable fails when a message shows an RFC 3339 time or a 64-digit id.
func readable(t *testing.T, what, msg string) {
	t.Helper()
	if rfc3339.MatchString(msg) || longHex.MatchString(msg) {
		t.Errorf("%s shows machine words: %q", what, msg)
	}
}

// TestApprovalsPage opens the approvals page: without a delay configured
// (the demo's) nothing waits, and the page says so.
func TestApprovalsPage(t *testing.T) {
	b := signedIn(t)
	b.Go("#/approvals")
	pageTitle(t, b, "Approvals")
	b.WaitText("#approvals-body", "No destructive action is waiting")
	b.CheckConsole()
}
