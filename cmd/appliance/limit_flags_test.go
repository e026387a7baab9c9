package main

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
)

// repoWithRandomPoint makes a repository holding one point of n random
// (incompressible) bytes.
func repoWithRandomPoint(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	dir := initRepo(t)
	r, err := repository.Open(ctx, dir, []byte(testPassword), repository.OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	var ext []repository.Extent
	for off := 0; off < n; off += 512 << 10 {
		b := make([]byte, 512<<10)
		rand.Read(b)
		id, _, _, err := s.PutChunk(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		ext = append(ext, repository.Extent{Offset: int64(off), Length: int64(len(b)), ID: id})
	}
	root, err := s.PutDisk(ctx, int64(n), ext)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, repository.NewPoint{VM: repository.VMIdentity{Name: "web01"}, Time: time.Now(), Consistency: "crash",
		Disks: []repository.NewDisk{{Key: 2000, Label: "Hard disk 1", Capacity: int64(n), Map: root}}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLimitFlags(t *testing.T) {
	repo := initRepo(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"repo", "list", "--repo", repo, "--limit-upload", "-1"}, "--limit-upload -1"},
		{[]string{"repo", "check", "--repo", repo, "--limit-download", "1e9"}, "--limit-download"},
		{[]string{"repo", "list", "--repo", repo, "--limit-download", "fast"}, "limit-download"},
		{[]string{"repo", "copy", "--from", repo, "--to", repo + "2", "--limit-upload", "-2"}, "--limit-upload -2"},
	} {
		res := runCLI(t, tc.args...)
		if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming %q", tc.args, res.code, res.stderr, tc.want)
		}
	}
	if res := runCLI(t, "repo", "list", "--repo", repo, "--limit-upload", "5", "--limit-download", "0.5"); res.code != 0 {
		t.Fatalf("repo list with limits: %d %s", res.code, res.stderr)
	}
}

// repo copy --limit-upload paces what reaches the target: 2 MiB at 4 MB/s
// cannot take less than half a second (the limiter starts empty). Only
// this bound is checked here; internal/ratelimit and repository measure
// the ±10%.
func TestRepoCopyLimitUpload(t *testing.T) {
	src := repoWithRandomPoint(t, 2<<20)
	dst := initRepo(t)
	vars := map[string]string{"VMVAULT_PASSWORD": testPassword, "VMVAULT_TO_PASSWORD": testPassword}
	start := time.Now()
	res := runCLIEnv(t, vars, "repo", "copy", "--from", src, "--to", dst, "--limit-upload", "4", "--unsafe-no-fsync")
	if res.code != 0 {
		t.Fatalf("repo copy: %d %s", res.code, res.stderr)
	}
	min := time.Duration(float64(2<<20) / 4e6 * 0.9 * float64(time.Second))
	if d := time.Since(start); d < min {
		t.Fatalf("a copy of 2 MiB at 4 MB/s took %v, less than %v", d, min)
	}
}
