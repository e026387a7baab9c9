package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
)

// The child process is this test binary, re-executed with these variables
// (much faster than building the appliance, and the same code paths).
const (
	envChild  = "CRASHTEST_CHILD"  // full | backup | reclaim | repack | recatalog | lock | copy | open | state
	envRepo   = "CRASHTEST_REPO"   // repository directory, or state.db path
	envImage  = "CRASHTEST_IMAGE"  // image to back up
	envVM     = "CRASHTEST_VM"     // VM name of the point (identifies the run)
	envDelete = "CRASHTEST_DELETE" // point the reclaim child deletes first (lock: locks and unlocks)
	envCounts = "CRASHTEST_COUNTS" // file the child writes its failpoint counts to
	envSrc    = "CRASHTEST_SRC"    // copy: the source repository (the target is CRASHTEST_REPO)
)

func TestMain(m *testing.M) {
	if op := os.Getenv(envChild); op != "" {
		err := runChild(context.Background(), op)
		if path := os.Getenv(envCounts); path != "" {
			os.WriteFile(path, []byte(failpoint.FormatCounts(failpoint.Counts())), 0o600)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "child %s: %v\n", op, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(ctx context.Context, op string) error {
	dir := os.Getenv(envRepo)
	if strings.HasPrefix(op, "mw") { // several writers (multiwriter_test.go)
		return mwChild(ctx, op)
	}
	if op == "state" {
		return stateChild(ctx, dir)
	}
	r, err := openRepo(ctx, dir)
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Println(openedLine) // a kill at a random moment is timed from here
	switch op {
	case "open":
		return nil
	case "backup", "full":
		id, err := backupImage(ctx, r, os.Getenv(envImage), os.Getenv(envVM))
		if err != nil {
			return err
		}
		fmt.Printf("committed %s\n", id)
	case "reclaim", "repack":
		if id := os.Getenv(envDelete); id != "" {
			if err := r.Delete(ctx, id); err != nil {
				return err
			}
			fmt.Printf("deleted %s\n", id)
		}
		if _, err := r.Reclaim(ctx, nil); err != nil {
			return err
		}
	case "recatalog":
		return r.Recatalog(ctx, nil)
	case "copy":
		if err := copyChild(ctx, os.Getenv(envSrc), r); err != nil {
			return err
		}
	case "lock":
		id := os.Getenv(envDelete)
		if err := r.Lock(ctx, id); err != nil {
			return err
		}
		if err := r.Unlock(ctx, id); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown op %q", op)
	}
	return r.Close()
}

const stateWrites = 12

// stateChild writes jobs one transaction each and acknowledges every one
// on stdout after it returned: an acknowledged write must survive.
func stateChild(ctx context.Context, path string) error {
	db, err := state.Open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	jobs, err := db.Jobs(ctx)
	if err != nil {
		return err
	}
	base := len(jobs)
	for i := range stateWrites {
		id := fmt.Sprintf("job-%04d", base+i)
		if err := db.PutJob(ctx, policy.Job{ID: id, Name: "crash " + id, Repository: "r"}); err != nil {
			return err
		}
		fmt.Printf("ack %s\n", id)
	}
	return db.Close()
}

// outcome of one child run.
type outcome struct {
	killed bool   // died of SIGKILL at a failpoint
	at     string // which failpoint killed it
	stdout string // what it acknowledged before
}

func runChildProc(t *testing.T, op, spec string, env ...string) (outcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+op, failpoint.EnvVar+"="+spec)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := outcome{stdout: stdout.String()}
	if err == nil {
		return out, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL &&
			strings.Contains(stderr.String(), "failpoint ") {
			out.killed = true
			if _, rest, ok := strings.Cut(stderr.String(), "failpoint "); ok {
				out.at, _, _ = strings.Cut(rest, ":")
			}
			return out, nil
		}
	}
	return out, fmt.Errorf("child %s (%s): %v: %s", op, spec, err, strings.TrimSpace(stderr.String()))
}

// childCounts runs op once with counting only and returns how often each
// failpoint was hit.
func childCounts(t *testing.T, op string, env ...string) (map[string]int64, outcome) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "counts")
	out, err := runChildProc(t, op, "count", append(env, envCounts+"="+f)...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	c, err := failpoint.ParseCounts(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return c, out
}

type step struct {
	op   string
	name string
	hit  int64
}

// plan spreads about target kills over every (op, failpoint) pair: each
// pair gets the same number of hit counts (all of them when it has fewer),
// spread from the first hit to the last.
func plan(counts map[string]map[string]int64, target int) []step {
	type pair struct {
		op, name string
		n        int64
	}
	var pairs []pair
	for op, c := range counts {
		for name, n := range c {
			if n > 0 {
				pairs = append(pairs, pair{op, name, n})
			}
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].op != pairs[j].op {
			return pairs[i].op < pairs[j].op
		}
		return pairs[i].name < pairs[j].name
	})
	quota := func(q int64) int {
		sum := 0
		for _, p := range pairs {
			sum += int(min(p.n, q))
		}
		return sum
	}
	q := int64(1)
	for quota(q) < target && q < 1<<20 {
		if quota(q+1) == quota(q) {
			break // every pair saturated
		}
		q++
	}
	var out []step
	for _, p := range pairs {
		k := min(p.n, q)
		seen := map[int64]bool{}
		for i := range k {
			h := int64(1)
			if k > 1 {
				h = 1 + (i*(p.n-1)+(k-1)/2)/(k-1)
			}
			if !seen[h] {
				seen[h] = true
				out = append(out, step{p.op, p.name, h})
			}
		}
	}
	return out
}

// required are the failpoints the walk must reach: every step of the write
// paths of backup, delete, reclaim, recatalog and open. A hook that no run
// reaches any more fails the test instead of silently testing less.
var required = []string{
	"pack.create", "pack.write", "pack.tail", "pack.fsync", "pack.rename", "pack.dirsync", "catalog.pack",
	"record.write", "record.fsync", "record.rename", "record.dirsync", "catalog.point",
	"point.delete", "catalog.delete",
	"reclaim.condemn", "reclaim.repack", "reclaim.barrier", "reclaim.delete", "reclaim.dirsync", "reclaim.catalog",
	"recatalog.rename", "recatalog.open", "recatalog.done", "reconcile.pack", "reconcile.points", "catalog.init",
	"catalog.lock",
}

// TestCrashWalk kills a backup, a delete+reclaim and a recatalog at every
// failpoint x several hit counts (at least 1,000 kills; CRASHWALK_KILLS
// sets the target, -short runs 120) and proves after each kill: the
// repository opens (a second kill during that recovery included), check
// --read-data is clean, every committed point restores byte-identical, and
// the next backup and reclaim succeed.
func TestCrashWalk(t *testing.T) {
	target := 1000
	if testing.Short() {
		target = 120
	}
	target = envCount(t, "CRASHWALK_KILLS", target)
	rng, seed := walkRand(t, 3)
	start := time.Now()
	ctx := context.Background()
	base := fastDir(t)
	repo := filepath.Join(base, "repo")
	initRepo(t, repo)
	im, err := newImage(filepath.Join(base, "disk.img"), 2<<20, seed)
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier()
	w := &walker{t: t, ctx: ctx, repo: repo, im: im, v: v, recoveryAt: map[string]int{}}
	for range 3 {
		w.cleanOps(false)
	}

	// Learn how often each op hits each failpoint.
	counts := map[string]map[string]int64{}
	for _, op := range []string{"full", "backup", "reclaim", "recatalog", "lock"} {
		env, vanish := w.prepare(op)
		c, out := childCounts(t, op, env...)
		w.acknowledge(out)
		if err := v.verify(ctx, repo, vanish, "after count run "+op); err != nil {
			t.Fatalf("after the uninterrupted %s: %v (%v)", op, err, v.lossLog)
		}
		counts[op] = c
		w.cleanOps(true)
	}
	reached := map[string]bool{}
	for op, c := range counts {
		t.Logf("%s hits: %s", op, strings.ReplaceAll(strings.TrimSpace(failpoint.FormatCounts(c)), "\n", " "))
		for name, n := range c {
			if n > 0 {
				reached[name] = true
			}
		}
	}
	for _, name := range required {
		if !reached[name] {
			t.Errorf("failpoint %s is never reached by backup, reclaim or recatalog", name)
		}
	}
	steps := plan(counts, target)
	// Every pair has all its hit counts in the plan when the ops pass fewer
	// than target failpoints in all: walk it again (the repository is in
	// another state every round) until the target is met.
	i := 0
	for round := 1; w.kills < target && v.losses == 0 && !t.Failed(); round++ {
		rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
		for _, s := range steps {
			if w.kills >= target || v.losses > 0 || t.Failed() {
				break
			}
			if dl, ok := t.Deadline(); ok && time.Until(dl) < time.Minute {
				t.Fatalf("out of time after %d of %d kills, %d losses so far (a slow or loaded machine; raise -timeout)", w.kills, target, v.losses)
			}
			w.run(s, i)
			i++
		}
		if round > 50 {
			t.Fatalf("%d rounds made only %d kills", round, w.kills)
		}
	}
	names := map[string]bool{}
	for _, s := range steps {
		names[s.name] = true
	}
	t.Logf("crash walk: %d kills at %d failpoints (+%d kills during recovery), %d steps ran to the end (hit count not reached), %d losses, %v",
		w.kills, len(names), w.recoveryKills, w.unreached, v.losses, time.Since(start).Round(time.Second))
	fmt.Printf("crash walk: %d kills (+%d during recovery) at %d failpoints, %d losses, %v\n",
		w.kills, w.recoveryKills, len(names), v.losses, time.Since(start).Round(time.Second))
	t.Logf("kills during recovery: %v", w.recoveryAt)
	if !testing.Short() && !t.Failed() {
		// Open must have been killed while finishing an interrupted reclaim
		// and while indexing a renamed but uncatalogued pack.
		for _, name := range []string{"reconcile.reclaim", "reconcile.pack"} {
			if w.recoveryAt[name] == 0 {
				t.Errorf("no kill during recovery at %s", name)
			}
		}
	}
	for _, l := range v.lossLog {
		t.Errorf("loss: %s", l)
	}
	if v.losses > 0 {
		t.Fatalf("%d losses (seed %d)", v.losses, seed)
	}
	if w.kills < target && !t.Failed() {
		t.Fatalf("only %d of the %d planned kills happened: the walk tests less than it claims", w.kills, target)
	}
}

type walker struct {
	t    *testing.T
	ctx  context.Context
	repo string
	im   *image
	v    *verifier
	runs int

	kills, recoveryKills, unreached int
	recoveryAt                      map[string]int // failpoint -> kills during recovery
}

// prepare sets up the input of op and returns the child's environment and
// the point that may vanish (the one a reclaim child deletes).
func (w *walker) prepare(op string) (env []string, vanish string) {
	w.t.Helper()
	env = []string{envRepo + "=" + w.repo}
	switch op {
	case "full":
		// A new disk: every chunk is new, so the walk reaches the hundredth
		// pack write as well as the first.
		w.runs++
		vm := fmt.Sprintf("run-%d", w.runs)
		w.im.renew()
		if err := w.im.write(); err != nil {
			w.t.Fatal(err)
		}
		w.v.byVM[vm] = w.im.sum()
		env = append(env, envImage+"="+w.im.path, envVM+"="+vm)
	case "backup":
		w.runs++
		vm := fmt.Sprintf("run-%d", w.runs)
		h, err := w.im.scribble(10)
		if err != nil {
			w.t.Fatal(err)
		}
		w.v.byVM[vm] = h
		env = append(env, envImage+"="+w.im.path, envVM+"="+vm)
	case "reclaim", "lock":
		r, err := openRepo(w.ctx, w.repo)
		if err != nil {
			w.t.Fatal(err)
		}
		pts, err := oldest(w.ctx, r)
		r.Close()
		if err != nil {
			w.t.Fatal(err)
		}
		if op == "lock" && len(pts) > 0 {
			env = append(env, envDelete+"="+pts[len(pts)-1].ID)
		} else if len(pts) > 1 {
			vanish = pts[0].ID
			env = append(env, envDelete+"="+vanish)
		}
	}
	return env, vanish
}

// acknowledge records the points a child said it committed.
func (w *walker) acknowledge(out outcome) {
	for _, line := range strings.Split(out.stdout, "\n") {
		if id, ok := strings.CutPrefix(line, "committed "); ok {
			vm := fmt.Sprintf("run-%d", w.runs)
			w.v.points[id] = w.v.byVM[vm]
		}
	}
}

func (w *walker) run(s step, i int) {
	t := w.t
	t.Helper()
	env, vanish := w.prepare(s.op)
	label := fmt.Sprintf("step %d (%s, %s=kill@%d)", i, s.op, s.name, s.hit)
	out, err := runChildProc(t, s.op, fmt.Sprintf("%s=kill@%d", s.name, s.hit), env...)
	if err != nil {
		t.Errorf("%s: %v", label, err)
		return
	}
	w.acknowledge(out)
	if !out.killed {
		w.unreached++
	} else {
		w.kills++
		// Crash again during the recovery that the next open runs.
		rout, err := runChildProc(t, "open", "reconcile.reclaim=kill@1,reconcile.pack=kill@1", envRepo+"="+w.repo)
		if err != nil {
			t.Errorf("%s: reopen: %v", label, err)
			return
		}
		if rout.killed {
			w.recoveryKills++
			w.recoveryAt[rout.at]++
		}
	}
	if err := w.v.verify(w.ctx, w.repo, vanish, label); err != nil {
		return
	}
	w.cleanOps(true)
}

// cleanOps is "the next backup and reclaim succeed": a backup of new data,
// then (with reclaim) delete the oldest points down to three and reclaim.
func (w *walker) cleanOps(reclaim bool) {
	t := w.t
	t.Helper()
	r, err := openRepo(w.ctx, w.repo)
	if err != nil {
		w.v.loss("next open: %v", err)
		return
	}
	defer r.Close()
	w.runs++
	vm := fmt.Sprintf("clean-%d", w.runs)
	h, err := w.im.scribble(4)
	if err != nil {
		t.Fatal(err)
	}
	w.v.byVM[vm] = h
	id, err := backupImage(w.ctx, r, w.im.path, vm)
	if err != nil {
		w.v.loss("next backup failed: %v", err)
		return
	}
	w.v.points[id] = h
	if !reclaim {
		return
	}
	pts, err := oldest(w.ctx, r)
	if err != nil {
		w.v.loss("list: %v", err)
		return
	}
	for _, p := range pts {
		if p.Locked { // a lock child killed between its lock and unlock
			if err := r.Unlock(w.ctx, p.ID); err != nil {
				w.v.loss("unlock %s: %v", p.ID, err)
				return
			}
		}
	}
	w.v.pruneTo(w.ctx, r, pts, 3, "")
}

// TestCrashWalkState kills the state.db writer at every transaction: the
// database opens and every acknowledged write is there.
func TestCrashWalkState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	c, out := childCounts(t, "state", envRepo+"="+path)
	if c["state.tx"] < stateWrites || c["state.open"] != 1 {
		t.Fatalf("counts %v: the hooks are not reached", c)
	}
	acked := map[string]bool{}
	ack := func(o outcome) {
		for _, line := range strings.Split(o.stdout, "\n") {
			if id, ok := strings.CutPrefix(line, "ack "); ok {
				acked[id] = true
			}
		}
	}
	ack(out)
	kills := 0
	steps := []string{"state.open=kill@1"}
	for n := int64(1); n <= stateWrites; n++ {
		steps = append(steps, fmt.Sprintf("state.tx=kill@%d", n))
	}
	for _, spec := range steps {
		o, err := runChildProc(t, "state", spec, envRepo+"="+path)
		if err != nil {
			t.Fatal(err)
		}
		if !o.killed {
			t.Fatalf("%s: not killed", spec)
		}
		kills++
		ack(o)
		db, err := state.Open(path)
		if err != nil {
			t.Fatalf("after %s: state.db does not open: %v", spec, err)
		}
		jobs, err := db.Jobs(context.Background())
		db.Close()
		if err != nil {
			t.Fatalf("after %s: %v", spec, err)
		}
		have := map[string]bool{}
		for _, j := range jobs {
			if j.Name != "crash "+j.ID {
				t.Fatalf("after %s: job %s is damaged: %+v", spec, j.ID, j)
			}
			have[j.ID] = true
		}
		for id := range acked {
			if !have[id] {
				t.Fatalf("after %s: acknowledged job %s is lost", spec, id)
			}
		}
	}
	t.Logf("state.db: %d kills, %d acknowledged writes, 0 lost", kills, len(acked))
}

// envCount returns the positive number in the environment variable name,
// or def when it is unset; anything else fails the test.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive number", name, s)
	}
	return n
}

// walkRand returns a walk's random source: seeded from the clock, or from
// CRASHWALK_SEED to rerun a walk; stream keeps the walks' sequences apart.
func walkRand(t *testing.T, stream uint64) (*rand.Rand, uint64) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CRASHWALK_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (CRASHWALK_SEED reruns it)", seed)
	return rand.New(rand.NewPCG(seed, stream)), seed
}
