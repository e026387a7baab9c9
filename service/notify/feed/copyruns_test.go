package feed

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/notify"
)

// The daily report's source lists the copy runs that started in the
// period, named after their jobs, from the copy job store in state.db.
func TestNotifySourceCopyRuns(t *testing.T) {
	ctx := context.Background()
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cs, err := copyjob.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	to := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	from := to.Add(-24 * time.Hour)
	if err := cs.PutJob(ctx, copyjob.Job{ID: "off", Name: "Offsite", Source: "main", Target: "s3", Window: policy.AlwaysOpen(time.UTC), Retention: policy.Retention{Last: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []copyjob.Run{
		{ID: copyjob.NewRunID("off", from.Add(-time.Hour)), Job: "off", Start: from.Add(-time.Hour), State: copyjob.RunSucceeded},
		{ID: copyjob.NewRunID("off", from.Add(2*time.Hour)), Job: "off", Start: from.Add(2 * time.Hour), End: from.Add(3 * time.Hour), State: copyjob.RunSucceeded, PointsCopied: 4, BytesSent: 1 << 20},
		{ID: copyjob.NewRunID("off", from.Add(5*time.Hour)), Job: "off", Start: from.Add(5 * time.Hour), State: copyjob.RunFailed, Error: "target unreachable"},
		{ID: copyjob.NewRunID("off", to.Add(time.Hour)), Job: "off", Start: to.Add(time.Hour), State: copyjob.RunRunning},
	} {
		if err := cs.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	src := &Source{DB: db, Log: slog.New(slog.DiscardHandler), Copies: cs}
	runs, err := src.CopyRuns(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Name != "Offsite" || runs[0].Target != "s3" || runs[0].PointsCopied != 4 || runs[1].State != "failed" {
		t.Fatalf("copy runs %+v", runs)
	}
	var _ notify.CopySource = src
	m := notify.DailyReport{CopyRuns: runs}.Message("appliance", time.UTC)
	if !strings.Contains(m.Text, "copy job Offsite (main -> s3)") || !strings.Contains(m.Text, "error: target unreachable") {
		t.Fatalf("report: %s", m.Text)
	}
}
