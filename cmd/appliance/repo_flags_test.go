package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
)

// TestRetryLock: a repository command on a locked repository names the
// holder; with --retry-lock it waits for the holder and then runs.
func TestRetryLock(t *testing.T) {
	repo := initRepo(t)
	holder, err := repository.Open(context.Background(), repo, []byte(testPassword), repository.OpenOptions{Holder: "daemon"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := runCLI(t, "repo", "list", "--repo", repo, "--retry-lock", "300ms")
	if res.code == 0 {
		t.Fatal("repo list ran on a locked repository")
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Fatalf("gave up after %s, --retry-lock was 300ms", time.Since(start))
	}
	for _, want := range []string{"locked", "daemon", "PID " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(res.stderr, want) {
			t.Fatalf("stderr %q does not say %q", res.stderr, want)
		}
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		holder.Close()
	}()
	if res := runCLI(t, "repo", "check", "--repo", repo, "--retry-lock", "30s"); res.code != 0 {
		t.Fatalf("repo check --retry-lock 30s: exit %d: %s", res.code, res.stderr)
	}
	if res := runCLI(t, "repo", "list", "--repo", repo, "--retry-lock", "-1s"); res.code == 0 {
		t.Fatal("a negative --retry-lock was accepted")
	}
}

// TestRecatalogWithCorruptCatalog: `repo recatalog` (and every other
// command) used to die in a bbolt panic on a damaged index.db. It now
// says once that it moved the file aside, and rebuilds the catalog.
func TestRecatalogWithCorruptCatalog(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	img := makeRandom(t, dir, 2<<20, 91)
	mustCLI(t, "image", "backup", "--repo", repo, "--vm", "a", img)
	path := filepath.Join(repo, "index.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for pg := 2; pg < len(b)/4096; pg++ {
		b[pg*4096+8] ^= 0x5a // page flags: bbolt panicked
	}
	os.WriteFile(path, b, 0o600)
	res := runCLI(t, "repo", "recatalog", "--repo", repo)
	if res.code != 0 {
		t.Fatalf("repo recatalog: exit %d: %s", res.code, res.stderr)
	}
	if n := strings.Count(res.stderr, "moved it aside"); n != 1 {
		t.Fatalf("stderr says %d times that the catalog was moved aside, want once: %s", n, res.stderr)
	}
	if m, _ := filepath.Glob(path + ".corrupt-*"); len(m) != 1 {
		t.Fatalf("moved-aside catalogs: %v", m)
	}
	mustCLI(t, "repo", "check", "--repo", repo, "--read-data")
	if out := mustCLI(t, "repo", "list", "--repo", repo); !strings.Contains(out, " a ") {
		t.Fatalf("repo list after recatalog: %s", out)
	}
}

// TestReadOnlyFlag: with --read-only a command lists the points of a
// repository another process holds, and a write through it is refused.
func TestReadOnlyFlag(t *testing.T) {
	repo := initRepo(t)
	holder, err := repository.Open(context.Background(), repo, []byte(testPassword), repository.OpenOptions{Holder: "daemon"})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if res := runCLI(t, "repo", "list", "--repo", repo); res.code == 0 || !strings.Contains(res.stderr, "locked") {
		t.Fatalf("repo list without --read-only on a held repository: exit %d %q", res.code, res.stderr)
	}
	if res := runCLI(t, "repo", "list", "--repo", repo, "--read-only"); res.code != 0 {
		t.Fatalf("repo list --read-only: exit %d: %s", res.code, res.stderr)
	}
	if res := runCLI(t, "repo", "reclaim", "--repo", repo, "--read-only"); res.code == 0 || !strings.Contains(res.stderr, "read-only") {
		t.Fatalf("repo reclaim --read-only: exit %d %q, want a refusal naming read-only", res.code, res.stderr)
	}
}
