package daemon

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web"
	"github.com/vmvault/vmvault/web/api"
	"github.com/vmvault/vmvault/web/openapitest"
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

// A repository opened with limits shows them in GET /repositories and
// /repositories/{name}, as the OpenAPI document describes them; one
// without limits shows none.
func TestRepositoryBandwidthInAPI(t *testing.T) {
	dir := t.TempDir()
	repository.TestRepositoryWithPoint(t, filepath.Join(dir, "main"), "repo-pass")
	repository.TestRepositoryWithPoint(t, filepath.Join(dir, "plain"), "repo-pass")
	cfg := `
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: state
repositories:
  - name: main
    path: main
    passphrase_env: MAIN_PASS
    upload_limit_mb_per_s: 12.5
    download_limit_mb_per_s: 40
    limit_schedule:
      - {window: {days: {sunday: ["00:00-24:00"]}}, upload_limit_mb_per_s: 2, download_limit_mb_per_s: 0}
  - {name: plain, path: plain, passphrase_env: MAIN_PASS}
`
	td := startDaemon(t, dir, cfg, map[string]string{"MAIN_PASS": "repo-pass", "VMVAULT_ADMIN_PASSWORD": "admin-secret-bw"}, Options{})
	a, _ := cookieLogin(t, td.addr, "admin-secret-bw")
	v, err := openapitest.New(web.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte(`[{"name":"main","bandwidth":{"uploadMBps":"fast"}}]`)
	if len(v.Response("GET", "/api/v1/repositories", 200, http.Header{"Content-Type": {"application/json"}}, bad)) == 0 {
		t.Fatal("the validator accepts a malformed bandwidth: the checks below would prove nothing")
	}
	get := func(path string, out any) {
		t.Helper()
		code, body := a.call("GET", path, nil, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if probs := v.Response("GET", path, code, http.Header{"Content-Type": {"application/json"}}, body); len(probs) > 0 {
			t.Fatalf("GET %s does not match the OpenAPI document:\n%s", path, strings.Join(probs, "\n"))
		}
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatal(err)
		}
	}
	var list []api.RepositoryInfo
	get("/api/v1/repositories", &list)
	byName := map[string]api.RepositoryInfo{}
	for _, r := range list {
		byName[r.Name] = r
	}
	b := byName["main"].Bandwidth
	if b == nil || b.UploadMBps != 12.5 || b.DownloadMBps != 40 || len(b.Schedule) != 1 || b.Schedule[0].UploadMBps != 2 {
		t.Fatalf("main's bandwidth: %+v", b)
	}
	sunday := time.Now().UTC().Weekday() == time.Sunday
	if wantUp := map[bool]float64{true: 2, false: 12.5}[sunday]; b.NowUploadMBps != wantUp {
		t.Errorf("upload limit now %v, want %v", b.NowUploadMBps, wantUp)
	}
	if byName["plain"].Bandwidth != nil {
		t.Errorf("plain shows limits: %+v", byName["plain"].Bandwidth)
	}
	var detail api.RepositoryInfo
	get("/api/v1/repositories/main", &detail)
	if detail.Bandwidth == nil || detail.Bandwidth.DownloadMBps != 40 {
		t.Fatalf("detail's bandwidth: %+v", detail.Bandwidth)
	}
}
