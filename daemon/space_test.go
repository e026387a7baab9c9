package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/repository/storage"
	"github.com/vmvault/vmvault/service/capacity"
)

type fakeSpace struct {
	mu   sync.Mutex
	free int64
}

func (f *fakeSpace) Space(context.Context) (storage.Space, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return storage.Space{Total: 1000, Free: f.free}, true, nil
}

func (f *fakeSpace) set(n int64) { f.mu.Lock(); f.free = n; f.mu.Unlock() }

// The watch reads at start and every spaceEvery: one alert when the free
// space falls below the threshold, one note when it recovers, nothing in
// between.
func TestWatchSpace(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	vol := &fakeSpace{free: 500}
	events := make(chan policy.Event, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchSpace(ctx, func() map[string]spaceReader { return map[string]spaceReader{"main": vol} }, capacity.Threshold{Percent: 10}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), func(e policy.Event) { events <- e })
	}()
	tick := func(free int64) {
		t.Helper()
		if !clk.BlockUntil(1, nil) {
			t.Fatal("the watch armed no timer")
		}
		vol.set(free)
		clk.Advance(spaceEvery)
	}
	tick(50)
	e := <-events
	if e.Kind != EventSpaceLow || e.Severity != policy.SeverityError || e.Repository != "main" || !strings.Contains(e.Message, "50 B free of 1000 B") {
		t.Fatalf("low event = %+v", e)
	}
	tick(40) // still low: nothing
	tick(200)
	if e := <-events; e.Kind != EventSpaceRecovered || e.Severity != policy.SeverityInfo {
		t.Fatalf("recovery event = %+v", e)
	}
	cancel()
	<-done
	if len(events) != 0 {
		t.Fatalf("extra events: %+v", <-events)
	}
}

// A daemon whose repository lives on a nearly full volume (a 64 MiB tmpfs,
// below the default 10 GiB) records the low-space alert at start, as an
// error event the API lists.
func TestDaemonLowSpaceAlert(t *testing.T) {
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	if err := unixMkdirMount(vol); err != nil {
		t.Fatalf("mount a tmpfs for the repository (make test runs as root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(vol, unix.MNT_DETACH) }) // after the daemon stops (cleanups run last first)
	repoDir := filepath.Join(vol, "repo")
	repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	y := fmt.Sprintf("listen: 127.0.0.1:0\ntls: {disable: true}\nstate_dir: %s\nrepositories:\n  - {name: main, path: %s, passphrase_env: MAIN_PASS}\n", filepath.Join(dir, "state"), repoDir)
	sd := startDaemon(t, dir, y, map[string]string{"MAIN_PASS": "repo-pass", "VMVAULT_ADMIN_PASSWORD": "admin-secret-q"}, Options{})
	api, _ := cookieLogin(t, sd.addr, "admin-secret-q")
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := api.call("GET", "/api/v1/events?kind=repository", nil, nil)
		if code != 200 {
			t.Fatalf("GET /events: %d %s", code, body)
		}
		var evs []policy.Event
		if err := json.Unmarshal(body, &evs); err != nil {
			t.Fatalf("events: %v: %s", err, body)
		}
		for _, e := range evs {
			if e.Kind == EventSpaceLow && e.Repository == "main" && strings.Contains(e.Message, "of 64.0 MiB") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no low-space event for a 64 MiB volume: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func unixMkdirMount(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		return err
	}
	return nil
}
