package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// Stopping the daemon (SIGTERM: main cancels the context) during a backup
// cancels it within the grace period, leaves no snapshot on the VM, records
// the task as cancelled and leaves a clean repository without a new point.
func TestServeStopDuringBackup(t *testing.T) {
	// Big enough that the disk phase lasts well over the polling interval
	// even without the race detector; one random MiB repeated keeps the set-up cheap.
	const size = 256 << 20
	l, err := lab.Start(context.Background(), lab.Options{DiskCapacity: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.WriteDisk("DC0_H0_VM0", 0, 0, bytes.Repeat(randBytes(3, 1<<20), size>>20)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sd, repoDir := startLabDaemon(t, l, dir, "admin-secret-3", "")
	addr, stderr, done, cancel := sd.addr, sd.stderr, sd.done, sd.cancel
	api, csrf := cookieLogin(t, addr, "admin-secret-3")
	_, body := api.call("GET", "/api/v1/vms", nil, nil)
	var vms []struct{ InstanceUUID, Name string }
	_ = json.Unmarshal(body, &vms)
	vmUUID := ""
	for _, v := range vms {
		if v.Name == "DC0_H0_VM0" {
			vmUUID = v.InstanceUUID
		}
	}
	code, body := api.call("POST", "/api/v1/backups", map[string]any{"vms": []string{vmUUID}}, csrf)
	if code != 202 {
		t.Fatalf("backup %d %s", code, body)
	}
	var tk task.Info
	_ = json.Unmarshal(body, &tk)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, b := api.call("GET", "/api/v1/tasks/"+tk.ID, nil, nil)
		var info task.Info
		_ = json.Unmarshal(b, &info)
		if info.State.Final() {
			t.Fatalf("the backup ended before the daemon was stopped (make the disk bigger): %s", b)
		}
		// Stop as soon as the snapshot exists and the disks are being read.
		if strings.HasSuffix(info.Progress.Phase, ": disks") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %s", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopped := time.Now()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exit %d: %s", code, stderr.String())
		}
	case <-time.After(shutdownGrace + 10*time.Second):
		t.Fatal("serve did not stop")
	}
	t.Logf("stopped %s after the signal", time.Since(stopped).Round(time.Millisecond))
	if snaps, err := l.Snapshots("DC0_H0_VM0"); err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots left: %v %v", snaps, err)
	}
	sdb, err := state.Open(filepath.Join(dir, "state", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := task.NewBoltStore(sdb.Bolt())
	info, err := ts.Task(context.Background(), tk.ID)
	sdb.Close()
	if err != nil || info.State != task.Cancelled {
		t.Fatalf("stored task: %+v %v", info, err)
	}
	r, err := repository.Open(context.Background(), repoDir, []byte("repo-pass"), repository.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pts, _ := r.List(context.Background())
	if len(pts) != 1 {
		t.Fatalf("%d points after a cancelled backup, want the 1 from before", len(pts))
	}
	rep, err := r.Check(context.Background(), repository.CheckOptions{}, nil)
	if err != nil || !rep.Clean() {
		t.Fatalf("check: %+v %v", rep, err)
	}
}

func newJar(t *testing.T) http.CookieJar {
	t.Helper()
	j, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
