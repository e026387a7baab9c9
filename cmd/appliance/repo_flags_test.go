package main

import (
	"context"
	"os"
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
