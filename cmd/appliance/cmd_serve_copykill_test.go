package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The daemon is killed (SIGKILL, by the copy.commit failpoint) in the middle
// of a copy job's run, after its first point landed: the next start records
// the run as interrupted, the next run copies only the points the target
// lacks, and the target checks clean with every point readable.
func TestServeCopyJobKill9(t *testing.T) {
	bin := applianceBinary(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "main"), filepath.Join(dir, "offsite")
	for _, r := range []string{src, dst} {
		mustCLI(t, "repo", "init", "--repo", r, "--kdf-memory", "1024", "--kdf-time", "1")
	}
	t.Setenv("VMVAULT_PASSWORD", testPassword)
	for i := range 3 {
		img := makeRandom(t, dir, 1<<20, uint64(40+i))
		mustCLI(t, "image", "backup", "--repo", src, "--vm", fmt.Sprintf("vm%d", i), img)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := filepath.Join(dir, "appliance.yaml")
	yaml := fmt.Sprintf("listen: %s\ntls: {disable: true}\nstate_dir: %s\nrepositories:\n  - {name: main, path: %s, passphrase_env: P}\n  - {name: offsite, path: %s, passphrase_env: P}\n",
		addr, filepath.Join(dir, "state"), src, dst)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(failpoints string) (*exec.Cmd, *strings.Builder) {
		t.Helper()
		cmd := exec.Command(bin, "serve", "--config", cfg)
		var logb strings.Builder
		cmd.Stderr = &logb
		cmd.Env = append(os.Environ(), "P="+testPassword, "VMVAULT_ADMIN_PASSWORD=admin-secret-k", "VMVAULT_FAILPOINTS="+failpoints)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		deadline := time.Now().Add(30 * time.Second)
		for {
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				return cmd, &logb
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve did not listen: %s", logb.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	type run struct {
		State                       string
		PointsCopied, PointsSkipped int
	}
	runs := func(api *apiClient) []run {
		t.Helper()
		_, body := api.call("GET", "/api/v1/copy-jobs/off/runs", nil, nil)
		var rs []run
		if err := json.Unmarshal(body, &rs); err != nil {
			t.Fatalf("runs: %s", body)
		}
		return rs
	}

	cmd, logb := start("copy.commit=kill@2")
	api, csrf := cookieLogin(t, addr, "admin-secret-k")
	job := map[string]any{"id": "off", "source": "main", "target": "offsite",
		"window": map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"01:00-02:00"}}}, "retention": map[string]any{"last": 7}}
	if code, body := api.call("POST", "/api/v1/copy-jobs", job, csrf); code != 201 {
		t.Fatalf("copy job: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/copy-jobs/off/run", nil, csrf); code != 202 {
		t.Fatalf("run: %d %s", code, body)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the daemon was not killed by the failpoint: %v\n%s", err, logb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the failpoint did not fire: %s", logb.String())
	}

	cmd, logb = start("")
	api, csrf = cookieLogin(t, addr, "admin-secret-k")
	if rs := runs(api); len(rs) != 1 || rs[0].State != "interrupted" {
		t.Fatalf("the killed run: %+v", rs)
	}
	if code, body := api.call("POST", "/api/v1/copy-jobs/off/run", nil, csrf); code != 202 {
		t.Fatalf("run: %d %s", code, body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		rs := runs(api)
		if len(rs) == 2 && rs[0].State != "running" {
			if rs[0].State != "succeeded" || rs[0].PointsSkipped != 1 || rs[0].PointsCopied != 2 {
				t.Fatalf("the resumed run: %+v", rs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed run did not end: %+v", rs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, logb.String())
	}
	out := mustCLI(t, "repo", "check", "--repo", dst, "--read-data")
	if !strings.Contains(out, "no errors were found") {
		t.Fatalf("check of the target: %s", out)
	}
	list := mustCLI(t, "repo", "list", "--repo", dst)
	for i := range 3 {
		if !strings.Contains(list, fmt.Sprintf("vm%d", i)) {
			t.Fatalf("the target lacks vm%d's point: %s", i, list)
		}
	}
}
