package drconfig

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/web/api"
)

// waitFor polls cond every 10 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The saver: nothing at the start of an unconfigured appliance (it must not
// bury a configuration a fresh daemon could import), one save for a burst
// of changes after the debounce, and a change still pending at the stop is
// saved before the saver returns.
func TestConfigSaverDebounce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	repo := repository.TestRepository(t)
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	cfg := SavedConfig{Format: SavedConfigFormat}
	cs := &Saver{collect: func(context.Context) (SavedConfig, error) { mu.Lock(); defer mu.Unlock(); return cfg, nil },
		repos: func() map[string]*repository.Repository { return map[string]*repository.Repository{"main": repo} }, clk: clk, debounce: time.Second,
		log: slog.New(slog.DiscardHandler), kick: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() { defer close(done); cs.Run(ctx) }()
	saved := func() SavedConfig {
		t.Helper()
		raw, _, err := repo.LoadApplianceConfig(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var c SavedConfig
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The saver waits for the debounce (its timer armed) only once the
	// save at start is done: nothing was saved then.
	cs.Changed()
	clk.BlockUntil(1, done)
	if _, _, err := repo.LoadApplianceConfig(context.Background()); !errors.Is(err, repository.ErrNotFound) {
		t.Fatalf("an empty configuration was saved at start: %v", err)
	}
	mu.Lock()
	cfg.Jobs = []policy.Job{policy.NewJob("a", "A", "main", time.UTC)}
	mu.Unlock()
	for range 5 {
		cs.Changed()
	}
	mu.Lock()
	cfg.Jobs = append(cfg.Jobs, policy.NewJob("b", "B", "main", time.UTC)) // during the wait: in the same save
	mu.Unlock()
	clk.Advance(time.Second)
	waitFor(t, 5*time.Second, "the debounced save", func() bool { return cs.saves.Load() == 1 })
	if c := saved(); len(c.Jobs) != 2 {
		t.Fatalf("saved %d jobs", len(c.Jobs))
	}
	// The next change arms the timer again: the saver is back to waiting
	// and the burst made one save.
	cs.Changed()
	clk.BlockUntil(1, done)
	if n := cs.saves.Load(); n != 1 {
		t.Fatalf("%d saves for one burst", n)
	}
	mu.Lock()
	cfg.Jobs = cfg.Jobs[:1]
	mu.Unlock()
	cancel()
	<-done
	if n := cs.saves.Load(); n != 2 || len(saved().Jobs) != 1 {
		t.Fatalf("the change pending at the stop: %d saves, %d jobs", n, len(saved().Jobs))
	}
}

// The saved configuration's format 1 is pinned: a save of this appliance
// configuration is testdata/savedconfig_v1.json (its jobs aside), and that
// file decodes back to it (an old save must stay importable).
func TestSavedConfigGolden(t *testing.T) {
	w := policy.Window{Location: time.UTC}
	w.Days[time.Sunday] = []policy.Range{{Start: 60, End: 300}}
	job := policy.NewJob("nightly", "Nightly", "main", time.UTC)
	c := SavedConfig{Format: 1, Saved: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		Jobs:         []policy.Job{job},
		CopyJobs:     []copyjob.Job{{ID: "offsite", Name: "Offsite", Source: "main", Target: "s3", Jobs: []string{"nightly"}, Window: w, Retention: policy.Retention{Last: 7}, Enabled: true}},
		Settings:     &api.Settings{TimeZone: "Europe/Paris", EventRetentionDays: 30},
		Users:        []SavedUser{{Name: "admin", Role: "administrator", Source: "local"}},
		Repositories: []SavedRepo{{Name: "main", Path: "/srv/vmvault"}, {Name: "s3", Path: "s3:https://s3.example.com/b/a1"}}}
	got, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "savedconfig_v1.json")
	if os.Getenv("VMVAULT_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	// Byte for byte but the jobs: policy.Job's JSON is policy's (a field it
	// adds is read by this format too); their decoding is checked below.
	withoutJobs := func(b []byte) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "jobs")
		out, _ := json.Marshal(m)
		return string(out)
	}
	if withoutJobs(got) != withoutJobs(want) {
		t.Fatalf("format 1 changed:\n%s\nwant:\n%s", got, want)
	}
	var back SavedConfig
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	if back.CopyJobs[0].Window.Days[time.Sunday][0] != w.Days[time.Sunday][0] || back.Settings.TimeZone != "Europe/Paris" || back.Jobs[0].Repository != "main" {
		t.Fatalf("decoded %+v", back)
	}
}

// Whatever a repository holds as a saved configuration, decoding it never
// panics, and what it accepts encodes again with a known format.
func FuzzSavedConfig(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "savedconfig_v1.json")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{"format":2}`))
	f.Add([]byte(`{"format":3}`))
	f.Add([]byte(`{"format":1,"copyJobs":[{"id":"a","source":"x","target":"x"}]}`))
	f.Add([]byte(`{"format":1,"jobs":[{"id":"a","window":{"location":"Nowhere","days":{}}}]}`))
	f.Add([]byte(`{"format":1,"settings":{"timeZone":"","eventRetentionDays":0}}`))
	f.Add([]byte(`{"format":1,"users":[{"name":"VSPHERE.LOCAL\\ops","role":"operator","source":"vcenter"},{"name":"a\u0000","role":"operator","source":"local"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		sc, err := decodeSavedConfig(raw)
		if err != nil {
			return
		}
		if sc.Format != SavedConfigFormat && sc.Format != SavedConfigScopes {
			t.Fatalf("accepted format %d", sc.Format)
		}
		if _, err := json.Marshal(sc); err != nil {
			t.Fatalf("accepted %q, cannot encode it: %v", raw, err)
		}
		for _, u := range sc.Users {
			if auth.CheckImportedName(u.Name) != nil || (u.Source != auth.SourceLocal && u.Source != auth.SourceVCenter) {
				t.Fatalf("accepted user %+v", u)
			}
		}
	})
}
