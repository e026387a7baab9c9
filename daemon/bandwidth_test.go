package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

const limitedConfig = `
state_dir: /s
time_zone: Europe/Berlin
repositories:
  - name: offsite
    path: /srv/offsite
    upload_limit_mb_per_s: 50
    download_limit_mb_per_s: 0
    limit_schedule:
      - window: {days: {monday: ["08:00-18:00"], tuesday: ["08:00-18:00"]}}
        upload_limit_mb_per_s: 5
        download_limit_mb_per_s: 20
`

func TestConfigBandwidthLimits(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string // want: "" = valid; else a substring naming the field
	}{
		{"limits", limitedConfig, ""},
		{"fractional", "state_dir: /s\nrepositories: [{name: a, path: /a, upload_limit_mb_per_s: 0.5}]\n", ""},
		{"negative", "state_dir: /s\nrepositories: [{name: a, path: /a, upload_limit_mb_per_s: -1}]\n", "repositories[0].upload_limit_mb_per_s: -1"},
		{"too fast", "state_dir: /s\nrepositories: [{name: a, path: /a, download_limit_mb_per_s: 1e9}]\n", "repositories[0].download_limit_mb_per_s"},
		{"not a number", "state_dir: /s\nrepositories: [{name: a, path: /a, upload_limit_mb_per_s: 10MB}]\n", "upload_limit_mb_per_s: wrong type"},
		{"empty window", "state_dir: /s\nrepositories: [{name: a, path: /a, limit_schedule: [{window: {days: {}}, upload_limit_mb_per_s: 1}]}]\n", "repositories[0].limit_schedule[0].window"},
		{"window rate", "state_dir: /s\nrepositories: [{name: a, path: /a, limit_schedule: [{window: {days: {monday: [\"08:00-18:00\"]}}, upload_limit_mb_per_s: -3}]}]\n", "repositories[0].limit_schedule[0].upload_limit_mb_per_s"},
		{"bad range", "state_dir: /s\nrepositories: [{name: a, path: /a}, {name: b, path: /b, limit_schedule: [{window: {days: {monday: [\"8-18\"]}}, upload_limit_mb_per_s: 1}]}]\n", "repositories[1].limit_schedule[0].window: window monday"},
		{"unknown field", "state_dir: /s\nrepositories: [{name: a, path: /a, limit_upload: 3}]\n", `unknown field "limit_upload"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// The limits follow the schedule in the appliance's time zone, and the
// API shows the configured and the current rates.
func TestRepoLimitsFollowSchedule(t *testing.T) {
	cfg, err := ParseConfig([]byte(limitedConfig))
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.Repositories[0]
	if loc := rc.LimitSchedule[0].Window.Location; loc == nil || loc.String() != "Europe/Berlin" {
		t.Fatalf("window location %v, want the appliance's time zone", loc)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	clk := clock.NewFake(time.Date(2026, 12, 7, 7, 59, 0, 0, berlin)) // a Monday
	lim := newRepoLimits(rc, clk)
	b := lim.info()
	if b.UploadMBps != 50 || b.NowUploadMBps != 50 || b.NowDownloadMBps != 0 || len(b.Schedule) != 1 || b.Schedule[0].UploadMBps != 5 {
		t.Fatalf("before business hours: %+v", b)
	}
	clk.Advance(time.Minute)
	if b := lim.info(); b.NowUploadMBps != 5 || b.NowDownloadMBps != 20 {
		t.Fatalf("at 08:00: %+v", b)
	}
	clk.Set(time.Date(2026, 12, 7, 18, 0, 0, 0, berlin))
	if b := lim.info(); b.NowUploadMBps != 50 || b.NowDownloadMBps != 0 {
		t.Fatalf("at 18:00: %+v", b)
	}
	if newRepoLimits(RepoConfig{Name: "a", Path: "/a"}, clk) != nil {
		t.Fatal("a repository without limits got limiters")
	}
	if (*repoLimits)(nil).info() != nil {
		t.Fatal("no limits shown as limits")
	}
}
