package filerestore

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore/catalog"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

type fixture struct {
	r     *repository.Repository
	s     *Service
	src   string
	point repository.Point
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, Unicode: true, BigDir: 3000, Modes: true})
	frtest.HostileTree(t, src)
	disk := frtest.Ext4Disk(t, src)
	r := repository.TestRepository(t)
	p := frtest.Backup(t, r, "web01", time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), disk)
	cfg.Source = Single("main", r)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{r: r, s: s, src: src, point: p}
}

func TestBrowseAndRead(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	vols, err := f.s.Volumes(ctx, f.point.ID[:8])
	if err != nil {
		t.Fatal(err)
	}
	if len(vols) != 1 || vols[0].ID != "d0p1" || vols[0].FS != guestfs.KindExt4 || !vols[0].Browsable {
		t.Fatalf("volumes %+v", vols)
	}

	// Paging: 3000 entries in pages of 1000, in name order, complete.
	var all []guestfs.Entry
	for off := 0; ; off += 1000 {
		page, total, _, err := f.s.ReadDir(ctx, f.point.ID, "d0p1", "/big", off, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if total != 3000 {
			t.Fatalf("total %d", total)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
	}
	if len(all) != 3000 || all[0].Name != "file-000000" || all[2999].Name != "file-002999" {
		t.Fatalf("paged listing: %d entries, first %+v", len(all), all[0])
	}
	ents, _, _, err := f.s.ReadDir(ctx, f.point.ID, "d0p1", "etc", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]guestfs.Entry{}
	for _, e := range ents {
		byName[e.Name] = e
	}
	if e := byName["abs-link"]; e.Type != "symlink" || e.Target != "/etc/nginx/nginx.conf" {
		t.Errorf("abs-link %+v", e)
	}

	// Random access is byte-identical.
	want, _ := os.ReadFile(filepath.Join(f.src, "data/random-1m.bin"))
	fh, err := f.s.OpenFile(ctx, f.point.ID, "d0p1", "/data/random-1m.bin")
	if err != nil {
		t.Fatal(err)
	}
	if fh.Size() != int64(len(want)) {
		t.Fatalf("size %d, want %d", fh.Size(), len(want))
	}
	buf := make([]byte, 4096)
	if _, err := fh.ReadAt(buf, 777_777); err != nil || !bytes.Equal(buf, want[777_777:777_777+4096]) {
		t.Fatalf("ReadAt: %v", err)
	}
	got, _ := io.ReadAll(io.NewSectionReader(fh, 0, fh.Size()))
	if !bytes.Equal(got, want) {
		t.Fatal("whole file differs")
	}
	fh.Close()

	for _, c := range []struct {
		path string
		want error
	}{
		{"/../etc/passwd", guestfs.ErrBadPath},
		{"etc/../../x", guestfs.ErrBadPath},
		{"/no/such/file", guestfs.ErrNotExist},
		{"/etc", guestfs.ErrIsDir},
	} {
		_, err := f.s.OpenFile(ctx, f.point.ID, "d0p1", c.path)
		if c.want == guestfs.ErrIsDir {
			if err == nil {
				t.Errorf("OpenFile(%q) of a directory: no error", c.path)
			}
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("OpenFile(%q): %v, want %v", c.path, err, c.want)
		}
	}
	if _, err := f.s.Volumes(ctx, "ffffffff"); !errors.Is(err, repository.ErrNotFound) {
		t.Errorf("unknown point: %v", err)
	}
	if _, _, _, err := f.s.ReadDir(ctx, f.point.ID, "d9p9", "/", 0, 0); !errors.Is(err, guestfs.ErrNoVolume) {
		t.Errorf("unknown volume: %v", err)
	}
	// The escape link resolves inside the volume, never to the host's /etc/passwd.
	if _, err := f.s.Stat(ctx, f.point.ID, "d0p1", "/hostile/up-passwd"); !errors.Is(err, guestfs.ErrNotExist) {
		t.Errorf("up-passwd resolves: %v", err)
	}
}

// extracted is an archive read back: every name checked to be local.
type extracted struct {
	files map[string][]byte
	links map[string]string
	dirs  map[string]bool
	modes map[string]fs.FileMode
	times map[string]time.Time
}

func newExtracted() *extracted {
	return &extracted{files: map[string][]byte{}, links: map[string]string{}, dirs: map[string]bool{}, modes: map[string]fs.FileMode{}, times: map[string]time.Time{}}
}

func checkName(t *testing.T, name string) string {
	t.Helper()
	n := strings.TrimSuffix(name, "/")
	if !filepath.IsLocal(n) || strings.Contains(n, `\`) || strings.Contains(n, ":") || strings.HasPrefix(n, "/") {
		t.Fatalf("archive entry %q could escape the extraction directory", name)
	}
	for _, c := range strings.Split(n, "/") {
		if c == ".." || c == "." || c == "" {
			t.Fatalf("archive entry %q has component %q", name, c)
		}
	}
	return n
}

func readZip(t *testing.T, b []byte) *extracted {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	x := newExtracted()
	for _, zf := range zr.File {
		n := checkName(t, zf.Name)
		if _, dup := x.modes[n]; dup {
			t.Fatalf("entry %q twice", n)
		}
		m := zf.Mode()
		x.modes[n], x.times[n] = m, zf.Modified
		rc, _ := zf.Open()
		data, _ := io.ReadAll(rc)
		rc.Close()
		switch {
		case m.IsDir():
			x.dirs[n] = true
		case m&fs.ModeSymlink != 0:
			x.links[n] = string(data)
		default:
			x.files[n] = data
		}
	}
	return x
}

func readTar(t *testing.T, b []byte) *extracted {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	x := newExtracted()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n := checkName(t, h.Name)
		x.modes[n], x.times[n] = h.FileInfo().Mode(), h.ModTime
		switch h.Typeflag {
		case tar.TypeDir:
			x.dirs[n] = true
		case tar.TypeSymlink:
			x.links[n] = h.Linkname
		case tar.TypeReg:
			data, _ := io.ReadAll(tr)
			x.files[n] = data
		default:
			t.Fatalf("entry %q of type %c", n, h.Typeflag)
		}
	}
	return x
}

func TestArchives(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	for _, format := range []string{FormatZip, FormatTar} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			// A selection: two directories, a file under one of them (written
			// once), a symlink, and the hostile names.
			sel := []string{"/etc", "/data", "/etc/hostname", "/data-link", "hostile"}
			if err := f.s.WriteArchive(ctx, &buf, format, f.point.ID, "d0p1", sel); err != nil {
				t.Fatal(err)
			}
			var x *extracted
			if format == FormatZip {
				x = readZip(t, buf.Bytes())
			} else {
				x = readTar(t, buf.Bytes())
			}
			for _, name := range []string{"etc/hostname", "etc/nginx/nginx.conf", "data/random-1m.bin", "data/random-300k.bin"} {
				want, _ := os.ReadFile(filepath.Join(f.src, name))
				if !bytes.Equal(x.files[name], want) {
					t.Errorf("%s: %d bytes, want %d", name, len(x.files[name]), len(want))
				}
				fi, _ := os.Stat(filepath.Join(f.src, name))
				if x.modes[name].Perm() != fi.Mode().Perm() {
					t.Errorf("%s: mode %v, want %v", name, x.modes[name], fi.Mode())
				}
				if !x.times[name].Equal(fi.ModTime()) && x.times[name].Sub(fi.ModTime()).Abs() > 2*time.Second {
					t.Errorf("%s: mtime %v, want %v", name, x.times[name], fi.ModTime())
				}
			}
			// Links are links, with their targets as stored, never followed.
			for name, target := range map[string]string{"data-link": "data", "etc/abs-link": "/etc/nginx/nginx.conf",
				"hostile/abs-passwd": "/etc/passwd", "hostile/up-passwd": "../../../../../etc/passwd"} {
				if x.links[name] != target {
					t.Errorf("link %s -> %q, want %q", name, x.links[name], target)
				}
			}
			// Hostile names are flattened into one harmless component.
			for _, name := range []string{"hostile/.._.._evil.txt", "hostile/C_evil.txt", "hostile/..\u2215x"} {
				if _, ok := x.files[name]; !ok {
					t.Errorf("%s missing (have %v)", name, keys(x.files, "hostile/"))
				}
			}
			if !x.dirs["etc"] || !x.dirs["etc/nginx"] {
				t.Errorf("directories missing: %v", x.dirs)
			}
		})
	}

	// The whole volume, then the same tree as the source.
	var buf bytes.Buffer
	if err := f.s.WriteArchive(ctx, &buf, FormatTar, f.point.ID, "d0p1", []string{"/"}); err != nil {
		t.Fatal(err)
	}
	x := readTar(t, buf.Bytes())
	n := 0
	filepath.WalkDir(f.src, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(f.src, p)
		if rel == "." || d.Type()&fs.ModeSymlink != 0 || d.IsDir() || strings.HasPrefix(rel, "hostile") {
			return nil
		}
		want, _ := os.ReadFile(p)
		if !bytes.Equal(x.files[filepath.ToSlash(rel)], want) {
			t.Errorf("whole volume: %s differs", rel)
		}
		n++
		return nil
	})
	if n < 3000 {
		t.Errorf("compared %d files", n)
	}

	if err := f.s.WriteArchive(ctx, io.Discard, "rar", f.point.ID, "d0p1", []string{"/"}); !errors.Is(err, ErrBadFormat) {
		t.Errorf("rar: %v", err)
	}
	if err := f.s.WriteArchive(ctx, io.Discard, FormatZip, f.point.ID, "d0p1", []string{"/../x"}); !errors.Is(err, guestfs.ErrBadPath) {
		t.Errorf("escape: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.s.WriteArchive(cctx, io.Discard, FormatZip, f.point.ID, "d0p1", []string{"/"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func keys[V any](m map[string]V, prefix string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

func TestSelection(t *testing.T) {
	for _, c := range []struct {
		in   []string
		sel  string
		base string
	}{
		{[]string{"/etc/hostname"}, "etc/hostname", "etc"},
		{[]string{"/etc/nginx", "/etc/hostname"}, "etc/hostname etc/nginx", "etc"},
		{[]string{"/etc", "/etc/hostname", "etc/"}, "etc", "."},
		{[]string{"/a-b", "/a", "/a/b"}, "a a-b", "."},
		{[]string{"/home/alice/x", "/home/bob/y"}, "home/alice/x home/bob/y", "home"},
		{[]string{"/"}, ".", "."},
	} {
		sel, base, err := Selection(c.in)
		if err != nil || strings.Join(sel, " ") != c.sel || base != c.base {
			t.Errorf("Selection(%q) = %q, %q, %v; want %q, %q", c.in, sel, base, err, c.sel, c.base)
		}
	}
	if _, _, err := Selection(nil); !errors.Is(err, guestfs.ErrBadPath) {
		t.Errorf("empty selection: %v", err)
	}
}

// fakeFS is an in-memory file system that holds names no real one should:
// it proves the archive writer never trusts a reader's names.
type fakeFS struct{}

type fakeEntry struct {
	name string
	mode fs.FileMode
}

func (e fakeEntry) Name() string               { return e.name }
func (e fakeEntry) IsDir() bool                { return e.mode.IsDir() }
func (e fakeEntry) Type() fs.FileMode          { return e.mode.Type() }
func (e fakeEntry) Info() (fs.FileInfo, error) { return e, nil }
func (e fakeEntry) Size() int64                { return 1 }
func (e fakeEntry) Mode() fs.FileMode          { return e.mode }
func (e fakeEntry) ModTime() time.Time         { return time.Unix(0, 0) }
func (e fakeEntry) Sys() any                   { return nil }

func (fakeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, fs.ErrNotExist
	}
	return []fs.DirEntry{fakeEntry{"..", fs.ModeDir | 0o755}, fakeEntry{".", fs.ModeDir}, fakeEntry{"", 0o644},
		fakeEntry{"a/../../b", 0o644}, fakeEntry{"nul\x00name", 0o644}, fakeEntry{"ok", 0o644}}, nil
}
func (fakeFS) Lstat(name string) (fs.FileInfo, error) {
	return fakeEntry{name, fs.ModeDir | 0o755}, nil
}
func (fakeFS) Readlink(string) (string, error) { return "", fs.ErrInvalid }
func (fakeFS) OpenFile(name string) (guestfs.File, error) {
	return memFile{bytes.NewReader([]byte("x"))}, nil
}

type memFile struct{ *bytes.Reader }

func (memFile) Stat() (fs.FileInfo, error) { return nil, fs.ErrInvalid }
func (memFile) Close() error               { return nil }
func (m memFile) Size() int64              { return m.Reader.Size() }

// hostileSkipped is what fakeFS's root holds that no path can name.
var hostileSkipped = []string{`".."`, `"."`, `""`, `"a/../../b"`, `"nul\x00name"`}

// TestArchiveHostileNames: entries no path can name are never stored (a
// "/" in a name would read another file's path), and the archive ends with
// a report naming each and why. (Before issue 24 they were dropped, or
// "a/../../b" renamed, without a word.)
func TestArchiveHostileNames(t *testing.T) {
	for _, format := range []string{FormatZip, FormatTar} {
		var buf bytes.Buffer
		if err := WriteArchive(context.Background(), &buf, format, fakeFS{}, []string{"."}, "."); err != nil {
			t.Fatal(err)
		}
		var x *extracted
		if format == FormatZip {
			x = readZip(t, buf.Bytes())
		} else {
			x = readTar(t, buf.Bytes())
		}
		if got := fmt.Sprint(keys(x.files, "")); got != "[ok "+SkippedReportName+"]" && got != "["+SkippedReportName+" ok]" {
			t.Errorf("%s: files %s", format, got)
		}
		if len(x.dirs) != 0 {
			t.Errorf("%s: a dot entry became a directory: %v", format, x.dirs)
		}
		checkSkippedReport(t, string(x.files[SkippedReportName]))
	}
}

func checkSkippedReport(t *testing.T, rep string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(rep, "\n"), "\n")
	if len(lines) != 1+len(hostileSkipped) || !strings.Contains(lines[0], "5 entries") {
		t.Fatalf("report %q", rep)
	}
	for i, want := range hostileSkipped {
		f := strings.Split(lines[1+i], "\t")
		if len(f) != 3 || f[0] != "/" || f[1] != want || f[2] == "" {
			t.Errorf("report line %q, want / %s REASON", lines[1+i], want)
		}
	}
}

func TestCacheBounds(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	f := newFixture(t, Config{MaxOpen: 1, TTL: 200 * time.Millisecond, Clock: clk})
	// janitorPass moves the clock past the TTL and returns once the janitor
	// has looked at the points: its timer (the only one on clk) fired and
	// it armed the next.
	janitorPass := func() {
		t.Helper()
		giveUp := make(chan struct{})
		stop := time.AfterFunc(10*time.Second, func() { close(giveUp) })
		defer stop.Stop()
		if !clk.BlockUntil(1, giveUp) {
			t.Fatal("the janitor did not arm its timer")
		}
		clk.Advance(500 * time.Millisecond)
		if !clk.BlockUntil(1, giveUp) {
			t.Fatal("the janitor did not come back from its pass")
		}
	}
	ctx := context.Background()
	// A second point of the same disk (all chunks deduplicated).
	p2 := frtest.Backup(t, f.r, "web01", time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), frtest.Ext4Disk(t, f.src))
	open := func() int {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		return len(f.s.points)
	}
	// A file held open keeps its point open beyond MaxOpen and the TTL.
	fh, err := f.s.OpenFile(ctx, f.point.ID, "d0p1", "etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Volumes(ctx, p2.ID); err != nil {
		t.Fatal(err)
	}
	if n := open(); n != 1 {
		t.Errorf("%d points open, want 1 (the held one; the idle one evicted over MaxOpen)", n)
	}
	janitorPass()
	if n := open(); n != 1 {
		t.Errorf("held point evicted: %d open", n)
	}
	b := make([]byte, 6)
	if _, err := fh.ReadAt(b, 0); err != nil || string(b) != "web01\n" {
		t.Fatalf("read after the TTL: %q %v", b, err)
	}
	fh.Close()
	janitorPass()
	if n := open(); n != 0 {
		t.Errorf("idle point not closed after the TTL: %d open", n)
	}
}

func TestCatalogSearch(t *testing.T) {
	catDir := t.TempDir()
	f := newFixture(t, Config{CatalogDir: catDir})
	ctx := context.Background()
	// A second, newer point in which nginx.conf changed.
	os.WriteFile(filepath.Join(f.src, "etc/nginx/nginx.conf"), []byte("worker_processes 8;\n"), 0o600)
	p2 := frtest.Backup(t, f.r, "web01", time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), frtest.Ext4Disk(t, f.src))

	res, err := f.s.Search(ctx, catalog.Query{Pattern: "nginx.conf"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pending) != 2 || len(res.Hits) != 0 {
		t.Fatalf("before indexing: %+v", res)
	}
	var progressed int64
	if err := f.s.IndexPending(ctx, func(_, _ string, n int64) { progressed = max(progressed, n) }); err != nil {
		t.Fatal(err)
	}
	if progressed < 3000 {
		t.Errorf("progress reported %d entries", progressed)
	}
	t0 := time.Now()
	res, err = f.s.Search(ctx, catalog.Query{Pattern: "*.conf"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("search in %v", time.Since(t0))
	if len(res.Pending) != 0 || len(res.Hits) != 1 {
		t.Fatalf("after indexing: %+v", res)
	}
	h := res.Hits[0]
	if h.Path != "/etc/nginx/nginx.conf" || h.VM != "web01" || h.Volume != "d0p1" || len(h.Versions) != 2 {
		t.Fatalf("hit %+v", h)
	}
	if v := h.Versions; v[0].RestorePoint != p2.ID || v[0].Size != 20 || v[1].RestorePoint != f.point.ID || v[1].Size != 6000 || v[0].Repository != "main" {
		t.Errorf("versions side by side: %+v", v)
	}
	if res, _ := f.s.Search(ctx, catalog.Query{Pattern: "file-0029", VM: "db01"}); len(res.Hits) != 0 {
		t.Errorf("VM filter: %+v", res.Hits)
	}
	if res, _ := f.s.Search(ctx, catalog.Query{Pattern: "file-0029", VM: "uuid-web01"}); len(res.Hits) != 100 {
		t.Errorf("VM filter by uuid: %d hits", len(res.Hits))
	}

	// A deleted point disappears from answers at once and from the
	// catalog at the next pass.
	if err := f.r.Delete(ctx, f.point.ID); err != nil {
		t.Fatal(err)
	}
	res, _ = f.s.Search(ctx, catalog.Query{Pattern: "nginx.conf"})
	if len(res.Hits) != 1 || len(res.Hits[0].Versions) != 1 || res.Hits[0].Versions[0].RestorePoint != p2.ID {
		t.Errorf("after delete: %+v", res.Hits)
	}
	if err := f.s.IndexPending(ctx, nil); err != nil {
		t.Fatal(err)
	}
	st, _, _ := f.s.idx.store("main")
	if _, err := st.Point(f.point.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("catalog of the deleted point kept: %v", err)
	}
	if _, err := os.Stat(CatalogPath(catDir, f.r)); err != nil {
		t.Errorf("catalog file: %v", err)
	}
}

// A catalog file damaged by a crash or a full disk is a cache: it is put
// aside and built again, and searches answer (before: every search and
// indexing pass failed on it).
func TestBrokenCatalogRebuilt(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{})
	r := repository.TestRepository(t)
	frtest.Backup(t, r, "web01", time.Now().UTC(), frtest.Ext4Disk(t, src))
	dir := t.TempDir()
	p := CatalogPath(dir, r)
	if err := os.WriteFile(p, bytes.Repeat([]byte("not a bbolt file "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Source: Single("main", r), CatalogDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.IndexPending(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := s.Search(context.Background(), catalog.Query{Pattern: "hostname"})
	if err != nil || len(res.Hits) != 1 {
		t.Fatalf("search after the rebuild: %+v %v", res, err)
	}
	if _, err := os.Stat(p + ".broken"); err != nil {
		t.Errorf("the damaged file was not kept aside: %v", err)
	}
}

// A point whose disks are another point's (the same disk maps) gets that
// point's catalog copied: its file systems are not walked again.
func TestCatalogCloneForUnchangedDisks(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{BigDir: 500})
	r := repository.TestRepository(t)
	disk := frtest.Ext4Disk(t, src)
	p1 := frtest.Backup(t, r, "web01", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), disk)
	p2 := frtest.Backup(t, r, "web01", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), disk)
	if p1.Disks[0].Map != p2.Disks[0].Map {
		t.Fatalf("the same image gave two disk maps: %s, %s", p1.Disks[0].Map, p2.Disks[0].Map)
	}
	s, err := New(Config{Source: Single("main", r), CatalogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	walked := map[string]bool{}
	if err := s.IndexPending(context.Background(), func(_, point string, _ int64) { walked[point] = true }); err != nil {
		t.Fatal(err)
	}
	if len(walked) != 1 || !walked[p2.ID] {
		t.Errorf("walked %v, want only the newest point %s", walked, p2.ID)
	}
	st, _, _ := s.idx.store("main")
	a, _ := st.Point(p1.ID)
	b, _ := st.Point(p2.ID)
	if !a.Complete || !b.Complete || a.Files != b.Files || a.Files < 500 {
		t.Errorf("catalogs %+v / %+v", a, b)
	}
	res, err := s.Search(context.Background(), catalog.Query{Pattern: "file-000499"})
	if err != nil || len(res.Hits) != 1 || len(res.Hits[0].Versions) != 2 {
		t.Fatalf("search: %+v %v", res, err)
	}
}
