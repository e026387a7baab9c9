package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/repository"
)

// repo check names a point whose commit record is gone and says to run
// repo repair; repo repair rewrites it and check is clean (issue 24).
func TestRepoRepairCLI(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "repo")
	p := repository.TestRepositoryWithPoint(t, repo, testPassword)
	if err := os.Remove(filepath.Join(repo, "points", p.ID)); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "repo", "check", "--repo", repo)
	if r.code == 0 || !strings.Contains(r.stdout, p.ID) || !strings.Contains(r.stderr, "appliance repo repair --repo "+repo) {
		t.Fatalf("check: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	out := mustCLI(t, "repo", "repair", "--repo", repo)
	if !strings.Contains(out, "rewritten "+p.ID) || !strings.Contains(out, "1 commit record(s) rewritten, 0 left") {
		t.Fatalf("repair: %q", out)
	}
	mustCLI(t, "repo", "check", "--repo", repo)
	if out := mustCLI(t, "repo", "repair", "--repo", repo); !strings.Contains(out, "0 commit record(s) rewritten, 0 left") {
		t.Fatalf("second repair: %q", out)
	}
}
