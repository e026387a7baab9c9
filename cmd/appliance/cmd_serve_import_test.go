package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/repository"
)

// serve --import-config reaches the daemon's import with the passphrase of
// the usual flag or variable, and its refusals are clear exits.
func TestServeImportConfigFlags(t *testing.T) {
	if r := runCLIEnv(t, nil, "serve", "--config", "x.yaml", "--force"); r.code != 2 || !strings.Contains(r.stderr, "--import-config") {
		t.Fatalf("--force alone: exit %d: %s", r.code, r.stderr)
	}
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	if err := repository.Init(context.Background(), repoDir, []byte("pw"), repository.InitOptions{Chunker: repository.TestChunker, KDF: repository.TestKDF}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := repository.Init(context.Background(), other, []byte("other-pw"), repository.InitOptions{Chunker: repository.TestChunker, KDF: repository.TestKDF}); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "vmvault.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\ntls: {disable: true}\nstate_dir: %s\nrepositories:\n  - {name: main, path: %s, passphrase_env: P}\n", filepath.Join(dir, "state"), repoDir)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"P": "pw", "VMVAULT_ADMIN_PASSWORD": "admin-pw-123"}
	r := runCLIEnv(t, env, "serve", "--config", cfg, "--import-config", "main")
	if r.code == 0 || !strings.Contains(r.stderr, "no saved appliance configuration") {
		t.Fatalf("configured repository without a saved configuration: exit %d: %s", r.code, r.stderr)
	}
	// A location that is not configured: its passphrase from $VMVAULT_PASSWORD.
	env["VMVAULT_PASSWORD"] = "wrong"
	r = runCLIEnv(t, env, "serve", "--config", cfg, "--import-config", other)
	if r.code == 0 || strings.Contains(r.stderr, "no saved appliance configuration") {
		t.Fatalf("wrong passphrase: exit %d: %s", r.code, r.stderr)
	}
	env["VMVAULT_PASSWORD"] = "other-pw"
	r = runCLIEnv(t, env, "serve", "--config", cfg, "--import-config", other)
	if r.code == 0 || !strings.Contains(r.stderr, "no saved appliance configuration") {
		t.Fatalf("right passphrase: exit %d: %s", r.code, r.stderr)
	}
}
