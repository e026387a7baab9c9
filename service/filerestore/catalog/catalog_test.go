package catalog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

type ent struct {
	vol, path, typ string
	size           int64
}

func build(t testing.TB, s *Store, id, vm string, at time.Time, ents []ent) {
	t.Helper()
	b, err := s.Build(PointInfo{ID: id, VM: vm, Time: at})
	if err != nil {
		t.Fatal(err)
	}
	vols := map[string]bool{}
	for _, e := range ents {
		if err := b.Add(e.vol, e.path, e.typ, e.size, at.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		vols[e.vol] = true
	}
	for v := range vols {
		if err := b.FinishVolume(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
}

func open(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "repo.catalog"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func paths(res Result) []string {
	var out []string
	for _, h := range res.Hits {
		out = append(out, fmt.Sprintf("%s:%s%s:%d", h.VM, h.Volume, h.Path, len(h.Versions)))
	}
	return out
}

func TestSearch(t *testing.T) {
	s := open(t)
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(24 * time.Hour)
	build(t, s, "p1", "web01", t1, []ent{
		{"d0p1", "etc", TypeDir, 0},
		{"d0p1", "etc/nginx/nginx.conf", TypeFile, 100},
		{"d0p1", "home/alice/Report.docx", TypeFile, 5000},
	})
	build(t, s, "p2", "web01", t2, []ent{
		{"d0p1", "etc", TypeDir, 0},
		{"d0p1", "etc/nginx/nginx.conf", TypeFile, 120},
		{"d0p1", "home/alice/Report.docx", TypeFile, 7000},
		{"d0p1", "home/alice/new.txt", TypeFile, 1},
	})
	build(t, s, "p3", "db01", t2, []ent{{"d0p1", "etc/nginx/nginx.conf", TypeFile, 9}})

	ctx := context.Background()
	cases := []struct {
		q    Query
		want []string
	}{
		{Query{Pattern: "report.DOCX"}, []string{"web01:d0p1/home/alice/Report.docx:2"}},
		{Query{Pattern: "*.conf"}, []string{"web01:d0p1/etc/nginx/nginx.conf:2", "db01:d0p1/etc/nginx/nginx.conf:1"}},
		{Query{Pattern: "*.conf", VM: "db01"}, []string{"db01:d0p1/etc/nginx/nginx.conf:1"}},
		{Query{Pattern: "/home/*/*.txt"}, []string{"web01:d0p1/home/alice/new.txt:1"}},
		{Query{Pattern: "/etc/*"}, nil}, // path.Match: * does not cross "/"
		{Query{Pattern: "alice", Since: t2}, []string{"web01:d0p1/home/alice/Report.docx:1", "web01:d0p1/home/alice/new.txt:1"}},
		{Query{Pattern: "nothing-like-this"}, nil},
	}
	for _, c := range cases {
		res, err := s.Search(ctx, c.q)
		if err != nil {
			t.Fatalf("%+v: %v", c.q, err)
		}
		got := paths(res)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%+v: got %v, want %v", c.q, got, c.want)
		}
	}
	// Versions side by side, newest point first, with their own sizes.
	res, _ := s.Search(ctx, Query{Pattern: "Report"})
	v := res.Hits[0].Versions
	if len(v) != 2 || v[0].RestorePoint != "p2" || v[0].Size != 7000 || v[1].Size != 5000 || !v[1].Mtime.Equal(t1.Add(-time.Hour)) {
		t.Errorf("versions %+v", v)
	}
	if _, err := s.Search(ctx, Query{Pattern: "[x"}); !errors.Is(err, ErrBadPattern) {
		t.Errorf("bad glob: %v", err)
	}
	if _, err := s.Search(ctx, Query{Pattern: ""}); !errors.Is(err, ErrBadPattern) {
		t.Errorf("empty pattern: %v", err)
	}
	res, _ = s.Search(ctx, Query{Pattern: "e", Limit: 2})
	if len(res.Hits) != 2 || !res.Truncated {
		t.Errorf("limit: %d hits, truncated %v", len(res.Hits), res.Truncated)
	}
}

func countPaths(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPaths).ForEach(func(k, v []byte) error { n++; return nil })
	})
	return n
}

func TestDropReclaimsPaths(t *testing.T) {
	s := open(t)
	at := time.Now()
	build(t, s, "p1", "vm", at, []ent{{"v", "a", TypeFile, 1}, {"v", "shared", TypeFile, 1}})
	build(t, s, "p2", "vm", at, []ent{{"v", "b", TypeFile, 1}, {"v", "shared", TypeFile, 2}})
	if n := countPaths(t, s); n != 6 { // 3 paths + 3 reverse entries
		t.Fatalf("%d path records, want 6", n)
	}
	if err := s.Drop(context.Background(), "p1"); err != nil {
		t.Fatal(err)
	}
	if n := countPaths(t, s); n != 4 {
		t.Errorf("after drop: %d path records, want 4 (a gone, shared kept)", n)
	}
	res, _ := s.Search(context.Background(), Query{Pattern: "shared"})
	if len(res.Hits) != 1 || len(res.Hits[0].Versions) != 1 || res.Hits[0].Versions[0].RestorePoint != "p2" {
		t.Errorf("after drop: %+v", res.Hits)
	}
	if _, err := s.Point("p1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("dropped point still listed: %v", err)
	}
	if err := s.Drop(context.Background(), "p1"); err != nil {
		t.Errorf("drop twice: %v", err)
	}
	s.Drop(context.Background(), "p2")
	if n := countPaths(t, s); n != 0 {
		t.Errorf("after dropping all: %d path records", n)
	}
}

// A build interrupted in a volume resumes: finished volumes are skipped and
// the entries added again are not counted twice.
func TestBuildResumes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Build(PointInfo{ID: "p", VM: "vm"})
	b.Add("v1", "x", TypeFile, 1, time.Now())
	b.FinishVolume("v1")
	for i := 0; i < batchSize+10; i++ { // one batch flushed, then "crash"
		b.Add("v2", fmt.Sprint("f", i), TypeFile, 1, time.Now())
	}
	s.Close()

	s, err = Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pi, _ := s.Point("p")
	if pi.Complete || pi.Files != batchSize+1 {
		t.Fatalf("after the crash: %+v", pi)
	}
	b, _ = s.Build(PointInfo{ID: "p", VM: "vm"})
	if !b.VolumeDone("v1") || b.VolumeDone("v2") {
		t.Fatalf("resume: v1 done %v, v2 done %v", b.VolumeDone("v1"), b.VolumeDone("v2"))
	}
	for i := 0; i < batchSize+10; i++ {
		b.Add("v2", fmt.Sprint("f", i), TypeFile, 1, time.Now())
	}
	b.FinishVolume("v2")
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	pi, _ = s.Point("p")
	if !pi.Complete || pi.Files != batchSize+11 {
		t.Errorf("resumed: %+v, want %d files", pi, batchSize+11)
	}
}

func TestVersionRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyVersion, []byte("99")) })
	s.Close()
	if _, err := Open(p); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 99: %v", err)
	}
}

// BenchmarkSearch1M: a catalog of 1,000,000 distinct paths (two points
// sharing half of them); each iteration is one substring and one glob search.
//
//	go test -run x -bench Search1M -benchtime 3x ./service/filerestore/catalog/
func BenchmarkSearch1M(b *testing.B) {
	s := open(b)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id string, from, to int) {
		bl, err := s.Build(PointInfo{ID: id, VM: "fileserver", Time: at})
		if err != nil {
			b.Fatal(err)
		}
		for i := from; i < to; i++ {
			p := fmt.Sprintf("home/user%03d/projects/p%02d/doc-%07d.txt", i%1000, i%97, i)
			if err := bl.Add("d0p1", p, TypeFile, int64(i), at); err != nil {
				b.Fatal(err)
			}
		}
		bl.FinishVolume("d0p1")
		bl.Finish()
	}
	start := time.Now()
	mk("p1", 0, 750_000)
	b.Logf("p1 built in %v", time.Since(start))
	mk("p2", 250_000, 1_000_000)
	b.Logf("built 1.5M entries (1M distinct paths) in %v", time.Since(start))
	ctx := context.Background()
	b.ResetTimer()
	var worst time.Duration
	for i := 0; i < b.N; i++ {
		for _, pat := range []string{"doc-0500000", "doc-07777*.txt"} {
			t0 := time.Now()
			res, err := s.Search(ctx, Query{Pattern: pat})
			if err != nil {
				b.Fatal(err)
			}
			worst = max(worst, time.Since(t0))
			if res.Scanned != 1_000_000 || len(res.Hits) == 0 {
				b.Fatalf("%s: scanned %d, %d hits", pat, res.Scanned, len(res.Hits))
			}
			if pat == "doc-0500000" && len(res.Hits[0].Versions) != 2 {
				b.Fatalf("versions %+v", res.Hits[0].Versions)
			}
		}
	}
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms/search")
	if worst > time.Second {
		b.Errorf("a search took %v, over 1 s", worst)
	}
}

func TestClone(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	at := time.Now().UTC()
	build(t, s, "p1", "vm", at, []ent{{"v", "a", TypeFile, 1}, {"v", "b", TypeFile, 2}})
	if err := s.Clone(ctx, "p1", PointInfo{ID: "p2", VM: "vm", Time: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	pi, err := s.Point("p2")
	if err != nil || !pi.Complete || pi.Files != 2 || !pi.Time.Equal(at.Add(time.Hour)) {
		t.Fatalf("clone: %+v %v", pi, err)
	}
	res, _ := s.Search(ctx, Query{Pattern: "b"})
	if len(res.Hits) != 1 || len(res.Hits[0].Versions) != 2 {
		t.Fatalf("versions after the clone: %+v", res.Hits)
	}
	// References were counted: dropping the source keeps the clone's paths.
	s.Drop(ctx, "p1")
	if n := countPaths(t, s); n != 4 {
		t.Errorf("after dropping the source: %d path records, want 4", n)
	}
	s.Drop(ctx, "p2")
	if n := countPaths(t, s); n != 0 {
		t.Errorf("after dropping both: %d path records", n)
	}
	if err := s.Clone(ctx, "nope", PointInfo{ID: "p3"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("clone of nothing: %v", err)
	}
}
