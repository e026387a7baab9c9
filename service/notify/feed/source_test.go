package feed

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/repos"
)

// The daily report's source over a real state database and repository
// (no vCenter): the VM known from its restore point is protected, a VM
// whose last attempt failed in a job is failed, runs outside the period
// and info events are left out, the repository's figures are read.
func TestNotifySourceDailyReport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	p := repository.TestRepositoryWithPoint(t, repoDir, "pw")
	r, err := repository.Open(ctx, repoDir, []byte("pw"), repository.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	db, err := state.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	to := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	from := to.Add(-24 * time.Hour)
	job := policy.NewJob("j1", "Nightly", "main", time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.PutJob(ctx, job))
	must(db.PutRun(ctx, policy.JobRun{ID: "old", Job: "j1", Start: from.Add(-48 * time.Hour), End: from.Add(-47 * time.Hour)}))
	must(db.PutRun(ctx, policy.JobRun{ID: "r1", Job: "j1", Start: from.Add(15 * time.Hour), End: from.Add(16 * time.Hour), VMs: []policy.VMOutcome{
		{VM: "uuid-db", Name: "db-02", Status: policy.OutcomeFailed, Attempts: 2, Error: "create snapshot: FileFault"},
	}}))
	must(db.PutVMState(ctx, policy.VMState{Job: "j1", VM: "uuid-db", Name: "db-02", Selected: true, LastAttempt: from.Add(16 * time.Hour), LastError: "create snapshot: FileFault"}))
	// The job covers the repository's VM (its last selection): protected.
	must(db.PutVMState(ctx, policy.VMState{Job: "j1", VM: p.VM.InstanceUUID, Name: p.VM.Name, Selected: true, LastAttempt: p.Time, LastSuccess: p.Time}))
	must(db.PutVMState(ctx, policy.VMState{Job: "j1", VM: "uuid-gone", Name: "gone", Selected: false, LastAttempt: from, LastError: "old error"}))
	must(db.AddEvent(ctx, policy.Event{Time: from.Add(16 * time.Hour), Severity: policy.SeverityError, Kind: policy.EventVMFailed, Subject: "db-02", Job: "j1", Message: "backup failed: create snapshot: FileFault"}))
	must(db.AddEvent(ctx, policy.Event{Time: from.Add(17 * time.Hour), Severity: policy.SeverityInfo, Kind: policy.EventJobFinished, Subject: "Nightly", Message: "info only"}))
	must(db.AddEvent(ctx, policy.Event{Time: from.Add(-time.Hour), Severity: policy.SeverityError, Kind: policy.EventVMFailed, Subject: "db-02", Message: "before the period"}))

	src := &Source{DB: db, Repos: repos.New(map[string]*repository.Repository{"main": r}), Log: slog.New(slog.DiscardHandler)}
	rep := notify.BuildDailyReport(ctx, src, from, to)
	if len(rep.Missing) > 0 {
		t.Fatalf("missing: %v", rep.Missing)
	}
	if rep.Protected != 1 || rep.Failed != 1 || rep.Unprotected != 0 {
		t.Fatalf("counts %d/%d/%d: %+v", rep.Protected, rep.Failed, rep.Unprotected, rep.VMs)
	}
	for _, v := range rep.VMs {
		switch v.Name {
		case p.VM.Name:
			if !v.LastPoint.Equal(p.Time) {
				t.Errorf("%s last point %v, want %v", v.Name, v.LastPoint, p.Time)
			}
		case "db-02":
			if v.State() != "failed" || len(v.Jobs) != 1 || v.Jobs[0] != "Nightly" {
				t.Errorf("db-02 %+v", v)
			}
		default:
			t.Errorf("unexpected VM %+v", v)
		}
	}
	if len(rep.Jobs) != 1 || rep.Jobs[0].Name != "Nightly" || len(rep.Jobs[0].Runs) != 1 || rep.Jobs[0].Runs[0].ID != "r1" {
		t.Fatalf("jobs %+v", rep.Jobs)
	}
	if len(rep.Events) != 1 || rep.Events[0].Message != "backup failed: create snapshot: FileFault" {
		t.Fatalf("events %+v", rep.Events)
	}
	if len(rep.Repositories) != 1 || rep.Repositories[0].Points != 1 || rep.Repositories[0].StoredBytes <= 0 || rep.Repositories[0].Err != "" {
		t.Fatalf("repositories %+v", rep.Repositories)
	}
	if m := rep.Message("appliance", time.UTC); m.Subject != "[vmvault] daily report: 1 protected, 1 failed" {
		t.Fatalf("subject %q", m.Subject)
	}
}
