package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repo init --multi-writer makes a repository several appliances share
// (format 2.0); repo list then shows the appliance that wrote each point.
func TestRepoMultiWriterList(t *testing.T) {
	t.Setenv("VMVAULT_CACHE_DIR", t.TempDir()) // each writer's catalog lives in a cache
	dir := t.TempDir()
	repo := filepath.Join(dir, "shared")
	if r := runCLIEnv(t, nil, "repo", "init", "--repo", repo, "--no-encryption", "--multi-writer"); r.code != 0 {
		t.Fatalf("init --multi-writer: %s", r.stderr)
	}
	img := makeRandom(t, dir, 1<<20, 5)
	if r := runCLIEnv(t, nil, "image", "backup", "--repo", repo, "--vm", "web", img); r.code != 0 {
		t.Fatalf("backup: %s", r.stderr)
	}
	r := runCLIEnv(t, nil, "repo", "list", "--repo", repo)
	if r.code != 0 {
		t.Fatalf("list: %s", r.stderr)
	}
	host, _ := os.Hostname()
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "WRITER") || !strings.Contains(lines[1], host) {
		t.Fatalf("repo list of a shared repository:\n%s\nwant a WRITER column naming %s", r.stdout, host)
	}
	r = runCLIEnv(t, nil, "repo", "list", "--repo", repo, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"writer": "`+host+`"`) {
		t.Fatalf("repo list --json: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
