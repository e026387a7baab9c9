package repository

import (
	"context"
	"encoding/binary"
	"github.com/vmvault/vmvault/repository/storage"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// copyDir copies a repository directory (files only, modes kept).
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o700)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		o, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(o, in); err != nil {
			o.Close()
			return err
		}
		return o.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

type catalogFixture struct {
	dir    string
	repoID string
	pts    []Point
	imgs   [][]byte
	db     []byte // the intact index.db
}

// newCatalogFixture builds a closed repository with two points and small
// packs, so that its catalog has a few pages of every bucket.
func newCatalogFixture(t testing.TB) *catalogFixture {
	t.Helper()
	fx := &catalogFixture{dir: t.TempDir()}
	r := TestRepository(t, WithDir(fx.dir), WithPackSize(64<<10))
	for i := range 2 {
		img := testDisk(uint64(300+i), 1<<20)
		fx.imgs = append(fx.imgs, img)
		fx.pts = append(fx.pts, backup(t, r, "vm", testTime.Add(time.Duration(i)*time.Hour), img))
	}
	if err := r.Lock(context.Background(), fx.pts[0].ID); err != nil {
		t.Fatal(err)
	}
	fx.pts[0].Locked = true
	fx.repoID = r.Config().ID
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(fx.dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	fx.db = b
	return fx
}

// openDamaged copies the fixture, writes db as its index.db and opens it.
func (fx *catalogFixture) openDamaged(t *testing.T, db []byte) (*Repository, string) {
	t.Helper()
	dir := t.TempDir()
	copyDir(t, fx.dir, dir)
	if err := os.WriteFile(filepath.Join(dir, "index.db"), db, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true, Logger: quietLogger})
	if err != nil {
		t.Fatalf("Open with a damaged index.db: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

// requireIntact asserts that every point of the fixture is listed with its
// lock state and restores byte-identical, and that check is clean.
func (fx *catalogFixture) requireIntact(t *testing.T, r *Repository) {
	t.Helper()
	ctx := context.Background()
	for i, p := range fx.pts {
		got, err := r.Point(ctx, p.ID)
		if err != nil {
			t.Fatalf("point %s: %v", p.ID, err)
		}
		if got.Locked != p.Locked {
			t.Fatalf("point %s: locked %v, want %v", p.ID, got.Locked, p.Locked)
		}
		verifyPoint(t, r, p.ID, fx.imgs[i])
	}
	requireClean(t, r)
}

// TestCorruptCatalogIsMovedAsideAndRebuilt: garbage, truncated and damaged
// index.db files (several of which made bbolt panic in a goroutine of its
// own, killing every command including recatalog) are moved aside once,
// with one warning, and the catalog is rebuilt from the packs.
func TestCorruptCatalogIsMovedAsideAndRebuilt(t *testing.T) {
	fx := newCatalogFixture(t)
	ps := 4096
	npages := len(fx.db) / ps
	damaged := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), fx.db...)) }
	cases := map[string][]byte{
		"garbage":           []byte("this is not a bbolt file at all, just garbage bytes"),
		"random 64 KiB":     randomBytes(1, 64<<10),
		"truncated to 4096": fx.db[:4096],
		"truncated to half": fx.db[:len(fx.db)/2],
		"truncated by one":  fx.db[:len(fx.db)-1],
		"both metas zeroed": damaged(func(b []byte) []byte { clear(b[:2*ps]); return b }),
		"high-water mark past the end": damaged(func(b []byte) []byte {
			// Rewrite both metas with a hwm beyond the file and a valid checksum.
			for m := 0; m < 2; m++ {
				meta := b[m*ps+16:]
				putU64(meta[40:], uint64(npages+100))
				resum(meta)
			}
			return b
		}),
		"root page points at itself": damaged(func(b []byte) []byte {
			for m := 0; m < 2; m++ {
				meta := b[m*ps+16:]
				root := getU64(meta[16:])
				pg := b[int(root)*ps:]
				pg[8], pg[9] = boltBranchFlag, 0 // branch
				pg[10], pg[11] = 1, 0            // one element
				putU32(pg[16:], 16)              // pos
				putU32(pg[20:], 1)               // ksize
				putU64(pg[24:], root)            // child = itself
			}
			return b
		}),
	}
	// Every data page with its header bytes flipped, and with its element
	// area flipped: bbolt's free-page walk panics on most of them.
	for pg := 2; pg < npages; pg++ {
		for _, off := range []int{0, 8, 10, 16, 20, 24, 40} {
			cases["page "+strconv.Itoa(pg)+" byte "+strconv.Itoa(off)] = damaged(func(b []byte) []byte { b[pg*ps+off] ^= 0x5a; return b })
		}
	}
	for name, db := range cases {
		t.Run(name, func(t *testing.T) {
			r, dir := fx.openDamaged(t, db)
			ws := r.Warnings()
			aside, _ := filepath.Glob(filepath.Join(dir, "index.db.corrupt-*"))
			switch {
			case len(ws) == 1 && strings.Contains(ws[0], "moved it aside") && len(aside) == 1:
				kept, _ := os.ReadFile(aside[0])
				if string(kept) != string(db) {
					t.Fatalf("the moved-aside catalog is not the damaged file")
				}
			case len(ws) == 0 && len(aside) == 0:
				// The damage hit bytes bbolt never reads (free space): the
				// catalog is still good.
			default:
				t.Fatalf("warnings %q, moved aside %v: want exactly one warning and one kept file", ws, aside)
			}
			rep := mustCheck(t, r, true)
			if !rep.Clean() {
				// A flip inside a value that still has the right shape (an
				// offset, a length) is caught by check; recatalog repairs it
				// without needing the old file.
				if len(ws) != 0 {
					t.Fatalf("rebuilt catalog is not clean: %v", rep.Problems)
				}
				if err := r.Recatalog(context.Background(), nil); err != nil {
					t.Fatalf("recatalog: %v", err)
				}
			}
			fx.requireIntact(t, r)
		})
	}
}

// TestCorruptCatalogRandomFlips flips random bytes of index.db: every
// damaged file opens, and after a recatalog when check asks for one, every
// point restores.
func TestCorruptCatalogRandomFlips(t *testing.T) {
	fx := newCatalogFixture(t)
	rng := rand.New(rand.NewPCG(7, 7))
	n := 30
	if testing.Short() {
		n = 8
	}
	for i := range n {
		db := append([]byte(nil), fx.db...)
		for range 1 + rng.IntN(8) {
			db[rng.IntN(len(db))] ^= byte(1 + rng.IntN(255))
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			r, _ := fx.openDamaged(t, db)
			if rep := mustCheck(t, r, true); !rep.Clean() {
				if err := r.Recatalog(context.Background(), nil); err != nil {
					t.Fatalf("recatalog: %v", err)
				}
			}
			fx.requireIntact(t, r)
		})
	}
}

// TestRecatalogCommandWithCorruptCatalog: `repo recatalog` in a fresh
// process (the way an operator runs it) works on a repository whose
// index.db made bbolt panic, and says once that it moved the file aside.
func TestRecatalogWithCorruptCatalogInChildProcess(t *testing.T) {
	if dir := os.Getenv("VMVAULT_RECATALOG_CHILD"); dir != "" {
		r, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
		if err != nil {
			os.Exit(2)
		}
		if err := r.Recatalog(context.Background(), nil); err != nil {
			os.Exit(3)
		}
		if len(r.Warnings()) != 1 {
			os.Exit(4)
		}
		r.Close()
		os.Exit(0)
	}
	fx := newCatalogFixture(t)
	dir := t.TempDir()
	copyDir(t, fx.dir, dir)
	db := append([]byte(nil), fx.db...)
	for pg := 2; pg < len(db)/4096; pg++ {
		db[pg*4096+16] ^= 0xff // every page's first element
	}
	os.WriteFile(filepath.Join(dir, "index.db"), db, 0o600)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecatalogWithCorruptCatalogInChildProcess$")
	cmd.Env = append(os.Environ(), "VMVAULT_RECATALOG_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child recatalog: %v\n%s", err, out)
	}
	r, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ws := r.Warnings(); len(ws) != 0 {
		t.Fatalf("the rebuilt catalog was not kept: %v", ws)
	}
	fx.requireIntact(t, r)
}

// TestCatalogEntryOfWrongShapeIsRebuilt: a structurally valid bbolt file
// whose entries do not decode (a pack key of 3 bytes made reconcile panic
// on the slice-to-array conversion; a bad value failed Open) is rebuilt.
func TestCatalogEntryOfWrongShapeIsRebuilt(t *testing.T) {
	fx := newCatalogFixture(t)
	for name, edit := range map[string]func(tx *bolt.Tx) error{
		"short pack key":   func(tx *bolt.Tx) error { return tx.Bucket(bucketPacks).Put([]byte("abc"), encodePackInfo(packInfo{})) },
		"bad pack value":   func(tx *bolt.Tx) error { return tx.Bucket(bucketPacks).Put(make([]byte, 16), []byte{9}) },
		"bad point value":  func(tx *bolt.Tx) error { return tx.Bucket(bucketPoints).Put(make([]byte, 32), []byte{1, '{'}) },
		"bad blob value":   func(tx *bolt.Tx) error { return tx.Bucket(bucketBlobs).Put(make([]byte, 32), []byte{1}) },
		"missing buckets":  func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketBlobs) },
		"nested bucket":    func(tx *bolt.Tx) error { _, err := tx.Bucket(bucketPacks).CreateBucket([]byte("x")); return err },
		"bad schema value": func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchema, []byte{7}) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "index.db")
			os.WriteFile(path, fx.db, 0o600)
			db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(edit); err != nil {
				t.Fatal(err)
			}
			db.Close()
			b, _ := os.ReadFile(path)
			r, _ := fx.openDamaged(t, b)
			if ws := r.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "moved it aside") {
				t.Fatalf("warnings %q", ws)
			}
			fx.requireIntact(t, r)
		})
	}
}

// FuzzCatalogOpen: whatever index.db holds, opening it never panics (not
// even in bbolt's own goroutines) and a catalog that opens reads back
// without error. Seeds: real catalogs below plus testdata/fuzz.
func FuzzCatalogOpen(f *testing.F) {
	fx := newCatalogFixture(f)
	f.Add(fx.db)
	f.Add(fx.db[:8192])
	f.Add(fx.db[:4096*3+100])
	flipped := append([]byte(nil), fx.db...)
	flipped[2*4096+16] ^= 0xff
	f.Add(flipped)
	cfg := Config{ID: fx.repoID} // so that a catalog that verifies gets read back
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "index.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r := &Repository{dir: dir, store: storage.NewLocal(dir, true), cfg: cfg, opts: OpenOptions{NoFsync: true}}
		db, err := r.tryOpenCatalog(path)
		if err != nil {
			return
		}
		defer db.Close()
		if err := db.View(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketMeta, bucketBlobs, bucketPacks, bucketPoints} {
				bk := tx.Bucket(name)
				if bk == nil {
					t.Fatalf("opened catalog lacks bucket %s", name)
				}
				if err := bk.ForEach(func(k, v []byte) error { return checkCatalogValue(catalogBucketOf(name), k, v) }); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("verified catalog does not read back: %v", err)
		}
	})
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func putU32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
func getU64(b []byte) uint64    { return binary.LittleEndian.Uint64(b) }

// resum recomputes a bbolt meta's checksum (meta = the bytes after the page header).
func resum(meta []byte) {
	h := fnv.New64a()
	h.Write(meta[:boltMetaSumBytes])
	putU64(meta[56:], h.Sum64())
}
