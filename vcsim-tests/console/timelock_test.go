package console

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTimeLockRefusesUnlock time-locks a restore point from the restore
// points page (the dialog's date field), sees the badge "locked until
// DATE", then clicks Unlock and sees the server's refusal naming the date;
// the point is still time-locked afterwards. The administrator's session
// is used: no role may unlock a time lock before its date.
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

	// Unlock is offered (the point is locked) and refused by the server with the date.
	b.Click(row + ` button[data-action=unlock]`)
	b.WaitText(fmt.Sprintf("#msg-%s", id), "Could not unlock")
	msg := b.Text(fmt.Sprintf("#msg-%s", id))
	if !strings.Contains(msg, p.LockedUntil.UTC().Format(time.RFC3339)) {
		t.Errorf("the refusal does not name the date %s: %q", p.LockedUntil.UTC().Format(time.RFC3339), msg)
	}
	if st := p2API(t, b, "POST", "/restore-points/"+id+"/unlock", nil, nil); st != 409 {
		t.Errorf("unlock through the API: %d, want 409", st)
	}
	if st := p2API(t, b, "DELETE", "/restore-points/"+id, nil, nil); st != 409 {
		t.Errorf("delete through the API: %d, want 409", st)
	}
	if st := p2API(t, b, "GET", "/restore-points/"+id, nil, &p); st != 200 || !p.Locked {
		t.Fatalf("after the refused unlock: status %d, locked %v", st, p.Locked)
	}
	b.CheckConsole()
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
