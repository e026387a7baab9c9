package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// The daemon against the lab: a vCenter user logs in, the inventory lists
// the VMs, a job run through the scheduler makes a restore point tagged
// with the job, POST /backups runs as a task followed over SSE to success,
// the VMs show as protected, the metrics count the backup, and shutdown
// leaves no snapshot.
func TestServeWithLab(t *testing.T) {
	l, err := lab.Start(context.Background(), lab.Options{DiskCapacity: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	for i, vm := range []string{"DC0_H0_VM0", "DC0_H0_VM1"} {
		if err := l.WriteDisk(vm, 0, 0, randBytes(uint64(i+7), 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	cfgYAML := fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: %s
vcenter: {url: %q, username: %s, password_env: VC_PASS, thumbprint: %q, role: operator}
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
maintenance: {window: {days: {sunday: ["01:00-02:00"]}}}
`, filepath.Join(dir, "state"), l.URL().String(), l.Username(), l.Thumbprint(), repoDir)
	sd := startDaemon(t, dir, cfgYAML, map[string]string{"MAIN_PASS": "repo-pass", "VC_PASS": l.Password(), "VMVAULT_ADMIN_PASSWORD": "admin-secret-2"})
	addr, stderr, done, cancel := sd.addr, sd.stderr, sd.done, sd.cancel
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	api := &apiClient{t: t, base: "http://" + addr, hc: hc}

	// vCenter credentials log in with the configured role.
	if code, _ := api.call("POST", "/api/v1/auth/login", map[string]string{"username": l.Username(), "password": "wrong"}, nil); code != 401 {
		t.Fatalf("wrong vCenter password: %d", code)
	}
	code, body := api.call("POST", "/api/v1/auth/login", map[string]string{"username": l.Username(), "password": l.Password()}, nil)
	if code != 200 || !strings.Contains(string(body), `"role":"operator"`) {
		t.Fatalf("vCenter login: %d %s", code, body)
	}
	code, body = api.call("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "admin-secret-2"}, nil)
	if code != 200 {
		t.Fatalf("admin login: %d %s", code, body)
	}
	var login struct{ CSRFToken string }
	_ = json.Unmarshal(body, &login)
	csrf := map[string]string{"X-CSRF-Token": login.CSRFToken}

	var vms []struct {
		InstanceUUID string
		Name         string
		InInventory  bool
		Protected    bool
		AdHoc        bool
		Jobs         []string
	}
	code, body = api.call("GET", "/api/v1/vms", nil, nil)
	if err := json.Unmarshal(body, &vms); code != 200 || err != nil {
		t.Fatalf("vms: %d %s", code, body)
	}
	uuid := map[string]string{}
	for _, v := range vms {
		if v.InInventory {
			uuid[v.Name] = v.InstanceUUID
		}
	}
	if uuid["DC0_H0_VM0"] == "" || uuid["DC0_H0_VM1"] == "" {
		t.Fatalf("inventory: %s", body)
	}

	job := map[string]any{"id": "nightly", "name": "Nightly", "enabled": true, "repository": "main", "quiesce": "none",
		"selection": map[string]any{"vms": []string{uuid["DC0_H0_VM0"]}},
		"window":    map[string]any{"location": "UTC", "days": map[string]any{"monday": []string{"22:00-06:00"}}},
		"retention": map[string]any{"last": 3}}
	if code, body := api.call("POST", "/api/v1/jobs", job, csrf); code != 201 || strings.Contains(string(body), "warnings") {
		t.Fatalf("job: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/jobs/nightly/run", nil, csrf); code != 202 {
		t.Fatalf("run now: %d %s", code, body)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, body := api.call("GET", "/api/v1/restore-points?job=nightly", nil, nil)
		var pts []struct{ ID string }
		_ = json.Unmarshal(body, &pts)
		if len(pts) == 1 {
			break
		}
		if time.Now().After(deadline) {
			_, ev := api.call("GET", "/api/v1/events", nil, nil)
			t.Fatalf("no restore point from the job run; events: %s", ev)
		}
		time.Sleep(100 * time.Millisecond)
	}

	code, body = api.call("POST", "/api/v1/backups", map[string]any{"vms": []string{uuid["DC0_H0_VM1"]}}, csrf)
	if code != 202 {
		t.Fatalf("backup: %d %s", code, body)
	}
	var tk struct{ ID string }
	_ = json.Unmarshal(body, &tk)
	req, _ := http.NewRequest("GET", api.base+"/api/v1/tasks/"+tk.ID+"/events", nil)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	var final struct {
		State  string
		Error  string
		Result []struct{ RestorePoint string }
	}
	sawProgress := false
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			sawProgress = sawProgress || v == "progress"
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && event == "state" {
			_ = json.Unmarshal([]byte(v), &final)
		}
	}
	res.Body.Close()
	if final.State != "succeeded" || len(final.Result) != 1 || final.Result[0].RestorePoint == "" {
		t.Fatalf("backup task: %+v", final)
	}
	_ = sawProgress // progress is throttled; a small disk may finish between two updates

	// Restore the job's point to a new VM, then attach its disk to the other VM.
	_, body = api.call("GET", "/api/v1/restore-points?job=nightly", nil, nil)
	var jobPts []struct {
		ID    string
		Disks []struct{ Key int32 }
	}
	_ = json.Unmarshal(body, &jobPts)
	waitTask := func(what string, code int, body []byte) map[string]any {
		t.Helper()
		if code != 202 {
			t.Fatalf("%s: %d %s", what, code, body)
		}
		var tk struct{ ID string }
		_ = json.Unmarshal(body, &tk)
		deadline := time.Now().Add(90 * time.Second)
		for {
			_, b := api.call("GET", "/api/v1/tasks/"+tk.ID, nil, nil)
			var info map[string]any
			_ = json.Unmarshal(b, &info)
			switch info["state"] {
			case "succeeded":
				return info
			case "failed", "cancelled":
				t.Fatalf("%s task: %s", what, b)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s task did not finish: %s", what, b)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	code, body = api.call("POST", "/api/v1/restores", map[string]any{"point": jobPts[0].ID, "mode": "new", "name": "web-restored"}, csrf)
	waitTask("restore", code, body)
	got, err := l.ReadDisk("web-restored", 0, 0, 1<<20)
	if err != nil {
		t.Fatalf("restored VM: %v", err)
	}
	if want := randBytes(7, 1<<20); !bytes.Equal(got, want) {
		t.Error("the restored VM's disk differs from the backed-up one")
	}
	code, body = api.call("POST", "/api/v1/restores/disk", map[string]any{"point": jobPts[0].ID, "disk": jobPts[0].Disks[0].Key, "targetVm": uuid["DC0_H0_VM1"]}, csrf)
	waitTask("attach disk", code, body)

	_, body = api.call("GET", "/api/v1/vms", nil, nil)
	_ = json.Unmarshal(body, &vms)
	for _, v := range vms {
		// The job covers DC0_H0_VM0; DC0_H0_VM1's point came from POST
		// /backups alone (no job selects it): ad hoc, not protected.
		if v.Name == "DC0_H0_VM0" && !v.Protected {
			t.Errorf("%s not protected: %s", v.Name, body)
		}
		if v.Name == "DC0_H0_VM1" && (v.Protected || !v.AdHoc) {
			t.Errorf("%s: protected %v, ad hoc %v, want an ad-hoc point only: %s", v.Name, v.Protected, v.AdHoc, body)
		}
		if v.Name == "DC0_H0_VM0" && (len(v.Jobs) != 1 || v.Jobs[0] != "nightly") {
			t.Errorf("DC0_H0_VM0 jobs %v", v.Jobs)
		}
	}
	_, body = api.call("GET", "/api/v1/events?job=nightly", nil, nil)
	if !strings.Contains(string(body), "vm.backed-up") {
		t.Errorf("events: %s", body)
	}
	_, body = api.call("GET", "/metrics", nil, nil)
	if !strings.Contains(string(body), `vmvault_vm_backups_total{result="success"} 1`) || !strings.Contains(string(body), `vmvault_job_last_success_timestamp_seconds{job="nightly"}`) ||
		!strings.Contains(string(body), "vmvault_vm_backup_duration_seconds_count 2") {
		t.Errorf("metrics: %s", body)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exit %d: %s", code, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop")
	}
	for _, vm := range []string{"DC0_H0_VM0", "DC0_H0_VM1"} {
		if snaps, _ := l.Snapshots(vm); len(snaps) != 0 {
			t.Errorf("%s: snapshots left: %v", vm, snaps)
		}
	}
	if strings.Contains(stderr.String(), l.Password()) || strings.Contains(stderr.String(), "admin-secret-2") {
		t.Error("a secret reached the log")
	}
}
