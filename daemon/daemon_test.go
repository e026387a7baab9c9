package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/repository"
)

// lifecycleConfig writes a configuration without vCenter over a fresh
// repository in dir and loads it; extra is appended to it.
func lifecycleConfig(t *testing.T, dir, extra string) *Config {
	t.Helper()
	repoDir := filepath.Join(dir, "repo")
	repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	p := filepath.Join(dir, "vmvault.yaml")
	y := fmt.Sprintf("listen: 127.0.0.1:0\ntls: {disable: true}\nstate_dir: state\nlog_level: debug\nrepositories:\n  - {name: main, path: %s, passphrase_env: MAIN_PASS}\n", repoDir) + extra
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func lifecycleOptions(vars map[string]string) Options {
	return Options{Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, Getenv: func(k string) string { return vars[k] }}
}

// assertReleased fails unless the state database and the repository can
// be opened again, i.e. the daemon let go of both.
func assertReleased(t *testing.T, cfg *Config) {
	t.Helper()
	db, err := state.Open(filepath.Join(cfg.StateDir, "state.db"))
	if err != nil {
		t.Fatalf("state.db still held: %v", err)
	}
	db.Close()
	r, err := repository.Open(context.Background(), cfg.Repositories[0].Path, []byte("repo-pass"), repository.OpenOptions{})
	if err != nil {
		t.Fatalf("repository still held: %v", err)
	}
	r.Close()
}

// A New that fails half-way closes what it had opened: the state database
// and the first repository are free for the next start.
func TestNewClosesOnError(t *testing.T) {
	dir := t.TempDir()
	cfg := lifecycleConfig(t, dir, "")
	other := filepath.Join(dir, "other")
	repository.TestRepositoryWithPoint(t, other, "other-pass")
	cfg.Repositories = append(cfg.Repositories, RepoConfig{Name: "other", Path: other, PassphraseEnv: "OTHER_PASS"})
	_, err := New(context.Background(), cfg, lifecycleOptions(map[string]string{"MAIN_PASS": "repo-pass"}))
	if err == nil || !strings.Contains(err.Error(), "OTHER_PASS") {
		t.Fatalf("New without the second passphrase: %v", err)
	}
	assertReleased(t, cfg)
}

// New, then Close without Run, releases everything; a Run whose address is
// taken returns the listen error after stopping its background work, and
// Close then releases everything too.
func TestRunListenFailure(t *testing.T) {
	vars := map[string]string{"MAIN_PASS": "repo-pass", "VMVAULT_ADMIN_PASSWORD": "admin-secret-9"}
	dir := t.TempDir()
	cfg := lifecycleConfig(t, dir, "")
	d, err := New(context.Background(), cfg, lifecycleOptions(vars))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close without Run: %v", err)
	}
	assertReleased(t, cfg)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg.Listen = ln.Addr().String()
	d, err = New(context.Background(), cfg, lifecycleOptions(vars))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "listen on "+cfg.Listen) {
		t.Fatalf("Run on a taken address: %v", err)
	}
	if err := d.Run(context.Background()); err == nil {
		t.Fatal("a second Run was accepted")
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertReleased(t, cfg)
}
