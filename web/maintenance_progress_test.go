package web

import (
	"context"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
)

type statusScheduler struct{ st policy.Status }

func (s statusScheduler) RunNow(context.Context, string) (string, error) { return "", nil }
func (s statusScheduler) Reload(context.Context) error                   { return nil }
func (s statusScheduler) Status() policy.Status                          { return s.st }

// TestDashboardShowsFullCheckProgress: the dashboard's scheduler activity
// carries a full check's packs done/total and its ETA (schema-validated).
func TestDashboardShowsFullCheckProgress(t *testing.T) {
	start := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	eta := start.Add(45 * time.Minute)
	f := newFixture(t, func(c *Config) {
		c.Scheduler = statusScheduler{policy.Status{Maintenance: []policy.RunningMaintenance{
			{Repository: "main", Task: policy.TaskFullCheck, Started: start, Cursor: "ab12", Done: 4, Total: 10, ETA: eta},
			{Repository: "other", Task: policy.TaskReclaim, Started: start},
		}}}
	})
	var d Dashboard
	f.do("GET", "/api/v1/dashboard", nil, bearer(f.tokens[auth.RoleRestoreOnly])).json(t, &d)
	m := d.Scheduler.Maintenance
	if len(m) != 2 || m[0].Done != 4 || m[0].Total != 10 || m[0].ETA == nil || !m[0].ETA.Equal(eta) || m[1].ETA != nil || m[1].Total != 0 {
		t.Fatalf("maintenance activity %+v", m)
	}
}
