package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/repository/s3store"
)

// Several writers (format 2.0, FORMAT.md §12a): each round three child
// processes work on one repository at once: writer A is killed -9 at a
// failpoint of its backup, writer B backs up to the end, and C deletes
// one of B's earlier points and reclaims (now and then killed at a
// reclaim failpoint). After each round the repository opens, check
// --read-data is clean and every committed point restores
// byte-identical. A few rounds in the default test;
// CRASHTEST_MW_KILLS=N runs N (make crashwalk).

const envCache = "CRASHTEST_CACHE" // a multi-writer child's catalog cache

// mwWriterFailpoints are the steps of a writer's backup a kill may hit.
var mwWriterFailpoints = []string{"pack.write", "pack.fsync", "pack.rename", "catalog.pack", "mw.publish", "mw.lease", "record.write", "record.rename", "catalog.point"}

// mwReclaimFailpoints are the steps of a reclaim a kill may hit.
var mwReclaimFailpoints = []string{"reclaim.condemn", "mw.condemned", "reclaim.repack", "reclaim.delete", "mw.finish"}

func openMW(ctx context.Context, dir, cache string) (*repository.Repository, error) {
	return repository.Open(ctx, dir, password, repository.OpenOptions{CacheBytes: 8 << 20, CacheDir: cache, Appliance: filepath.Base(cache)})
}

func TestMultiWriterCrash(t *testing.T) {
	rounds := 10
	if s := os.Getenv("CRASHTEST_MW_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CRASHTEST_MW_KILLS=%q: want a positive number", s)
		}
		rounds = n
	}
	root := fastDir(t)
	mwCrashRounds(t, root, filepath.Join(root, "repo"), rounds)
}

// TestS3MultiWriterCrash is TestMultiWriterCrash on S3 (versitygw): the
// leases, the log and the reclaim lock are conditional PUTs.
func TestS3MultiWriterCrash(t *testing.T) {
	srv := s3store.StartTestServer(t) // sets the AWS_* variables the children inherit
	loc := srv.Location("vmvault-mwcrash", "r")
	rounds := 4
	if s := os.Getenv("CRASHTEST_MW_KILLS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			rounds = max(n/10, 4)
		}
	}
	mwCrashRounds(t, t.TempDir(), loc, rounds)
}

func mwCrashRounds(t *testing.T, root, dir string, rounds int) {
	ctx := context.Background()
	err := repository.Init(ctx, dir, password, repository.InitOptions{
		Chunker: testChunker, KDF: repository.TestKDF, PackSize: testPackSize, CompressionLevel: "fastest", MultiWriter: true, CreateBucket: strings.HasPrefix(dir, "s3:")})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(26, 2026))
	v := newVerifier()
	var bPoints []string
	kills := 0
	for round := range rounds {
		imA, err := newImage(filepath.Join(root, "a.img"), 1<<20, uint64(round)*2+1)
		if err != nil {
			t.Fatal(err)
		}
		imB, err := newImage(filepath.Join(root, "b.img"), 1<<20, uint64(round)*2+2)
		if err != nil {
			t.Fatal(err)
		}
		// B shares half of A's image (cross-writer dedup while A dies).
		copy(imB.data[:len(imB.data)/2], imA.data[:len(imA.data)/2])
		if err := imA.write(); err != nil {
			t.Fatal(err)
		}
		if err := imB.write(); err != nil {
			t.Fatal(err)
		}
		vmA, vmB := fmt.Sprintf("a-%03d", round), fmt.Sprintf("b-%03d", round)
		v.byVM[vmA], v.byVM[vmB] = imA.sum(), imB.sum()
		fpA := mwWriterFailpoints[rng.IntN(len(mwWriterFailpoints))]
		specA := fmt.Sprintf("%s=kill@%d", fpA, 1+rng.IntN(3))
		specC := ""
		if round%2 == 1 {
			specC = fmt.Sprintf("%s=kill@1", mwReclaimFailpoints[rng.IntN(len(mwReclaimFailpoints))])
		}
		del := ""
		if len(bPoints) > 1 {
			del = bPoints[0]
		}
		var wg sync.WaitGroup
		var outA, outB, outC outcome
		var errA, errB, errC error
		env := func(cache string, extra ...string) []string {
			return append([]string{envRepo + "=" + dir, envCache + "=" + filepath.Join(root, cache)}, extra...)
		}
		wg.Add(3)
		go func() {
			defer wg.Done()
			outA, errA = runChildProc(t, "mwbackup", specA, env("app-a", envImage+"="+imA.path, envVM+"="+vmA)...)
		}()
		go func() {
			defer wg.Done()
			outB, errB = runChildProc(t, "mwbackup", "", env("app-b", envImage+"="+imB.path, envVM+"="+vmB)...)
		}()
		go func() {
			defer wg.Done()
			outC, errC = runChildProc(t, "mwreclaim", specC, env("app-c", envDelete+"="+del)...)
		}()
		wg.Wait()
		for name, e := range map[string]error{"A": errA, "B": errB, "C": errC} {
			if e != nil {
				t.Fatalf("round %d: writer %s: %v", round, name, e)
			}
		}
		if outA.killed {
			kills++
		}
		if outC.killed {
			kills++
		}
		idB := committedID(outB.stdout)
		if idB == "" {
			t.Fatalf("round %d: writer B did not commit while A was killed at %s: %q", round, fpA, outB.stdout)
		}
		v.points[idB] = imB.sum()
		bPoints = append(bPoints, idB)
		if id := committedID(outA.stdout); id != "" {
			v.points[id] = imA.sum()
		}
		mayVanish := ""
		if del != "" {
			mayVanish = del
			if strings.Contains(outC.stdout, "deleted "+del) {
				delete(v.points, del)
			}
			bPoints = bPoints[1:]
		}
		r, err := openMW(ctx, dir, filepath.Join(root, "verifier"))
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		verr := v.verifyOpen(ctx, r, mayVanish, fmt.Sprintf("round %d (A killed at %s=%v, C %q killed=%v)", round, fpA, outA.killed, specC, outC.killed))
		r.Close()
		if verr != nil || v.losses > 0 {
			t.Fatalf("round %d: %d losses: %s", round, v.losses, strings.Join(v.lossLog, "; "))
		}
	}
	t.Logf("%d rounds, %d kills, %d points verified", rounds, kills, len(v.points))
	if kills == 0 {
		t.Fatal("no child was killed: the failpoints were not reached")
	}
}

func committedID(stdout string) string {
	for _, l := range strings.Split(stdout, "\n") {
		if id, ok := strings.CutPrefix(l, "committed "); ok {
			return strings.TrimSpace(id)
		}
	}
	return ""
}

// mwChild runs a multi-writer child op (mwbackup, mwreclaim).
func mwChild(ctx context.Context, op string) error {
	r, err := openMW(ctx, os.Getenv(envRepo), os.Getenv(envCache))
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Println(openedLine)
	switch op {
	case "mwbackup":
		id, err := backupImage(ctx, r, os.Getenv(envImage), os.Getenv(envVM))
		if err != nil {
			return err
		}
		fmt.Printf("committed %s\n", id)
	case "mwreclaim":
		if id := os.Getenv(envDelete); id != "" {
			if err := r.Delete(ctx, id); err != nil {
				return err
			}
			fmt.Printf("deleted %s\n", id)
		}
		if _, err := r.Reclaim(ctx, nil); err != nil {
			return err
		}
	}
	return r.Close()
}
