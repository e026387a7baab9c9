package filerestore

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

// extractFixture backs up a real ext4 image of a test tree (links, modes,
// a 16 MiB sparse file) and serves it.
func extractFixture(t *testing.T) *fixture {
	t.Helper()
	guestfstest.Need(t, false, "mkfs.ext4")
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, Modes: true, SparseMiB: 16})
	r := repository.TestRepository(t)
	p := frtest.Backup(t, r, "web01", time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), frtest.Ext4Disk(t, src))
	s, err := New(Config{Source: Single("main", r)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{r: r, s: s, src: src, point: p}
}

// TestExtract restores through every output kind and compares with the
// tree the image was made of.
func TestExtract(t *testing.T) {
	f := extractFixture(t)
	ctx := context.Background()
	dir := t.TempDir()

	// One regular file: its bytes, mode and mtime.
	one := filepath.Join(dir, "nginx.conf")
	st, err := f.s.Extract(ctx, f.point.ID[:8], "d0p1", []string{"/etc/nginx/nginx.conf"}, one)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.Stat(filepath.Join(f.src, "etc/nginx/nginx.conf"))
	got, _ := os.Stat(one)
	if st.Files != 1 || st.Bytes != want.Size() || !got.Mode().IsRegular() || got.Mode().Perm() != want.Mode().Perm() || !got.ModTime().Equal(want.ModTime().Truncate(time.Second)) && !got.ModTime().Equal(want.ModTime()) {
		t.Errorf("one file: stats %+v, mode %v (want %v), mtime %v (want %v)", st, got.Mode(), want.Mode(), got.ModTime(), want.ModTime())
	}
	sameBytes(t, filepath.Join(f.src, "etc/nginx/nginx.conf"), one)

	// A sparse file stays sparse.
	sparse := filepath.Join(dir, "sparse.img")
	if _, err := f.s.Extract(ctx, f.point.ID, "d0p1", []string{"/sparse.img"}, sparse); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, filepath.Join(f.src, "sparse.img"), sparse)
	if fi, _ := os.Stat(sparse); fi.Sys().(*syscall.Stat_t).Blocks*512 > fi.Size()/4 {
		t.Errorf("sparse file restored with %d of %d bytes allocated", fi.Sys().(*syscall.Stat_t).Blocks*512, fi.Size())
	}

	// Two directories into a new directory, each under its last name.
	tree := filepath.Join(dir, "tree")
	st, err = f.s.Extract(ctx, f.point.ID, "d0p1", []string{"/etc", "data"}, tree)
	if err != nil {
		t.Fatal(err)
	}
	if st.Dirs < 2 || st.Files < 2 || st.Links == 0 {
		t.Errorf("tree stats %+v", st)
	}
	sameBytes(t, filepath.Join(f.src, "data/random-1m.bin"), filepath.Join(tree, "data/random-1m.bin"))
	if l, err := os.Readlink(filepath.Join(tree, "etc/abs-link")); err != nil || l != "/etc/nginx/nginx.conf" {
		t.Errorf("link: %q %v", l, err)
	}

	// Archives hold the same names.
	for _, ext := range []string{".tar", ".zip"} {
		out := filepath.Join(dir, "out"+ext)
		if _, err := f.s.Extract(ctx, f.point.ID, "d0p1", []string{"/etc", "/data"}, out); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out)
		var x *extracted
		if ext == ".tar" {
			x = readTar(t, b)
		} else {
			x = readZip(t, b)
		}
		want, _ := os.ReadFile(filepath.Join(f.src, "data/random-1m.bin"))
		if !bytes.Equal(x.files["data/random-1m.bin"], want) || x.links["etc/abs-link"] != "/etc/nginx/nginx.conf" || !x.dirs["etc/nginx"] {
			t.Errorf("%s: files %v links %v dirs %v", ext, keys(x.files, ""), x.links, x.dirs)
		}
	}

	// The root contributes its contents.
	root := filepath.Join(dir, "root")
	if _, err := f.s.Extract(ctx, f.point.ID, "d0p1", []string{"/"}, root); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, filepath.Join(f.src, "etc/nginx/nginx.conf"), filepath.Join(root, "etc/nginx/nginx.conf"))
}

func sameBytes(t *testing.T, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s differs from %s", got, want)
	}
}

// TestExtractRefuses: bad requests and cancellation leave nothing at the
// output and never touch an existing one.
func TestExtractRefuses(t *testing.T) {
	f := extractFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	os.WriteFile(existing, []byte("keep"), 0o600)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	out := filepath.Join(dir, "out")
	cases := []struct {
		name  string
		ctx   context.Context
		paths []string
		out   string
		want  error
	}{
		{"output exists", ctx, []string{"/etc"}, existing, ErrOutputExists},
		{"same path twice", ctx, []string{"/etc", "/etc/."}, out, ErrDuplicateName},
		{"same name twice", ctx, []string{"/etc/nginx", "/etc/nginx/../nginx", "/data"}, out + ".zip", ErrDuplicateName},
		{"climbing path", ctx, []string{"/../etc"}, out, guestfs.ErrBadPath},
		{"missing path", ctx, []string{"/etc", "/no/such"}, out, guestfs.ErrNotExist},
		{"nothing", ctx, nil, out, guestfs.ErrBadPath},
		{"cancelled dir", cancelled, []string{"/data"}, out, context.Canceled},
		{"cancelled tar", cancelled, []string{"/data"}, out + ".tar", context.Canceled},
		{"cancelled file", cancelled, []string{"/data/random-1m.bin"}, out, context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.s.Extract(c.ctx, f.point.ID, "d0p1", c.paths, c.out)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Fatalf("left behind: %v", ents)
			}
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("existing output changed: %q", b)
	}
}

// TestExtractHostileNames: names no sane file system holds ("..", ".", "",
// names with a slash or a NUL) never make an entry climb out of the
// output, in a directory or an archive; the rest is restored, and the
// stats (and an archive's report entry) say which were skipped and why.
// (Before the fix a ".." entry made the extraction fail and "a/../../b"
// became "../b" in a tar; later they were dropped without a word.)
func TestExtractHostileNames(t *testing.T) {
	for _, ext := range []string{"", ".tar", ".zip"} {
		t.Run("out"+ext, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x", "out"+ext)
			os.MkdirAll(filepath.Dir(out), 0o755)
			st, err := Extract(context.Background(), fakeFS{}, []string{"/"}, out)
			if err != nil {
				t.Fatal(err)
			}
			var sk []string
			for _, x := range st.Skipped {
				if x.Dir != "/" || x.Reason == "" {
					t.Errorf("skipped %+v", x)
				}
				sk = append(sk, strconv.Quote(x.Name))
			}
			if !slices.Equal(sk, hostileSkipped) {
				t.Errorf("stats list %v as skipped, want %v", sk, hostileSkipped)
			}
			var names []string
			switch ext {
			case "":
				filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
					if p != out {
						rel, _ := filepath.Rel(out, p)
						names = append(names, rel)
					}
					return nil
				})
			case ".tar", ".zip":
				b, _ := os.ReadFile(out)
				x := readTar
				if ext == ".zip" {
					x = readZip
				}
				files := x(t, b).files
				checkSkippedReport(t, string(files[SkippedReportName]))
				delete(files, SkippedReportName)
				names = keys(files, "")
			}
			if got := strings.Join(names, " "); got != "ok" {
				t.Errorf("restored %q, want only ok", got)
			}
			if ents, _ := os.ReadDir(filepath.Dir(filepath.Dir(out))); len(ents) != 1 {
				t.Errorf("something landed beside the output: %v", ents)
			}
		})
	}
}
