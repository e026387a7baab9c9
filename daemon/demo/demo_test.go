package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	s1, err := secretFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s1) < 20 {
		t.Fatalf("secret %q is too short", s1)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v, want 0600", fi.Mode().Perm())
	}
	s2, err := secretFile(path)
	if err != nil || s2 != s1 {
		t.Fatalf("second read = %q, %v; want the first secret %q", s2, err, s1)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secretFile(empty); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty secret file: err = %v, want \"is empty\"", err)
	}
}

// A repository whose passphrase file went missing is reported, not
// re-initialised or opened with a new secret.
func TestInitRepositoryMissingPassphrase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	repo, pass := filepath.Join(dir, "repository"), filepath.Join(dir, PassFile)
	if err := initRepository(ctx, repo, pass); err != nil {
		t.Fatal(err)
	}
	if err := initRepository(ctx, repo, pass); err != nil {
		t.Fatalf("second run on the same state: %v", err)
	}
	if err := os.Remove(pass); err != nil {
		t.Fatal(err)
	}
	err := initRepository(ctx, repo, pass)
	if err == nil || !strings.Contains(err.Error(), "passphrase file is missing") {
		t.Fatalf("err = %v, want the missing passphrase file named", err)
	}
	if _, err := os.Stat(pass); !os.IsNotExist(err) {
		t.Errorf("a new passphrase file was written for the old repository")
	}
}

func TestJobBodySelectsTheSamples(t *testing.T) {
	b := jobBody(nil)
	if b["id"] != JobID || b["repository"] != RepoName {
		t.Errorf("job %v/%v, want %s in %s", b["id"], b["repository"], JobID, RepoName)
	}
	days := b["window"].(map[string]any)["days"].(map[string][]string)
	if len(days) != 7 {
		t.Errorf("window has %d days, want 7", len(days))
	}
}
