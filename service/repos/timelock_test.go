package repos

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web/api"
)

// A time lock through the set: the point shows lockedUntil, and neither an
// unlock nor a delete goes through before the date; the refusal names it.
func TestSetTimeLockRefusesUnlockAndDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.points[1].ID
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	if err := f.set.LockUntil(ctx, id[:12], until); err != nil {
		t.Fatal(err)
	}
	p, err := f.set.Point(ctx, id)
	if err != nil || !p.Locked || !p.LockedUntil.Equal(until) {
		t.Fatalf("time-locked point: locked %v until %v (want %v): %v", p.Locked, p.LockedUntil, until, err)
	}
	date := until.Format(time.RFC3339)
	for name, op := range map[string]func() error{
		"unlock": func() error { return f.set.SetLocked(ctx, id, false) },
		"delete": func() error { return f.set.Delete(ctx, id) },
	} {
		err := op()
		var ple *repository.PointLockedError
		if !errors.Is(err, api.ErrPointLocked) || !errors.As(err, &ple) || !ple.Until.Equal(until) || !strings.Contains(err.Error(), date) {
			t.Errorf("%s a time-locked point: %v, want point_locked naming %s", name, err, date)
		}
	}
	// Still there and still locked: the refused unlock changed nothing.
	p, err = f.set.Point(ctx, id)
	if err != nil || !p.Locked || !p.LockedUntil.Equal(until) {
		t.Fatalf("after the refusals: locked %v until %v: %v", p.Locked, p.LockedUntil, err)
	}
	// A shorter time lock is refused too; a plain point still unlocks.
	if err := f.set.LockUntil(ctx, id, until.Add(-time.Hour)); !errors.Is(err, api.ErrPointLocked) {
		t.Errorf("shorten a time lock: %v", err)
	}
	other := f.points[0].ID
	if err := f.set.SetLocked(ctx, other, true); err != nil {
		t.Fatal(err)
	}
	if err := f.set.SetLocked(ctx, other, false); err != nil {
		t.Fatalf("unlock a plainly locked point: %v", err)
	}
	if err := f.set.LockUntil(ctx, "0123456789abcdef", until); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("time lock of an unknown point: %v", err)
	}
}
