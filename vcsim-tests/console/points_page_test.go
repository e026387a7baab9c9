package console

import (
	"fmt"
	"testing"
)

// TestLockedPointRefusesDelete locks a restore point on the restore
// points page, sees its Delete refused with the reason, checks that the
// server refuses the deletion too and that the point is still there, then
// unlocks it.
func TestLockedPointRefusesDelete(t *testing.T) {
	b := signedIn(t)
	b.Go("#/restore-points")
	b.WaitVisible(`button[data-action=lock]`)
	id := p2Attr(b, `button[data-action=lock]`, "data-point")
	if id == "" {
		t.Fatal("no lockable restore point")
	}
	row := fmt.Sprintf(`tr[data-point=%q]`, id)
	b.Click(row + ` button[data-action=lock]`)
	b.WaitVisible(row + `[data-locked="true"]`)
	b.WaitText(row, "locked")
	b.WaitText("#points-status", "locked")

	// Delete on a locked point explains instead of asking.
	b.Click(row + ` button[data-action=delete]`)
	b.WaitText(fmt.Sprintf("#msg-%s", id), "cannot be deleted")
	if n := b.Count("#confirm[open]"); n != 0 {
		t.Fatal("the confirmation dialog opened for a locked point")
	}
	if got := p2Attr(b, row+` button[data-action=delete]`, "aria-disabled"); got != "true" {
		t.Errorf("Delete of a locked point: aria-disabled = %q, want true", got)
	}
	// The server refuses it as well, and the point stays.
	if st := p2API(t, b, "DELETE", "/restore-points/"+id, nil, nil); st != 409 {
		t.Errorf("DELETE a locked point: status %d, want 409", st)
	}
	var p struct {
		Locked bool `json:"locked"`
	}
	if st := p2API(t, b, "GET", "/restore-points/"+id, nil, &p); st != 200 || !p.Locked {
		t.Fatalf("the locked point after a refused delete: status %d, locked %v", st, p.Locked)
	}

	b.Click(row + ` button[data-action=unlock]`)
	b.WaitVisible(row + `[data-locked="false"]`)
	if st := p2API(t, b, "GET", "/restore-points/"+id, nil, &p); st != 200 || p.Locked {
		t.Fatalf("after unlock: status %d, locked %v", st, p.Locked)
	}
	b.CheckConsole()
}
