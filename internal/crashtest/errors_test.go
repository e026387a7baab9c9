package crashtest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/repository"
)

// enable turns failpoints on in this process through the variable, the
// only switch there is; disable turns them off again.
func enable(t *testing.T, spec string) {
	t.Helper()
	t.Setenv(failpoint.EnvVar, spec)
	if err := failpoint.Reload(); err != nil {
		t.Fatal(err)
	}
}

func disable(t *testing.T) {
	t.Helper()
	t.Setenv(failpoint.EnvVar, "")
	if err := failpoint.Reload(); err != nil {
		t.Fatal(err)
	}
}

// errorOp runs one operation in process on an open repository.
type errorOp struct {
	name string
	run  func(ctx context.Context, r *repository.Repository, w *errWalker) (vanish string, err error)
}

type errWalker struct {
	im   *image
	v    *verifier
	runs int
}

var errorOps = []errorOp{
	{"backup", func(ctx context.Context, r *repository.Repository, w *errWalker) (string, error) {
		w.runs++
		vm := fmt.Sprintf("eio-%d", w.runs)
		h, err := w.im.scribble(10)
		if err != nil {
			return "", err
		}
		w.v.byVM[vm] = h
		id, err := backupImage(ctx, r, w.im.path, vm)
		if err == nil {
			w.v.points[id] = h
		}
		return "", err
	}},
	{"reclaim", func(ctx context.Context, r *repository.Repository, w *errWalker) (string, error) {
		pts, err := oldest(ctx, r)
		if err != nil || len(pts) < 2 {
			return "", fmt.Errorf("need two points: %v", err)
		}
		if err := r.Delete(ctx, pts[0].ID); err != nil {
			return pts[0].ID, err
		}
		_, err = r.Reclaim(ctx, nil)
		return pts[0].ID, err
	}},
	{"recatalog", func(ctx context.Context, r *repository.Repository, w *errWalker) (string, error) {
		return "", r.Recatalog(ctx, nil)
	}},
}

// TestFailpointErrors makes every write step of backup, delete+reclaim and
// recatalog fail with EIO and with ENOSPC (first and last hit): the call
// fails with an error that says so (errors.Is the errno; a full disk says
// the repository's disk is full), nothing is committed half (after a
// reopen check --read-data is clean and every point restores
// byte-identical), and the next backup and reclaim succeed.
func TestFailpointErrors(t *testing.T) {
	ctx := context.Background()
	base := fastDir(t)
	repo := filepath.Join(base, "repo")
	initRepo(t, repo)
	im, err := newImage(filepath.Join(base, "disk.img"), 1<<20, 11)
	if err != nil {
		t.Fatal(err)
	}
	w := &errWalker{im: im, v: newVerifier()}
	withRepo := func(fn func(r *repository.Repository)) {
		t.Helper()
		r, err := openRepo(ctx, repo)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		fn(r)
		if err := r.Close(); err != nil {
			t.Logf("close after a failed step: %v", err)
		}
	}
	clean := func() {
		t.Helper()
		withRepo(func(r *repository.Repository) {
			if _, err := errorOps[0].run(ctx, r, w); err != nil {
				t.Fatalf("next backup: %v", err)
			}
			pts, err := oldest(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			for ; len(pts) > 3; pts = pts[1:] {
				if err := r.Delete(ctx, pts[0].ID); err != nil {
					t.Fatal(err)
				}
				delete(w.v.points, pts[0].ID)
			}
			if _, err := r.Reclaim(ctx, nil); err != nil {
				t.Fatalf("next reclaim: %v", err)
			}
		})
	}
	for range 3 {
		clean()
	}
	failed := 0
	for _, op := range errorOps {
		// Learn the failpoints this op passes and how often.
		var counts map[string]int64
		var vanish string
		withRepo(func(r *repository.Repository) {
			enable(t, "count")
			v, err := op.run(ctx, r, w)
			vanish = v
			counts = failpoint.Counts()
			disable(t)
			if err != nil {
				t.Fatalf("%s without failpoints: %v", op.name, err)
			}
		})
		if err := w.v.verify(ctx, repo, vanish, op.name); err != nil {
			t.Fatalf("%s: %v %v", op.name, err, w.v.lossLog)
		}
		clean()
		var names []string
		for n, c := range counts {
			if c > 0 && n != "catalog.init" { // Open's, not the op's
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			for _, hit := range uniq(1, counts[name]) {
				for _, act := range []struct {
					spec  string
					errno syscall.Errno
				}{{"eio", syscall.EIO}, {"enospc", syscall.ENOSPC}} {
					label := fmt.Sprintf("%s with %s=%s@%d", op.name, name, act.spec, hit)
					var vanish string
					withRepo(func(r *repository.Repository) {
						enable(t, fmt.Sprintf("%s=%s@%d", name, act.spec, hit))
						v, err := op.run(ctx, r, w)
						disable(t)
						vanish = v
						switch {
						case err == nil:
							// The hit count was not reached this time (fewer
							// new chunks): nothing to assert about the error.
						case !errors.Is(err, act.errno):
							t.Errorf("%s: error %v does not wrap %v", label, err, act.errno)
						case !strings.Contains(err.Error(), name):
							t.Errorf("%s: error %q does not name the failing step", label, err)
						case act.errno == syscall.ENOSPC && !strings.Contains(err.Error(), "repository's disk is full"):
							t.Errorf("%s: error %q does not say the disk is full", label, err)
						default:
							failed++
						}
					})
					if err := w.v.verify(ctx, repo, vanish, label); err != nil {
						t.Fatalf("%s: %v: %v", label, err, w.v.lossLog)
					}
					clean()
				}
			}
		}
	}
	if w.v.losses > 0 {
		t.Fatalf("%d losses: %v", w.v.losses, w.v.lossLog)
	}
	if failed < 40 {
		t.Fatalf("only %d injected errors failed a call", failed)
	}
	t.Logf("%d injected EIO/ENOSPC errors, each failed its call cleanly; 0 losses", failed)
}

func uniq(a, b int64) []int64 {
	if a == b {
		return []int64{a}
	}
	return []int64{a, b}
}
