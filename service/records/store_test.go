package records

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

func openStore(t *testing.T) (*Store, *state.DB) {
	t.Helper()
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return New(db), db
}

// An unknown job is api's not found and still state's; the message is state's.
func TestUnknownJob(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	_, err := s.Job(ctx, "nope")
	if !errors.Is(err, api.ErrNotFound) || !errors.Is(err, state.ErrNotFound) || err.Error() != "job nope: not found" {
		t.Fatalf("job: %v", err)
	}
	if err := s.DeleteJob(ctx, "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("delete: %v", err)
	}
}

// The API's event filter reaches the database field for field.
func TestEventsFilter(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i, e := range []policy.Event{
		{Kind: "restore.vm", User: "ann", Outcome: "ok", Severity: policy.SeverityInfo, Job: "j1", VM: "u1"},
		{Kind: "restore.disk", User: "bob", Outcome: "failed", Severity: policy.SeverityError, Job: "j1", VM: "u1"},
		{Kind: "job.run", Severity: policy.SeverityWarning, Job: "j2", VM: "u2"},
	} {
		e.Time = base.Add(time.Duration(i) * time.Minute)
		if err := s.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		q    api.EventQuery
		want []string // kinds, oldest first
	}{
		{"all", api.EventQuery{}, []string{"restore.vm", "restore.disk", "job.run"}},
		{"kind prefix", api.EventQuery{Kind: "restore"}, []string{"restore.vm", "restore.disk"}},
		{"user", api.EventQuery{User: "bob"}, []string{"restore.disk"}},
		{"outcome", api.EventQuery{Outcome: "ok"}, []string{"restore.vm"}},
		{"severity", api.EventQuery{MinSeverity: policy.SeverityWarning}, []string{"restore.disk", "job.run"}},
		{"job and vm", api.EventQuery{Job: "j2", VM: "u2"}, []string{"job.run"}},
		{"from", api.EventQuery{From: base.Add(time.Minute)}, []string{"restore.disk", "job.run"}},
		{"to", api.EventQuery{To: base.Add(time.Minute)}, []string{"restore.vm"}},
		{"limit", api.EventQuery{Limit: 1}, nil},
	} {
		evs, err := s.Events(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.name == "limit" {
			if len(evs) != 1 {
				t.Errorf("limit: %d events", len(evs))
			}
			continue
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Kind)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}
