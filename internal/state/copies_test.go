package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
)

// populate fills d with enough jobs, runs and events to span branch,
// leaf and overflow pages.
func populate(t testing.TB, d *DB, jobs int) {
	t.Helper()
	ctx := context.Background()
	for i := range jobs {
		if err := d.PutJob(ctx, sampleJob(fmt.Sprintf("job-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		e := policy.Event{Time: t0.Add(time.Duration(i) * time.Minute), Kind: "test", Severity: policy.SeverityInfo,
			Job: "job-000", Message: fmt.Sprintf("event %d %s", i, strings.Repeat("x", i%200))}
		if err := d.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	big := policy.JobRun{ID: "run-big", Job: "job-000", Start: t0, End: t0.Add(time.Hour)}
	for i := range 200 {
		big.VMs = append(big.VMs, policy.VMOutcome{VM: fmt.Sprintf("vm-%04d", i), Status: policy.OutcomeSucceeded, Bytes: int64(i)})
	}
	if err := d.PutRun(ctx, big); err != nil {
		t.Fatal(err)
	}
}

// damagedFixture is a closed state.db with content and one verified copy.
type damagedFixture struct {
	path string
	good Copy
	raw  []byte
}

func newDamagedFixture(t testing.TB) damagedFixture {
	t.Helper()
	d, path := openTemp(t)
	populate(t, d, 40)
	c, err := d.WriteCopy(CopiesDir(path), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return damagedFixture{path: path, good: c, raw: raw}
}

const testPage = 4096

func le64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

// metaOf returns the root and freelist page ids of the newest meta page.
func metaOf(raw []byte) (root, freelist uint64) {
	m0, m1 := raw[16:], raw[testPage+16:]
	m := m0
	if le64(m1, 48) > le64(m0, 48) {
		m = m1
	}
	return le64(m, 16), le64(m, 32)
}

// openNoPanic calls Open, failing the test (not crashing it) on a panic.
func openNoPanic(t *testing.T, path string) (db *DB, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Open panicked: %v", r)
		}
	}()
	return Open(path)
}

// A damaged state.db is refused with an error that names the file and the
// newest copy that verifies (path and time), and never panics: whole-file
// garbage, truncations, both meta pages, page headers, the freelist, a
// record's bytes.
func TestOpenDamagedStateDB(t *testing.T) {
	fx := newDamagedFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	root, freelist := metaOf(fx.raw)
	if len(fx.raw) < 8*testPage || root < 2 || freelist < 2 {
		t.Fatalf("fixture too small: %d bytes, root %d, freelist %d", len(fx.raw), root, freelist)
	}
	cases := []struct {
		name    string
		damage  func(b []byte) []byte // nil result: remove the file
		missing bool
	}{
		{"garbage", func(b []byte) []byte { return garbage(len(b)) }, false},
		{"garbage after the meta pages", func(b []byte) []byte { return append(b[:2*testPage:2*testPage], garbage(len(b)-2*testPage)...) }, false},
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }, false},
		{"truncated to 3 pages", func(b []byte) []byte { return b[:3*testPage] }, false},
		{"truncated to 100 bytes", func(b []byte) []byte { return b[:100] }, false},
		{"both meta pages flipped", func(b []byte) []byte { b[16+20] ^= 0x40; b[testPage+16+20] ^= 0x40; return b }, false},
		{"root page header", func(b []byte) []byte { b[int(root)*testPage+8] ^= 0xff; return b }, false},
		{"root page id", func(b []byte) []byte { b[int(root)*testPage] ^= 0x01; return b }, false},
		{"root page element count", func(b []byte) []byte { b[int(root)*testPage+10] = 0xff; b[int(root)*testPage+11] = 0x7f; return b }, false},
		{"freelist page type", func(b []byte) []byte { b[int(freelist)*testPage+8] = 0x02; return b }, false},
		{"freelist count huge", func(b []byte) []byte {
			p := int(freelist) * testPage
			binary.LittleEndian.PutUint16(b[p+10:], 0xFFFF)
			binary.LittleEndian.PutUint64(b[p+16:], 1<<40)
			return b
		}, false},
		{"every data page header zeroed", func(b []byte) []byte {
			for p := 2 * testPage; p < len(b); p += testPage {
				clear(b[p : p+16])
			}
			return b
		}, false},
		{"record byte", func(b []byte) []byte {
			i := bytes.Index(b, []byte("\x01{\"id\":\"job-007\""))
			if i < 0 {
				t.Fatal("record of job-007 not found in the file")
			}
			b[i+1] = '!'
			return b
		}, false},
		{"empty", func(b []byte) []byte { return b[:0] }, true},
		{"missing", func([]byte) []byte { return nil }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.damage(bytes.Clone(fx.raw))
			if b == nil {
				if err := os.Remove(fx.path); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(fx.path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := openNoPanic(t, fx.path)
			if err == nil {
				d.Close()
				t.Fatal("damaged state.db opened")
			}
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("not a CorruptError: %v", err)
			}
			if tc.missing != errors.Is(err, ErrMissing) || tc.missing == errors.Is(err, ErrCorrupt) {
				t.Fatalf("missing %v, error %v", tc.missing, err)
			}
			msg := err.Error()
			for _, want := range []string{fx.path, fx.good.Path, fx.good.Time.Format(time.RFC3339)} {
				if !strings.Contains(msg, want) {
					t.Fatalf("error does not name %q: %s", want, msg)
				}
			}
			if ce.Newest == nil || ce.Newest.Path != fx.good.Path {
				t.Fatalf("newest good copy %+v, want %s", ce.Newest, fx.good.Path)
			}
			if b != nil && len(b) > 0 {
				if err := Verify(fx.path); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Verify of the damaged file: %v", err)
				}
			}
			// The damaged file was not touched: an operator can still inspect it.
			if b != nil {
				if now, _ := os.ReadFile(fx.path); !bytes.Equal(now, b) {
					t.Fatal("Open changed the damaged file")
				}
			}
		})
	}
}

// Flipping any byte of the file, one at a time, never panics or crashes
// the process: Open either refuses the file or opens one whose reads all
// work or fail with an error.
func TestOpenSurvivesByteFlips(t *testing.T) {
	fx := newDamagedFixture(t)
	ctx := context.Background()
	// A spread of offsets over the whole file, and the fields of every
	// page header (id, flags, element count, overflow), where a flip sends
	// bbolt's pointers astray.
	stride := max(len(fx.raw)/300, 1)
	headerBytes := []int{0, 1, 7, 8, 9, 10, 11, 12, 15}
	if testing.Short() {
		stride, headerBytes = max(len(fx.raw)/50, 1), []int{0, 8, 10}
	}
	var offsets []int
	for off := stride / 2; off < len(fx.raw); off += stride {
		offsets = append(offsets, off)
	}
	for p := 0; p < len(fx.raw); p += testPage {
		for _, i := range headerBytes {
			offsets = append(offsets, p+i)
		}
	}
	opened, refused := 0, 0
	for _, off := range offsets {
		b := bytes.Clone(fx.raw)
		b[off] ^= 0xff
		if err := os.WriteFile(fx.path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("flip at %d: panic %v", off, r)
				}
			}()
			d, err := Open(fx.path)
			if err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Newest == nil {
					t.Fatalf("flip at %d: %v", off, err)
				}
				refused++
				return
			}
			opened++
			_, _ = d.Jobs(ctx)
			_, _ = d.Events(ctx, EventQuery{})
			_, _ = d.OpenRuns(ctx)
			_ = d.PutJob(ctx, sampleJob("new"))
			_ = d.Close()
		}()
	}
	t.Logf("%d single-byte flips: %d refused, %d opened (flips in free space or the older meta page)", len(offsets), refused, opened)
	if refused == 0 {
		t.Fatal("no flip was detected")
	}
}

// Copies are taken at start and every interval on the fake clock, named by
// their time, verified, hold the data of their moment, and are pruned to
// the newest Keep good ones; a damaged copy is not counted as one.
func TestCopiesRotate(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	dir := CopiesDir(path)
	clk := clock.NewFake(t0)
	const keep = 3
	if _, _, err := d.RotateCopy(dir, clk.Now(), keep); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		d.KeepCopies(loopCtx, CopyOptions{Keep: keep, Every: 24 * time.Hour, Clock: clk, Done: func(c Copy, removed []string, err error) { done <- err }})
	})
	defer func() { stop(); wg.Wait() }()
	for day := 1; day <= 5; day++ {
		if err := d.PutJob(ctx, sampleJob(fmt.Sprintf("day-%d", day))); err != nil {
			t.Fatal(err)
		}
		if !clk.BlockUntil(1, ctx.Done()) {
			t.Fatal("no timer")
		}
		clk.Advance(24 * time.Hour)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		copies, err := ListCopies(dir, true)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(day+1, keep); len(copies) != want {
			t.Fatalf("day %d: %d copies, want %d", day, len(copies), want)
		}
		for i, c := range copies {
			want := t0.Add(time.Duration(day-i) * 24 * time.Hour)
			if !c.Time.Equal(want) || c.Err != nil || filepath.Base(c.Path) != "state-"+want.Format("20060102T150405Z")+".db" {
				t.Fatalf("day %d copy %d: %+v, want time %v", day, i, c, want)
			}
		}
	}
	// The newest copy holds the job written just before it, and not later ones.
	if err := d.PutJob(ctx, sampleJob("after")); err != nil {
		t.Fatal(err)
	}
	copies, _ := ListCopies(dir, false)
	jobsIn := func(p string) map[string]bool {
		t.Helper()
		db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		m := map[string]bool{}
		_ = db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bJobs).ForEach(func(k, _ []byte) error { m[string(k)] = true; return nil })
		})
		return m
	}
	if j := jobsIn(copies[0].Path); !j["day-5"] || j["after"] {
		t.Fatalf("newest copy's jobs: %v", j)
	}
	if j := jobsIn(copies[2].Path); !j["day-3"] || j["day-4"] {
		t.Fatalf("oldest copy's jobs: %v", j)
	}

	// Damage the newest copy: the next rotation keeps one more older copy,
	// so Keep good ones remain, and the damaged one is listed as such.
	if err := os.WriteFile(copies[0].Path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk.BlockUntil(1, ctx.Done())
	clk.Advance(24 * time.Hour)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	all, _ := ListCopies(dir, true)
	good := 0
	for _, c := range all {
		if c.Err == nil {
			good++
		} else if !errors.Is(c.Err, ErrCorrupt) || c.Path != copies[0].Path {
			t.Fatalf("copy %s: %v", c.Path, c.Err)
		}
	}
	if len(all) != keep+1 || good != keep {
		t.Fatalf("after a damaged copy: %d copies, %d good", len(all), good)
	}
	if c, ok, _ := NewestGoodCopy(dir); !ok || !c.Time.Equal(clk.Now()) {
		t.Fatalf("newest good copy %+v", c)
	}
}

// A copy taken while writers commit is one consistent transaction: two
// buckets written together in every transaction hold the same keys in it.
func TestCopyConsistentUnderWrites(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	dir := CopiesDir(path)
	a, b := []byte("test-a"), []byte("test-b")
	if err := d.Bolt().Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket(a)
		if err == nil {
			_, err = tx.CreateBucket(b)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Appendf(nil, "w%d-%06d", w, i)
				err := d.Bolt().Update(func(tx *bolt.Tx) error {
					if err := tx.Bucket(a).Put(k, bytes.Repeat(k, 20)); err != nil {
						return err
					}
					return tx.Bucket(b).Put(k, nil)
				})
				if err == nil && i%10 == 0 {
					err = d.AddEvent(ctx, policy.Event{Time: t0, Kind: "w", Message: string(k)})
				}
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	var copies []Copy
	for i := range 8 {
		c, err := d.WriteCopy(dir, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	prev := -1
	for _, c := range copies {
		if err := Verify(c.Path); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(c.Path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		var na, nb int
		err = db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(a).ForEach(func(k, _ []byte) error {
				na++
				if tx.Bucket(b).Get(k) == nil {
					return fmt.Errorf("key %s in %s only", k, a)
				}
				return nil
			})
		})
		if err == nil {
			nb = tx2count(db, b)
		}
		db.Close()
		if err != nil || na != nb {
			t.Fatalf("copy %s: %v (%d vs %d keys)", c.Path, err, na, nb)
		}
		if na < prev {
			t.Fatalf("copy %s has fewer keys (%d) than the one before (%d)", c.Path, na, prev)
		}
		prev = na
	}
	if prev == 0 {
		t.Fatal("no writes happened during the copies")
	}
}

func tx2count(db *bolt.DB, bucket []byte) int {
	n := 0
	_ = db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucket).Stats().KeyN; return nil })
	return n
}

// InstallCopy puts a copy in place of a damaged state.db, keeps the damaged
// file beside it, and refuses while the database is open.
func TestInstallCopy(t *testing.T) {
	ctx := context.Background()
	fx := newDamagedFixture(t)
	damaged := bytes.Clone(fx.raw)
	clear(damaged[2*testPage:])
	if err := os.WriteFile(fx.path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(fx.path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open damaged: %v", err)
	}
	when := t0.Add(48 * time.Hour)
	aside, err := InstallCopy(fx.path, fx.good.Path, when)
	if err != nil {
		t.Fatal(err)
	}
	if want := fx.path + ".replaced-20260506T220000Z"; aside != want {
		t.Fatalf("kept as %s, want %s", aside, want)
	}
	if kept, _ := os.ReadFile(aside); !bytes.Equal(kept, damaged) {
		t.Fatal("the replaced file was not kept intact")
	}
	d, err := Open(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := d.Jobs(ctx)
	if err != nil || len(jobs) != 40 || jobs[7].ID != "job-007" {
		t.Fatalf("jobs after install: %d %v", len(jobs), err)
	}
	if _, err := InstallCopy(fx.path, fx.good.Path, when); !errors.Is(err, ErrInUse) {
		t.Fatalf("install over an open database: %v", err)
	}
	d.Close()
	// A second install in the same second keeps both replaced files.
	aside2, err := InstallCopy(fx.path, fx.good.Path, when)
	if err != nil || aside2 == aside {
		t.Fatalf("second install: %s %v", aside2, err)
	}
	// A damaged copy is never installed.
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := InstallCopy(fx.path, bad, when); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("install of a damaged copy: %v", err)
	}
	if err := Verify(fx.path); err != nil {
		t.Fatalf("database after a refused install: %v", err)
	}
}

// Without any copy the error says so; a fresh directory still starts empty.
func TestOpenDamagedWithoutCopies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xAB}, 3*testPage), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := openNoPanic(t, path)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Newest != nil || !strings.Contains(err.Error(), "no good copy in "+CopiesDir(path)) {
		t.Fatalf("%v", err)
	}
	fresh := filepath.Join(t.TempDir(), "state.db")
	d, err := Open(fresh)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

// FuzzOpenDamaged damages a real state.db at fuzzed places (n bytes from
// off set to val, or the file cut at off) and asserts that Open never
// panics: it refuses the file with a CorruptError naming the good copy, or
// opens it and every read returns.
func FuzzOpenDamaged(f *testing.F) {
	fx := newDamagedFixture(f)
	for _, s := range []struct {
		off  uint32
		val  byte
		n    uint16
		trim bool
	}{{0, 0, 16, false}, {testPage, 0xff, 8, false}, {2*testPage + 8, 0x01, 1, false}, {5 * testPage, 0, 0, true}, {3*testPage + 16, 0x7f, 4, false}} {
		f.Add(s.off, s.val, s.n, s.trim)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, off uint32, val byte, n uint16, trim bool) {
		b := bytes.Clone(fx.raw)
		o := int(off) % len(b)
		if trim {
			b = b[:o]
		} else {
			for i := o; i < min(o+int(n%512)+1, len(b)); i++ {
				b[i] = val
			}
		}
		if err := os.WriteFile(fx.path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := openNoPanic(t, fx.path)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Newest == nil || ce.Newest.Path != fx.good.Path {
				t.Fatalf("%v", err)
			}
			return
		}
		defer d.Close()
		_, _ = d.Jobs(ctx)
		_, _ = d.Events(ctx, EventQuery{})
		_, _ = d.Runs(ctx, "job-000", 0)
	})
}
