package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeVerification: without the instant section a boot verification
// answers 501 and a walk runs; its result shows on the point, also after
// a restart (it is kept in the state directory).
func TestServeVerification(t *testing.T) {
	l := startTestLab(t)
	dir := t.TempDir()
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-v", "", Options{})
	api, csrf := cookieLogin(t, sd.addr, "admin-secret-v")
	var pts []struct{ ID string }
	if _, body := api.call("GET", "/api/v1/restore-points", nil, nil); json.Unmarshal(body, &pts) != nil || len(pts) == 0 {
		t.Fatalf("restore points: %s", body)
	}
	path := "/api/v1/restore-points/" + pts[0].ID + "/verify"
	if code, body := api.call("POST", path, map[string]any{"mode": "boot"}, csrf); code != 501 || !strings.Contains(string(body), "instant") {
		t.Fatalf("boot without instant recovery: %d %s", code, body)
	}
	code, body := api.call("POST", path, map[string]any{"mode": "walk"}, csrf)
	if code != 202 {
		t.Fatalf("walk: %d %s", code, body)
	}
	var tk struct{ ID string }
	_ = json.Unmarshal(body, &tk)
	var result struct{ Result, Reason, Mode string }
	waitFor(t, 60*time.Second, "verify", func() (bool, string) {
		_, b := api.call("GET", "/api/v1/tasks/"+tk.ID, nil, nil)
		var info struct {
			State  string
			Result json.RawMessage
		}
		_ = json.Unmarshal(b, &info)
		if info.State == "failed" || info.State == "cancelled" {
			t.Fatalf("verify task: %s", b)
		}
		_ = json.Unmarshal(info.Result, &result)
		return info.State == "succeeded", string(b)
	})
	if result.Mode != "walk" || result.Result == "" || result.Reason == "" {
		t.Fatalf("task result %+v", result)
	}
	shown := func(api *apiClient) {
		t.Helper()
		var p struct {
			Verification *struct{ Result, Mode, Reason string }
		}
		_, b := api.call("GET", "/api/v1/restore-points/"+pts[0].ID, nil, nil)
		if json.Unmarshal(b, &p) != nil || p.Verification == nil || p.Verification.Result != result.Result || p.Verification.Reason != result.Reason {
			t.Fatalf("point after verification: %s", b)
		}
	}
	shown(api)
	sd.stop(t, ShutdownGrace+10*time.Second)
	cfgYAML, err := os.ReadFile(filepath.Join(dir, "vmvault.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sd2 := startDaemon(t, dir, string(cfgYAML), map[string]string{"MAIN_PASS": "repo-pass", "VC_PASS": l.Password(), "VMVAULT_ADMIN_PASSWORD": "admin-secret-v"}, Options{})
	api2, _ := cookieLogin(t, sd2.addr, "admin-secret-v")
	shown(api2)
}

// A verification job in the lab daemon: a boot job is refused without
// instant recovery; a walk job run now verifies the newest point of every
// VM, records the run in its file and shows the result on the point.
func TestServeVerificationJob(t *testing.T) {
	l := startTestLab(t)
	dir := t.TempDir()
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-j", "", Options{})
	api, csrf := cookieLogin(t, sd.addr, "admin-secret-j")
	win := map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"03:00-04:00"}}}
	if code, body := api.call("POST", "/api/v1/verification-jobs", map[string]any{"id": "boot", "window": win, "mode": "boot"}, csrf); code != 422 || !strings.Contains(string(body), "instant") {
		t.Fatalf("boot job without instant recovery: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/verification-jobs", map[string]any{"id": "walk", "window": win, "onlyNew": true}, csrf); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/verification-jobs/walk/run", nil, csrf); code != 202 {
		t.Fatalf("run: %d %s", code, body)
	}
	type run struct {
		State                          string
		Points, Passed, Failed, Errors int
		Results                        []struct{ Point, Result, Error string }
	}
	var view struct{ LastRun *run }
	waitFor(t, 120*time.Second, "verification job run", func() (bool, string) {
		_, b := api.call("GET", "/api/v1/verification-jobs/walk", nil, nil)
		_ = json.Unmarshal(b, &view)
		return view.LastRun != nil, string(b)
	})
	lr := view.LastRun
	t.Logf("run: %d points, %d passed, %d failed", lr.Points, lr.Passed, lr.Failed)
	if lr.State != "finished" || lr.Points < 1 || lr.Errors != 0 || lr.Points != lr.Passed+lr.Failed {
		t.Fatalf("run %+v", lr)
	}
	for _, r := range lr.Results {
		var p struct {
			Verification *struct{ Result, Mode string }
		}
		_, b := api.call("GET", "/api/v1/restore-points/"+r.Point, nil, nil)
		if json.Unmarshal(b, &p) != nil || p.Verification == nil || p.Verification.Result != r.Result || p.Verification.Mode != "walk" {
			t.Fatalf("point %s after the job: %s", r.Point, b)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "state", "verification-jobs", "walk.json")); err != nil || !strings.Contains(string(b), `"state": "finished"`) {
		t.Fatalf("job file in the state dir: %v %s", err, b)
	}
	// onlyNew: every newest point has a result now, a second run verifies none.
	if code, body := api.call("POST", "/api/v1/verification-jobs/walk/run", nil, csrf); code != 202 {
		t.Fatalf("run again: %d %s", code, body)
	}
	waitFor(t, 60*time.Second, "second run", func() (bool, string) {
		_, b := api.call("GET", "/api/v1/verification-jobs/walk", nil, nil)
		var v struct {
			Running *run
			LastRun *run
		}
		_ = json.Unmarshal(b, &v)
		return v.Running == nil && v.LastRun != nil && len(v.LastRun.Results) == 0 && v.LastRun.State == "finished", string(b)
	})
}
