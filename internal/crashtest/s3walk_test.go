package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/repository/s3store"
)

// copyChild copies the points of the repository at src named by
// CRASHTEST_POINTS (comma separated; empty: every point) into dst and
// prints "copied ID VM" for each point it committed in dst.
func copyChild(ctx context.Context, src string, dst *repository.Repository) error {
	s, err := openRepo(ctx, src)
	if err != nil {
		return fmt.Errorf("open copy source: %w", err)
	}
	defer s.Close()
	var pts []string
	if p := os.Getenv(envPoints); p != "" {
		pts = strings.Split(p, ",")
	}
	res, err := repository.Copy(ctx, s, dst, repository.CopyOptions{Points: pts, Workers: 2})
	if res != nil {
		for _, p := range res.Points {
			if !p.Skipped && p.Target != "" {
				fmt.Printf("copied %s %s\n", p.Target, p.VM)
			}
		}
	}
	if err != nil {
		return err
	}
	return s.Close()
}

const envPoints = "CRASHTEST_POINTS" // copy: the source points to copy

// s3Required are the failpoints the S3 walk must kill at least once: the
// write steps of a pack and of a commit record as the S3 backend hits them
// (stage, upload, acknowledged), every phase of a reclaim, the repack of a
// repacking reclaim, a copy's commit, a recatalog from the bucket, and the
// recovery at open.
var s3Required = []string{
	"pack.create", "pack.write", "pack.tail", "pack.fsync", "pack.rename", "pack.dirsync", "catalog.pack",
	"record.write", "record.fsync", "record.rename", "record.dirsync", "catalog.point",
	"point.delete", "catalog.delete",
	"reclaim.condemn", "reclaim.repack", "reclaim.barrier", "reclaim.delete", "reclaim.dirsync", "reclaim.catalog",
	"copy.commit", "recatalog.rename", "recatalog.open", "recatalog.done",
}

// s3Ops are the operations the S3 walk kills. "repack" is a reclaim
// after a point was deleted whose packs are mostly dead but share live
// blobs with the next point (the reclaim copies them into new packs
// before it deletes; prepareRepack); "copyto" copies a local
// repository's newest point into the S3 one, "copyfrom" the S3 one's
// newest into the local one.
var s3Ops = []string{"full", "backup", "reclaim", "repack", "recatalog", "lock", "copyto", "copyfrom"}

// childOp is the child process's operation for a walk op.
func childOp(op string) string {
	if op == "copyto" || op == "copyfrom" {
		return "copy"
	}
	return op
}

// TestCrashWalkS3 is TestCrashWalk against an S3 repository served by
// versitygw on loopback: it SIGKILLs a full backup, an incremental, a
// delete + reclaim, a repacking reclaim, a recatalog, a lock + unlock, a
// copy local -> S3 and a copy S3 -> local at every failpoint they hit, at
// the first and the last hit (S3CRASHWALK_HITS=N takes N hit counts per
// failpoint, spread from the first to the last: a longer walk), and after
// each kill: kills the recovery of the next open, loses the catalog cache
// every third kill (rebuilt from the bucket), and proves the contract:
// the repository opens, check --read-data is clean, every committed point
// restores byte-identical (on both sides of a copy), and the next backup,
// reclaim and copy succeed.
func TestCrashWalkS3(t *testing.T) {
	hits := 2
	if testing.Short() {
		hits = 1
	}
	hits = envCount(t, "S3CRASHWALK_HITS", hits)
	rng, seed := walkRand(t, 5)
	start := time.Now()
	ctx := context.Background()

	srv := s3store.StartTestServer(t) // sets the AWS_* variables the children inherit
	base := fastDir(t)
	cache := filepath.Join(base, "cache")
	t.Setenv("VMVAULT_CACHE_DIR", cache)
	repo := srv.Location("vmvault-crash", "walk")
	initS3Walk(t, repo)
	local := filepath.Join(base, "local")
	initS3Walk(t, local)
	im, err := newImage(filepath.Join(base, "disk.img"), 1<<20, seed)
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier()
	lv := &verifier{points: map[string][32]byte{}, byVM: v.byVM} // VM names are unique across both
	w := &s3walker{
		walker: &walker{t: t, ctx: ctx, repo: repo, im: im, v: v, recoveryAt: map[string]int{}},
		local:  local, lv: lv, cache: cache, killedAt: map[string]int{}, took: map[string]time.Duration{}, opTime: map[string]time.Duration{},
	}
	for range 3 {
		w.cleanOps(false)
	}
	w.localBackup()
	w.copyClean("copyto")
	w.copyClean("copyfrom")
	if v.losses+lv.losses > 0 {
		t.Fatalf("the walk's setup failed: %v %v", v.lossLog, lv.lossLog)
	}

	// Two count runs per op, and the plan takes the smaller count of each
	// failpoint (the one count when only one run passed there): how much a
	// run does varies with the data and with what the previous steps left
	// (a reclaim merges small packs only every few runs), and a last hit
	// both runs reached is one a kill run reaches too.
	counts := map[string]map[string]int64{}
	for round := range 2 {
		for _, op := range s3Ops {
			env, vanish := w.prepare(op)
			began := time.Now()
			c, out := childCounts(t, childOp(op), env...)
			if d := time.Since(began); d > w.opTime[op] {
				w.opTime[op] = d
			}
			w.acknowledge(op, out)
			w.verifyAfter(op, vanish, "after count run "+op)
			if v.losses+lv.losses > 0 {
				t.Fatalf("after the uninterrupted %s: %v %v", op, v.lossLog, lv.lossLog)
			}
			w.after(op)
			t.Logf("%s hits: %s", op, strings.ReplaceAll(strings.TrimSpace(failpoint.FormatCounts(c)), "\n", " "))
			if round == 0 {
				counts[op] = c
				continue
			}
			for name, n := range c {
				if m := counts[op][name]; m > 0 && n > 0 {
					counts[op][name] = min(m, n)
				} else {
					counts[op][name] = max(m, n) // one run did not pass there
				}
			}
		}
	}
	for op, c := range counts {
		// Every child opens the repository: the open's own steps are the
		// same code whatever the op, so they are walked in the full backup
		// and the recatalog (which opens a new catalog) only.
		if op != "full" && op != "recatalog" {
			delete(c, "catalog.init")
			delete(c, "reconcile.points")
			delete(c, "reconcile.pack")
		}
		// A plain delete + reclaim repacks only now and then (small tail
		// packs merged): the repack op walks the repack's steps.
		if op == "reclaim" {
			for _, name := range []string{"reclaim.repack", "pack.create", "pack.write", "pack.tail", "pack.fsync", "pack.rename", "pack.dirsync", "catalog.pack"} {
				delete(c, name)
			}
		}
	}
	if counts["repack"]["reclaim.repack"] == 0 {
		t.Errorf("the repacking reclaim repacked nothing: %v", counts["repack"])
	}
	for _, name := range []string{"reclaim.condemn", "reclaim.barrier", "reclaim.delete", "reclaim.dirsync", "reclaim.catalog"} {
		if counts["reclaim"][name] == 0 {
			t.Errorf("delete + reclaim on S3 never reaches %s", name)
		}
	}
	for _, op := range []string{"copyto", "copyfrom"} {
		if counts[op]["copy.commit"] == 0 || counts[op]["pack.rename"] == 0 {
			t.Errorf("the %s count run copied nothing: %v", op, counts[op])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Every pair at its first and last hit (hits per pair), as many as the
	// plan's quota allows.
	target := 0
	for _, c := range counts {
		for _, n := range c {
			target += int(min(n, int64(hits)))
		}
	}
	steps := plan(counts, target)
	// Failpoints sit between the steps of a write; a kill at a random
	// moment also lands inside one: mid-PUT of a pack or a record, mid
	// DELETE, between two requests of a listing.
	// The moment is drawn from the op's own work: after the child opened
	// the repository, within the time its count run took less what a
	// child that only opens and closes takes.
	began := time.Now()
	if _, err := runChildProc(t, "open", "count", envRepo+"="+repo); err != nil {
		t.Fatal(err)
	}
	opened := time.Since(began)
	for _, op := range []string{"full", "backup", "reclaim", "repack", "copyto", "copyfrom"} {
		work := max(w.opTime[op]-opened, 5*time.Millisecond)
		for range randomKills {
			steps = append(steps, step{op, randomKill, rng.Int64N(work.Microseconds())})
		}
	}
	rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	for i, s := range steps {
		if v.losses+lv.losses > 0 || t.Failed() {
			break
		}
		if dl, ok := t.Deadline(); ok && time.Until(dl) < time.Minute {
			t.Fatalf("out of time after %d of %d steps, %d kills (a slow or loaded machine; raise -timeout)", i, len(steps), w.kills)
		}
		w.run(s, i)
	}
	// A last proof of both repositories once the walk is over.
	w.v.verify(ctx, repo, "", "end of the walk (S3)")
	w.lv.verify(ctx, local, "", "end of the walk (local)")

	fps := len(w.killedAt)
	if w.killedAt[randomKill] > 0 {
		fps--
	}
	t.Logf("S3 crash walk: %d steps, %d kills at %d failpoints and %d at random moments (+%d kills during recovery, %d catalog caches lost), %d steps ran to the end (hit count not reached), %d losses, %v",
		len(steps), w.kills-w.killedAt[randomKill], fps, w.killedAt[randomKill], w.recoveryKills, w.cacheLost, w.unreached, v.losses+lv.losses, time.Since(start).Round(time.Second))
	fmt.Printf("S3 crash walk: %d kills (%d at random moments, +%d during recovery) at %d failpoints, %d losses, %v\n",
		w.kills, w.killedAt[randomKill], w.recoveryKills, fps, v.losses+lv.losses, time.Since(start).Round(time.Second))
	t.Logf("steps that ran to the end: %v", w.missed)
	t.Logf("kills by failpoint: %v; during recovery: %v; time by phase: %v", w.killedAt, w.recoveryAt, w.took)
	for _, l := range append(v.lossLog, lv.lossLog...) {
		t.Errorf("loss: %s", l)
	}
	if v.losses+lv.losses > 0 {
		t.Fatalf("%d losses (seed %d)", v.losses+lv.losses, seed)
	}
	if t.Failed() {
		return
	}
	for _, name := range s3Required {
		if w.killedAt[name] == 0 {
			t.Errorf("no kill at %s: the S3 walk tests less than it claims", name)
		}
	}
	if w.recoveryKills == 0 {
		t.Errorf("no kill during the recovery at open")
	}
}

// The S3 walk's chunks and packs are twice the local walk's: every blob
// a check or a restore reads is a ranged GET, and verifying after every
// kill is most of the walk's time. A backup still crosses a dozen pack
// boundaries.
var s3Chunker = repository.ChunkerConfig{Algorithm: "cdc", Polynomial: 0x3DA3358B4DC173, MinSize: 8 << 10, AvgSize: 32 << 10, MaxSize: 128 << 10}

const s3PackSize = 128 << 10

func initS3Walk(t *testing.T, location string) {
	t.Helper()
	err := repository.Init(context.Background(), location, password, repository.InitOptions{
		Chunker: s3Chunker, KDF: repository.TestKDF, PackSize: s3PackSize, CompressionLevel: "fastest", CreateBucket: true})
	if err != nil {
		t.Fatalf("init repository %s: %v", location, err)
	}
}

// s3walker is the walker of an S3 repository with a local repository on
// the other side of its copies.
type s3walker struct {
	*walker
	local     string    // the local repository copied to and from
	lv        *verifier // what must survive in it
	cache     string    // VMVAULT_CACHE_DIR: the S3 repository's catalog cache
	killedAt  map[string]int
	cacheLost int
	copyPoint string   // the source point the running copy step copies ("": all)
	missed    []string // steps whose hit count the op did not reach
	took      map[string]time.Duration
	opTime    map[string]time.Duration // the longest count run of each op
}

// randomKill is the step name of a kill at a random moment (its hit is
// the delay in microseconds after the child opened the repository);
// randomKills of them per op.
const (
	randomKill  = "random"
	randomKills = 4
)

// openedLine is what a child prints once it has opened the repository.
const openedLine = "opened"

// markWriter collects a child's stdout and closes seen at the first line
// equal to mark.
type markWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	mark string
	seen chan struct{}
	once sync.Once
}

func (m *markWriter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf.Write(p)
	if strings.Contains("\n"+m.buf.String(), "\n"+m.mark+"\n") {
		m.once.Do(func() { close(m.seen) })
	}
	return len(p), nil
}

// runChildKilledAfter runs op and SIGKILLs it d after it opened the
// repository (no failpoint): killed tells whether it was still running.
func runChildKilledAfter(t *testing.T, op string, d time.Duration, env ...string) (outcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envChild+"="+op), env...)
	stdout := &markWriter{mark: openedLine, seen: make(chan struct{})}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if err := cmd.Start(); err != nil {
		return outcome{}, err
	}
	exited := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the killer; waited for below
		defer wg.Done()
		select {
		case <-stdout.seen:
		case <-exited:
			return
		}
		select {
		case <-time.After(d):
			cmd.Process.Signal(syscall.SIGKILL)
		case <-exited:
		}
	}()
	err := cmd.Wait()
	close(exited)
	wg.Wait()
	stdout.mu.Lock()
	out := outcome{stdout: stdout.buf.String()}
	stdout.mu.Unlock()
	if err == nil {
		return out, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			out.killed, out.at = true, randomKill
			return out, nil
		}
	}
	return out, fmt.Errorf("child %s: %v: %s", op, err, strings.TrimSpace(stderr.String()))
}

// prepare is walker.prepare plus the S3 walk's own ops.
func (w *s3walker) prepare(op string) (env []string, vanish string) {
	t := w.t
	t.Helper()
	switch op {
	case "repack":
		return w.prepareRepack()
	case "copyto":
		// One new point a step, so that every step copies what the count
		// run did: the one point just backed up locally.
		w.copyPoint = w.localBackup()
		return []string{envRepo + "=" + w.repo, envSrc + "=" + w.local, envPoints + "=" + w.copyPoint}, ""
	case "copyfrom":
		// The newest point of the S3 repository (the last step's next
		// backup).
		r, err := openRepo(w.ctx, w.repo)
		if err != nil {
			t.Fatal(err)
		}
		pts, err := oldest(w.ctx, r)
		r.Close()
		if err != nil || len(pts) == 0 {
			t.Fatalf("copy from S3: no point to copy (%v)", err)
		}
		w.copyPoint = pts[len(pts)-1].ID
		return []string{envRepo + "=" + w.local, envSrc + "=" + w.repo, envPoints + "=" + w.copyPoint}, ""
	}
	return w.walker.prepare(op)
}

// prepareRepack backs up a new disk A, then A with most of it rewritten
// as B, and deletes A: its packs hold a few of B's blobs among dead ones,
// which the reclaim must copy into new packs before it deletes them.
// Whether a pack is dead enough to be repacked depends on where the
// chunks fell, so a dry run (PlanReclaim) confirms it, and another pair
// is made when it does not (at most five).
func (w *s3walker) prepareRepack() ([]string, string) {
	t := w.t
	t.Helper()
	r, err := openRepo(w.ctx, w.repo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 5 {
		w.runs++
		vmA := fmt.Sprintf("repack-%d", w.runs)
		w.im.renew()
		if err := w.im.write(); err != nil {
			t.Fatal(err)
		}
		w.v.byVM[vmA] = w.im.sum()
		a, err := backupImage(w.ctx, r, w.im.path, vmA)
		if err != nil {
			t.Fatalf("repack setup: %v", err)
		}
		w.v.points[a] = w.v.byVM[vmA]
		w.runs++
		vmB := fmt.Sprintf("repack-%d", w.runs)
		h, err := w.im.scribble(len(w.im.data) / (40 << 10))
		if err != nil {
			t.Fatal(err)
		}
		w.v.byVM[vmB] = h
		b, err := backupImage(w.ctx, r, w.im.path, vmB)
		if err != nil {
			t.Fatalf("repack setup: %v", err)
		}
		w.v.points[b] = h
		if err := r.Delete(w.ctx, a); err != nil {
			t.Fatalf("repack setup: %v", err)
		}
		delete(w.v.points, a)
		pl, err := r.PlanReclaim(w.ctx, nil)
		if err != nil {
			t.Fatalf("repack setup: %v", err)
		}
		if pl.PacksRepacked > 0 {
			return []string{envRepo + "=" + w.repo}, ""
		}
	}
	t.Fatalf("repack setup: five deleted points left no pack to repack")
	return nil, ""
}

// localBackup backs up the image, changed, into the local repository: new
// data for the next copy to S3. It returns the point's id.
func (w *s3walker) localBackup() string {
	t := w.t
	t.Helper()
	r, err := openRepo(w.ctx, w.local)
	if err != nil {
		w.lv.loss("open local: %v", err)
		return ""
	}
	defer r.Close()
	w.runs++
	vm := fmt.Sprintf("local-%d", w.runs)
	h, err := w.im.scribble(6)
	if err != nil {
		t.Fatal(err)
	}
	w.v.byVM[vm] = h
	id, err := backupImage(w.ctx, r, w.im.path, vm)
	if err != nil {
		w.lv.loss("local backup: %v", err)
		return ""
	}
	w.lv.points[id] = h
	return id
}

// target is the repository an op writes into and its verifier.
func (w *s3walker) target(op string) (string, *verifier) {
	if op == "copyfrom" {
		return w.local, w.lv
	}
	return w.repo, w.v
}

// acknowledge records what a child said it committed.
func (w *s3walker) acknowledge(op string, out outcome) {
	if childOp(op) != "copy" {
		w.walker.acknowledge(out)
		return
	}
	_, v := w.target(op)
	for _, line := range strings.Split(out.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "copied" {
			h, ok := v.byVM[f[2]]
			if !ok {
				v.loss("a copy committed %s of unknown run %q", f[1], f[2])
				continue
			}
			v.points[f[1]] = h
		}
	}
}

// verifyAfter proves the contract on what op may have changed: the S3
// repository always, the local one after a copy into it.
func (w *s3walker) verifyAfter(op, vanish, label string) bool {
	ok := w.v.verify(w.ctx, w.repo, vanish, label+" (S3)") == nil
	if op == "copyfrom" {
		ok = w.lv.verify(w.ctx, w.local, "", label+" (local)") == nil && ok
	}
	return ok
}

// after is "the next backup, reclaim and copy succeed".
func (w *s3walker) after(op string) {
	w.cleanOps(true)
	if childOp(op) == "copy" {
		w.copyClean(op)
	}
}

// copyClean runs the copy of op to the end in this process (the copy
// after a killed one resumes and succeeds) and keeps the local
// repository at four points.
func (w *s3walker) copyClean(op string) {
	src, dst := w.local, w.repo
	if op == "copyfrom" {
		src, dst = w.repo, w.local
	}
	_, v := w.target(op)
	d, err := openRepo(w.ctx, dst)
	if err != nil {
		v.loss("%s: open target: %v", op, err)
		return
	}
	defer d.Close()
	s, err := openRepo(w.ctx, src)
	if err != nil {
		v.loss("%s: open source: %v", op, err)
		return
	}
	var pts []string
	if w.copyPoint != "" {
		pts = []string{w.copyPoint}
	}
	res, err := repository.Copy(w.ctx, s, d, repository.CopyOptions{Points: pts, Workers: 2})
	s.Close()
	if err != nil {
		v.loss("%s: the next copy failed: %v", op, err)
		return
	}
	for _, p := range res.Points {
		if !p.Skipped {
			v.points[p.Target] = v.byVM[p.VM]
		}
	}
	if op == "copyfrom" {
		w.pruneLocal(d)
	}
}

// pruneLocal deletes the local repository's oldest points down to four
// and reclaims.
func (w *s3walker) pruneLocal(r *repository.Repository) {
	pts, err := oldest(w.ctx, r)
	if err != nil {
		w.lv.loss("list local: %v", err)
		return
	}
	w.lv.pruneTo(w.ctx, r, pts, 4, "local ")
}

// loseCache removes the S3 repository's catalog cache (index.db, and the
// old one a killed recatalog leaves beside it): the next open rebuilds it
// from the bucket alone.
func (w *s3walker) loseCache() {
	t := w.t
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(w.cache, "repos", "*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("catalog cache of the S3 repository: %v %v", dirs, err)
	}
	for _, name := range []string{"index.db", "index.db.old"} {
		if err := os.Remove(filepath.Join(dirs[0], name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	w.cacheLost++
}

func (w *s3walker) run(s step, i int) {
	t := w.t
	t.Helper()
	lap := time.Now()
	phase := func(name string) {
		now := time.Now()
		w.took[name] += now.Sub(lap).Round(time.Millisecond)
		lap = now
	}
	env, vanish := w.prepare(s.op)
	phase("prepare")
	label := fmt.Sprintf("step %d (%s, %s=kill@%d)", i, s.op, s.name, s.hit)
	var out outcome
	var err error
	if s.name == randomKill {
		label = fmt.Sprintf("step %d (%s, kill %d µs after the open)", i, s.op, s.hit)
		out, err = runChildKilledAfter(t, childOp(s.op), time.Duration(s.hit)*time.Microsecond, env...)
	} else {
		out, err = runChildProc(t, childOp(s.op), fmt.Sprintf("%s=kill@%d", s.name, s.hit), env...)
	}
	phase("killed op")
	if err != nil {
		t.Errorf("%s: %v", label, err)
		return
	}
	w.acknowledge(s.op, out)
	if !out.killed {
		w.unreached++
		w.missed = append(w.missed, fmt.Sprintf("%s:%s@%d", s.op, s.name, s.hit))
	} else {
		w.kills++
		w.killedAt[out.at]++
		dst, _ := w.target(s.op)
		// Crash again during the recovery that the next open runs: where it
		// finishes a reclaim or indexes an uploaded but uncatalogued pack,
		// or, when the catalog cache is lost, in the middle of its rebuild
		// from the bucket.
		spec := "reconcile.reclaim=kill@1,reconcile.pack=kill@1"
		if dst == w.repo && w.kills%3 == 0 {
			w.loseCache()
			spec = "reconcile.pack=kill@5"
		}
		rout, err := runChildProc(t, "open", spec, envRepo+"="+dst)
		if err != nil {
			t.Errorf("%s: reopen: %v", label, err)
			return
		}
		if rout.killed {
			w.recoveryKills++
			w.recoveryAt[rout.at]++
		}
		phase("killed recovery")
	}
	ok := w.verifyAfter(s.op, vanish, label)
	phase("verify")
	if !ok {
		return
	}
	w.after(s.op)
	phase("next ops")
}

// TestPlanFirstAndLast: with a quota of two hits per pair the plan kills
// every failpoint at its first and its last hit.
func TestPlanFirstAndLast(t *testing.T) {
	counts := map[string]map[string]int64{"a": {"x": 1, "y": 7}, "b": {"x": 3}}
	got := plan(counts, 1+2+2)
	sort.Slice(got, func(i, j int) bool {
		if got[i].op+got[i].name != got[j].op+got[j].name {
			return got[i].op+got[i].name < got[j].op+got[j].name
		}
		return got[i].hit < got[j].hit
	})
	want := []step{{"a", "x", 1}, {"a", "y", 1}, {"a", "y", 7}, {"b", "x", 1}, {"b", "x", 3}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("plan = %v, want %v", got, want)
	}
}
