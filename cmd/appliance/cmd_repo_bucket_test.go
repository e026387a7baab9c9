package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/repository/s3store"
)

// `repo init` on a mistyped bucket creates nothing and says how to create
// it; --create-bucket creates it (issue 24).
func TestRepoInitBucketNeedsCreateBucket(t *testing.T) {
	srv := s3store.StartTestServer(t)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(t.TempDir(), "cache"))
	loc := srv.Location("vmvault-tpyo", "repo")
	r := runCLI(t, "repo", "init", "--repo", loc, "--kdf-memory", "1024", "--kdf-time", "1")
	if r.code == 0 || !strings.Contains(r.stderr, "bucket vmvault-tpyo does not exist (add --create-bucket to create it)") {
		t.Fatalf("init in a missing bucket: exit %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, "repo", "init", "--repo", loc, "--kdf-memory", "1024", "--kdf-time", "1", "--create-bucket")
	if r.code != 0 {
		t.Fatalf("init --create-bucket: exit %d, %q", r.code, r.stderr)
	}
}
