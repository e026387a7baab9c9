package repository

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeFixtureV20 writes testdata/repo-v2.0 when VMVAULT_WRITE_FIXTURE_V20
// names a directory (run once, then committed; never rewritten): a
// multi-writer repository (format 2.0, passphrase "golden") into which two
// writers, appliances "site-a" and "site-b", committed one point each at
// the same time, of goldenImage and goldenImageV12.
func TestWriteFixtureV20(t *testing.T) {
	out := os.Getenv("VMVAULT_WRITE_FIXTURE_V20")
	if out == "" {
		t.Skip("VMVAULT_WRITE_FIXTURE_V20 is not set (the fixture is committed)")
	}
	ctx := context.Background()
	if err := Init(ctx, out, []byte("golden"), InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 64 << 10, MultiWriter: true}); err != nil {
		t.Fatal(err)
	}
	open := func(app string) *Repository {
		r, err := Open(ctx, out, []byte("golden"), OpenOptions{NoFsync: true, Appliance: app, CacheDir: filepath.Join(t.TempDir(), app)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := open("site-a"), open("site-b")
	sa, err := a.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rootA, _ := putImage(t, sa, goldenImage(), 64<<10)
	if _, err := sa.Commit(ctx, NewPoint{VM: VMIdentity{Name: "golden-a"}, Time: testTime, Disks: []NewDisk{{Key: 2000, Label: "disk", Capacity: int64(len(goldenImage())), Map: rootA}}}); err != nil {
		t.Fatal(err)
	}
	sb, err := b.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rootB, _ := putImage(t, sb, goldenImageV12(), 64<<10)
	if _, err := sb.Commit(ctx, NewPoint{VM: VMIdentity{Name: "golden-b"}, Time: testTime.Add(1), Disks: []NewDisk{{Key: 2000, Label: "disk", Capacity: int64(len(goldenImageV12())), Map: rootB}}}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
}

// TestGoldenRepositoryV20 opens the multi-writer fixture (format 2.0,
// written by two writers): both points list with their appliance and
// restore, check is clean, a third writer deduplicates against them, and a
// 1.x-only reader would have refused it (major 2).
func TestGoldenRepositoryV20(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "repo-v2.0"))); err != nil {
		t.Fatal(err)
	}
	r, err := Open(t.Context(), dir, []byte("golden"), OpenOptions{NoFsync: true, Appliance: "site-c", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if c := r.Config(); c.Version != MultiWriterVersion || !c.MultiWriter {
		t.Fatalf("config %+v: want 2.0 multi-writer", c)
	}
	pts, err := r.List(t.Context())
	if err != nil || len(pts) != 2 {
		t.Fatalf("points %+v %v", pts, err)
	}
	slices.SortFunc(pts, func(a, b Point) int { return a.Time.Compare(b.Time) })
	if pts[0].Writer.Appliance != "site-a" || pts[1].Writer.Appliance != "site-b" || pts[0].Writer.ID == pts[1].Writer.ID {
		t.Fatalf("writers %+v %+v", pts[0].Writer, pts[1].Writer)
	}
	verifyPoint(t, r, pts[0].ID, goldenImage())
	verifyPoint(t, r, pts[1].ID, goldenImageV12())
	requireClean(t, r)
	before := uniqueBytes(t, r)
	s, err := r.NewSession(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	root, _ := putImage(t, s, goldenImage(), 64<<10) // the fixture's chunking
	if _, err := s.Commit(t.Context(), NewPoint{VM: VMIdentity{Name: "golden-c"}, Time: testTime.Add(2), Disks: []NewDisk{{Key: 2000, Label: "disk", Capacity: int64(len(goldenImage())), Map: root}}}); err != nil {
		t.Fatal(err)
	}
	if grew := uniqueBytes(t, r) - before; grew > 4<<10 {
		t.Fatalf("a third writer's backup of the same image added %d unique bytes", grew)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "index")); len(ents) < 2 {
		t.Fatalf("index log of the fixture: %d entries", len(ents))
	}
}
