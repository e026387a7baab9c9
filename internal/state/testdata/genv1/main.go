// Command genv1 wrote testdata/state-v1.db, the golden state database of
// schema version 1: every bucket the daemon kept in state.db before the
// schema had one owner, filled through the writers of that time
// (internal/state, internal/auth, internal/task, web's BoltSettings and the
// daemon's notify report log, whose raw RFC 3339 put is reproduced here as
// cmd/appliance/serve_notify.go did it).
//
// It only makes sense at a v1 commit (3f071f0 or earlier): later code writes
// the current schema. It lives under testdata so that ./... ignores it.
//
//	git worktree add /tmp/v1 3f071f0 && cp -r internal/state/testdata/genv1 /tmp/v1/internal/state/testdata/
//	cd /tmp/v1 && go run ./internal/state/testdata/genv1 /path/to/state-v1.db
//
// fixture_test.go holds the same values and checks every one of them after
// the migration.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web"
)

var t0 = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genv1 OUT.db")
		os.Exit(2)
	}
	if err := gen(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func gen(path string) error {
	ctx := context.Background()
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists", path)
	}
	db, err := state.Open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		return err
	}

	// internal/state: jobs, runs (one closed, one open), vmstate, maintenance, events, checkpoint.
	nightly := policy.NewJob("job-nightly", "Nightly", "main", paris)
	nightly.Selection = policy.Selection{VMs: []string{"5012a3b4-0000-0000-0000-000000000001", "5012a3b4-0000-0000-0000-000000000002"}, Tags: []string{"urn:vmomi:InventoryServiceTag:backup:GLOBAL"}}
	nightly.Description = "every VM tagged backup"
	weekly := policy.NewJob("job-weekly", "Weekly SQL", "offsite", paris)
	weekly.Selection = policy.Selection{VMs: []string{"5012a3b4-0000-0000-0000-000000000003"}, Exclude: policy.Exclusions{Names: []string{"*-test"}}}
	weekly.Enabled = false
	weekly.Priority = 5
	for _, j := range []policy.Job{nightly, weekly} {
		if err := db.PutJob(ctx, j); err != nil {
			return err
		}
	}
	closed := policy.JobRun{ID: "run-0001", Job: "job-nightly", WindowID: "job-nightly@2026-11-29T22:00:00Z", Start: t0.Add(-3 * time.Hour), End: t0.Add(-2 * time.Hour),
		VMs: []policy.VMOutcome{{VM: "5012a3b4-0000-0000-0000-000000000001", Name: "web01", MoRef: "vm-42", Status: policy.OutcomeSucceeded, Attempts: 1,
			Start: t0.Add(-3 * time.Hour), End: t0.Add(-150 * time.Minute), Bytes: 123456789, Stored: 1234567, Point: "0123456789abcdef"},
			{VM: "5012a3b4-0000-0000-0000-000000000002", Name: "db01", Status: policy.OutcomeFailed, Attempts: 3, Error: "snapshot: quiesce failed"}}}
	open := policy.JobRun{ID: "run-0002", Job: "job-nightly", WindowID: "job-nightly@2026-11-30T22:00:00Z", Start: t0, Manual: true,
		VMs: []policy.VMOutcome{{VM: "5012a3b4-0000-0000-0000-000000000001", Name: "web01", Status: policy.OutcomeRunning, Attempts: 1, Start: t0}}}
	if err := db.PutRuns(ctx, []policy.JobRun{closed, open}); err != nil {
		return err
	}
	if err := db.PutVMStates(ctx, []policy.VMState{
		{Job: "job-nightly", VM: "5012a3b4-0000-0000-0000-000000000001", Name: "web01", Selected: true, LastAttempt: t0, LastSuccess: t0.Add(-150 * time.Minute),
			LastPoint: "0123456789abcdef", WindowID: open.WindowID, Attempts: 1, Running: true, RunningRunID: "run-0002"},
		{Job: "job-nightly", VM: "5012a3b4-0000-0000-0000-000000000002", Name: "db01", Selected: true, LastAttempt: t0.Add(-2 * time.Hour),
			LastError: "snapshot: quiesce failed", WindowID: closed.WindowID, Attempts: 3, NextRetry: t0.Add(22 * time.Hour)},
	}); err != nil {
		return err
	}
	if err := db.PutMaintenance(ctx, policy.MaintenanceState{Repository: "main", LastQuickCheck: t0.Add(-time.Hour), LastFullCheck: t0.Add(-7 * 24 * time.Hour),
		FullCheckCursor: "pack/7f", FullCheckStart: t0.Add(-30 * time.Minute), LastReclaim: t0.Add(-48 * time.Hour)}); err != nil {
		return err
	}
	for i, e := range []policy.Event{
		{Time: t0.Add(-150 * time.Minute), Severity: policy.SeverityInfo, Kind: "vm-backed-up", Subject: "web01", Job: "job-nightly", VM: "5012a3b4-0000-0000-0000-000000000001", Repository: "main", Message: "backed up to restore point 0123456789abcdef"},
		{Time: t0.Add(-2 * time.Hour), Severity: policy.SeverityError, Kind: "vm-backup-failed", Subject: "db01", Job: "job-nightly", VM: "5012a3b4-0000-0000-0000-000000000002", Message: "snapshot: quiesce failed"},
		{Time: t0.Add(-2 * time.Hour), Severity: policy.SeverityWarning, Kind: "job-run-ended", Subject: "Nightly", Job: "job-nightly", Message: "1 of 2 VMs failed"},
		{Time: t0.Add(time.Minute), Severity: policy.SeverityInfo, Kind: "user.login", Subject: "alice", Message: "login", User: "alice", Address: "192.0.2.7", Outcome: "ok"},
		{Time: t0.Add(2 * time.Minute), Severity: policy.SeverityWarning, Kind: "restore.vm", Subject: "web01", User: "alice", Address: "192.0.2.7", Outcome: "failed", Error: "datastore full", Message: "restore web01"},
	} {
		if err := db.AddEvent(ctx, e); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	if err := db.SetCheckpoint(ctx, t0.Add(5*time.Minute)); err != nil {
		return err
	}

	// internal/auth: users, tokens, token-hash, and the single administrator
	// hash of the versions before users (not yet migrated).
	as, err := auth.NewBoltStore(db.Bolt())
	if err != nil {
		return err
	}
	hp := auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}
	for _, u := range []struct {
		name, pw string
		role     auth.Role
	}{{"alice", "alice-password-1", auth.RoleOperator}, {"Bob.Admin", "bob-password-22", auth.RoleAdministrator}} {
		h, err := auth.HashPassword(u.pw, hp)
		if err != nil {
			return err
		}
		if err := as.PutUser(ctx, auth.User{Username: u.name, Role: u.role, Source: auth.SourceLocal, Created: t0.Add(-30 * 24 * time.Hour), Hash: h}); err != nil {
			return err
		}
	}
	if err := as.PutUser(ctx, auth.User{Username: "VSPHERE.LOCAL\\ops", Role: auth.RoleRestoreOnly, Source: auth.SourceVCenter, Created: t0.Add(-10 * 24 * time.Hour)}); err != nil {
		return err
	}
	legacy, err := auth.HashPassword("legacy-admin-pw", hp)
	if err != nil {
		return err
	}
	if err := as.SetAdminHash(ctx, legacy); err != nil {
		return err
	}
	for _, tk := range []auth.Token{
		{ID: "tok-ci", Name: "ci", Role: auth.RoleOperator, Owner: "alice", Hash: sha("vmv_secret-ci"), Created: t0.Add(-24 * time.Hour), Expires: t0.Add(89 * 24 * time.Hour)},
		{ID: "tok-mon", Name: "monitoring", Role: auth.RoleRestoreOnly, Owner: "Bob.Admin", Hash: sha("vmv_secret-mon"), Created: t0.Add(-48 * time.Hour)},
	} {
		if err := as.PutToken(ctx, tk); err != nil {
			return err
		}
	}

	// internal/task: finished task summaries.
	ts, err := task.NewBoltStore(db.Bolt())
	if err != nil {
		return err
	}
	for _, ti := range []task.Info{
		{ID: "18c9f0a000000001-backup", Kind: "backup", Subject: "web01", State: task.Succeeded, Progress: task.Progress{Phase: "done", Done: 123456789, Total: 123456789, Rate: 98765.5},
			Created: t0.Add(-3 * time.Hour), Started: t0.Add(-3 * time.Hour), Ended: t0.Add(-150 * time.Minute), Result: map[string]any{"point": "0123456789abcdef", "bytes": 123456789}},
		{ID: "18c9f0a000000002-restore", Kind: "restore", Subject: "db01", State: task.Failed, Progress: task.Progress{Phase: "disk 1", Done: 1 << 20, Total: 1 << 30},
			Created: t0.Add(time.Minute), Started: t0.Add(time.Minute), Ended: t0.Add(2 * time.Minute), Error: "datastore full"},
		{ID: "18c9f0a000000003-check", Kind: "check", Subject: "main", State: task.Cancelled, Created: t0.Add(3 * time.Minute), Ended: t0.Add(4 * time.Minute), Error: "context canceled"},
	} {
		if err := ts.PutTask(ctx, ti); err != nil {
			return err
		}
	}

	// web/settings.go.
	ws, err := web.NewBoltSettings(db.Bolt())
	if err != nil {
		return err
	}
	if err := ws.PutSettings(ctx, web.Settings{TimeZone: "Europe/Paris", EventRetentionDays: 30}); err != nil {
		return err
	}

	// cmd/appliance/serve_notify.go's boltReportLog.SetLastReport.
	last, err := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC).MarshalText()
	if err != nil {
		return err
	}
	return db.Bolt().Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("notify"))
		if err != nil {
			return err
		}
		return b.Put([]byte("last-daily-report"), last)
	})
}
