package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// The daemon against the lab, for the job's quiesce requirement and the
// console's tags: a job that requires quiescing fails the VM whose Tools are
// not running, with the reason, makes no restore point and leaves no
// snapshot, while the same job without the requirement backs the VM up
// crash-consistent with a warning. GET /tags names the lab's tag and GET
// /vms carries it on the tagged VM only.
func TestServeQuiesceRequiredAndTags(t *testing.T) {
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{DiskCapacity: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	const vm = "DC0_H0_VM0"
	if err := l.WriteDisk(vm, 0, 0, randBytes(11, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := l.SetToolsRunning(vm, false); err != nil {
		t.Fatal(err)
	}
	if err := l.TagVMs(ctx, "Environment", "production", "DC0_H0_VM1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-q", "", Options{})
	api, csrf := cookieLogin(t, sd.addr, "admin-secret-q")

	// Tags: named, with their category, and on the tagged VM only.
	code, body := api.call("GET", "/api/v1/tags", nil, nil)
	var tags []struct{ ID, Name, Category string }
	if err := json.Unmarshal(body, &tags); code != 200 || err != nil || len(tags) != 1 || tags[0].Name != "production" || tags[0].Category != "Environment" || tags[0].ID == "" {
		t.Fatalf("GET /tags: %d %s", code, body)
	}
	var vms []struct {
		InstanceUUID string
		Name         string
		Tags         []string
	}
	code, body = api.call("GET", "/api/v1/vms", nil, nil)
	if err := json.Unmarshal(body, &vms); code != 200 || err != nil {
		t.Fatalf("GET /vms: %d %s", code, body)
	}
	uuid := map[string]string{}
	for _, v := range vms {
		uuid[v.Name] = v.InstanceUUID
		want := []string{}
		if v.Name == "DC0_H0_VM1" {
			want = []string{tags[0].ID}
		}
		if !slices.Equal(v.Tags, want) {
			t.Errorf("GET /vms: %s tags %v, want %v", v.Name, v.Tags, want)
		}
	}

	// A job cannot require quiescing and turn it off.
	bad := quiesceJob("bad", uuid[vm], "none", true)
	if code, body := api.call("POST", "/api/v1/jobs", bad, csrf); code != 422 || !strings.Contains(string(body), "quiesceRequired") {
		t.Fatalf("job requiring quiescing with quiesce none: %d %s", code, body)
	}

	run := func(id string, required bool) (state, errText, point string) {
		t.Helper()
		if code, body := api.call("POST", "/api/v1/jobs", quiesceJob(id, uuid[vm], "filesystem", required), csrf); code != 201 {
			t.Fatalf("job %s: %d %s", id, code, body)
		}
		if code, body := api.call("POST", "/api/v1/jobs/"+id+"/run", nil, csrf); code != 202 {
			t.Fatalf("run %s: %d %s", id, code, body)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			_, body := api.call("GET", "/api/v1/jobs/"+id+"/runs", nil, nil)
			var runs []struct {
				State string
				VMs   []struct {
					State, Error string
					Point        string `json:"restorePoint"`
				}
			}
			_ = json.Unmarshal(body, &runs)
			if len(runs) == 1 && runs[0].State != "running" {
				if len(runs[0].VMs) != 1 {
					t.Fatalf("run of %s: %s", id, body)
				}
				v := runs[0].VMs[0]
				return v.State, v.Error, v.Point
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run of %s did not finish: %s", id, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	state, reason, point := run("strict", true)
	if state != "failed" || point != "" || !strings.Contains(reason, "could not be quiesced") || !strings.Contains(reason, "require") {
		t.Fatalf("required quiescing on a VM without Tools: state %q, point %q, error %q; want failed with the reason and no point", state, point, reason)
	}
	if snaps, err := l.Snapshots(vm); err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots left after the failed backup: %v, %v", snaps, err)
	}
	if _, body := api.call("GET", "/api/v1/restore-points?job=strict", nil, nil); strings.TrimSpace(string(body)) != "[]" {
		t.Fatalf("restore points of the failed job: %s", body)
	}

	state, reason, point = run("lenient", false)
	if state != "succeeded" || point == "" {
		t.Fatalf("preferred quiescing: state %q, error %q, point %q; want a crash-consistent point", state, reason, point)
	}
	_, body = api.call("GET", "/api/v1/restore-points/"+point, nil, nil)
	var rp struct {
		Consistency string
		Warnings    []string
		Quiesce     struct{ Requested, Obtained, Reason string }
	}
	if err := json.Unmarshal(body, &rp); err != nil || rp.Consistency != string(backup.ConsistencyCrash) || !strings.Contains(strings.Join(rp.Warnings, " "), "quiesced") {
		t.Fatalf("the fallback point: %s", body)
	}
	if q := rp.Quiesce; q.Requested != "filesystem" || q.Obtained != backup.ConsistencyCrash || q.Reason != backup.ReasonToolsNotRunning {
		t.Errorf("the fallback point's quiesce detail %+v: %s", q, body)
	}
	if snaps, err := l.Snapshots(vm); err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots left after the backup: %v, %v", snaps, err)
	}
}

// quiesceJob is a job of one VM whose window lies three days ahead, so only
// run now starts it during the test.
func quiesceJob(id, vm, quiesce string, required bool) map[string]any {
	day := strings.ToLower(time.Now().UTC().Add(72 * time.Hour).Weekday().String())
	return map[string]any{"id": id, "name": id, "enabled": true, "repository": "main", "quiesce": quiesce, "quiesceRequired": required,
		"maxAttempts": 1,
		"selection":   map[string]any{"vms": []string{vm}},
		"window":      map[string]any{"location": "UTC", "days": map[string]any{day: []string{"10:00-11:00"}}},
		"retention":   map[string]any{"last": 3}}
}

// A job's activeFullEvery reaches the backup engine: with 2, a full read
// is followed by one incremental, then the third backup reads every disk
// whole again and says why.
func TestServeActiveFull(t *testing.T) {
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{DiskCapacity: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	const vm = "DC0_H0_VM0"
	if err := l.WriteDisk(vm, 0, 0, randBytes(12, 1<<20)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-q", "", Options{})
	api, csrf := cookieLogin(t, sd.addr, "admin-secret-q")
	uuid := api.vmUUID(vm)
	job := quiesceJob("full2", uuid, "none", false)
	job["activeFullEvery"] = 2
	if code, body := api.call("POST", "/api/v1/jobs", job, csrf); code != 201 {
		t.Fatalf("job: %d %s", code, body)
	}
	runOnce := func(n int) string {
		t.Helper()
		if code, body := api.call("POST", "/api/v1/jobs/full2/run", nil, csrf); code != 202 {
			t.Fatalf("run: %d %s", code, body)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			_, body := api.call("GET", "/api/v1/jobs/full2/runs", nil, nil)
			var runs []struct {
				State string
				VMs   []struct {
					Point string `json:"restorePoint"`
				}
			}
			_ = json.Unmarshal(body, &runs)
			if len(runs) == n && runs[0].State != "running" {
				if runs[0].State != "succeeded" || len(runs[0].VMs) != 1 {
					t.Fatalf("run %d: %s", n, body)
				}
				return runs[0].VMs[0].Point
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d did not finish: %s", n, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	runOnce(1)
	second := runOnce(2)
	third := runOnce(3)
	_, body := api.call("GET", "/api/v1/restore-points/"+second, nil, nil)
	if strings.Contains(string(body), "active full") {
		t.Fatalf("the second backup is an active full already: %s", body)
	}
	_, body = api.call("GET", "/api/v1/restore-points/"+third, nil, nil)
	if !strings.Contains(string(body), "active full: the job reads every disk whole every 2 backups") {
		t.Fatalf("the third backup of an activeFullEvery 2 job is not an active full: %s", body)
	}
}
