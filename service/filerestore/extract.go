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
	"path"
	"path/filepath"
	"strings"

	"github.com/vmvault/vmvault/guestfs"
)

// Bounds on what one extraction walks: a hostile file system with a
// directory linked into itself must end, not fill the disk.
const (
	extractMaxDepth   = 256
	extractMaxEntries = 50_000_000
)

// Sentinel errors of Extract, for callers that report them as bad input.
var (
	// ErrOutputExists: the output path exists; an extraction never
	// overwrites.
	ErrOutputExists = errors.New("output exists: extraction never overwrites")
	// ErrDuplicateName: two selected paths have the same last component
	// and would land on the same output name.
	ErrDuplicateName = errors.New("selected paths share a name")
)

// Extract restores selected paths of a point's volume to a local path out
// (see [Extract]), holding the point open meanwhile.
func (s *Service) Extract(ctx context.Context, point, volume string, paths []string, out string) (ExtractStats, error) {
	var st ExtractStats
	err := s.withFS(ctx, point, volume, func(_ *openPoint, o *openFS) error {
		var err error
		st, err = Extract(ctx, o.fs, paths, out)
		return err
	})
	return st, err
}

// Extract restores paths of fsys (each a file, link or directory with
// everything under it) to out, which must not exist. By out's name:
//   - a .tar or .zip: an archive holding each path under its last
//     component;
//   - otherwise, for one regular file: that file;
//   - otherwise: a new directory holding each path under its last
//     component ("/" contributes its contents).
//
// Holes stay holes, modes and mtimes are kept, symbolic links are stored as
// links and never followed; devices, fifos and sockets are skipped. Entries
// whose names no path can name (guestfs.UnsafeName) are not written: the
// stats list them, and a .tar or .zip ends with a SkippedReportName entry. Every
// path is checked before anything is written, and a failed or cancelled
// extraction leaves nothing at out. Paths go through guestfs.CleanPath.
func Extract(ctx context.Context, fsys archiveFS, paths []string, out string) (ExtractStats, error) {
	var st ExtractStats
	if len(paths) == 0 {
		return st, fmt.Errorf("no path selected: %w", guestfs.ErrBadPath)
	}
	if _, err := os.Lstat(out); err == nil {
		return st, fmt.Errorf("%s: %w", out, ErrOutputExists)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		var err error
		if names[i], err = guestfs.CleanPath(p); err != nil {
			return st, fmt.Errorf("path %q: %w", p, err)
		}
	}
	// Check every path before writing anything.
	tops := map[string]string{}
	for i, n := range names {
		if _, err := fsys.Lstat(n); err != nil {
			return st, err
		}
		if n == "." {
			continue
		}
		b := path.Base(n)
		if prev, dup := tops[b]; dup {
			return st, fmt.Errorf("%s and %s would both be stored as %q: %w", prev, paths[i], b, ErrDuplicateName)
		}
		tops[b] = paths[i]
	}
	var err error
	switch ext := strings.ToLower(filepath.Ext(out)); {
	case ext == ".tar" || ext == ".zip":
		err = getArchive(ctx, fsys, names, out, ext, &st)
	case len(names) == 1:
		fi, lerr := fsys.Lstat(names[0])
		if lerr == nil && fi.Mode().IsRegular() {
			err = getOneFile(ctx, fsys, names[0], fi, out, &st)
			break
		}
		fallthrough
	default:
		err = getDir(ctx, fsys, names, out, &st)
	}
	if err != nil {
		return ExtractStats{}, err
	}
	return st, nil
}

// ExtractStats counts what an extraction wrote.
type ExtractStats struct {
	Files, Dirs, Links int
	Bytes              int64
	// Skipped: entries not written because no path can name them.
	Skipped []guestfs.Skipped
	entries int // visited, for the bound on hostile file systems
}

// tempOutput is a temporary file beside out that becomes out only when
// complete: a failed get never leaves a plausible-looking OUT behind.
type tempOutput struct {
	*os.File
	out       string
	published bool
}

func createTempOutput(out string) (*tempOutput, error) {
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".get-*")
	if err != nil {
		return nil, fmt.Errorf("create output: %w", err)
	}
	return &tempOutput{File: f, out: out}, nil
}

// publish links the (closed) file to out. Link, not rename: it fails when
// OUT appeared meanwhile.
func (t *tempOutput) publish() error {
	if err := os.Link(t.Name(), t.out); err != nil {
		return fmt.Errorf("write %s: %w", t.out, err)
	}
	os.Remove(t.Name())
	t.published = true
	return nil
}

// discard closes and removes the file unless it was published.
func (t *tempOutput) discard() {
	if !t.published {
		t.Close()
		os.Remove(t.Name())
	}
}

// getOneFile writes one regular file to out, through a temporary file
// renamed into place, keeping holes, mode and mtime.
func getOneFile(ctx context.Context, fsys archiveFS, name string, fi fs.FileInfo, out string, st *ExtractStats) error {
	f, err := fsys.OpenFile(name)
	if err != nil {
		return err
	}
	defer f.Close()
	tmp, err := createTempOutput(out)
	if err != nil {
		return err
	}
	defer tmp.discard()
	if err := copySparse(ctx, tmp.File, f); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close output: %w", err)
	}
	if err := os.Chtimes(tmp.Name(), fi.ModTime(), fi.ModTime()); err != nil {
		return err
	}
	if err := tmp.publish(); err != nil {
		return err
	}
	st.Files++
	st.Bytes += f.Size()
	return nil
}

// copySparse copies f into w, writing only data extents (or, when the
// reader does not know them, only non-zero blocks) and sizing w, so holes
// stay holes.
func copySparse(ctx context.Context, w *os.File, f guestfs.File) error {
	size := f.Size()
	ranges, ok := [][2]int64(nil), false
	if s, is := f.(guestfs.Sparse); is {
		ranges, ok = s.DataExtents()
	}
	if !ok {
		ranges = [][2]int64{{0, size}}
	}
	buf := make([]byte, 1<<20)
	zero := make([]byte, 64<<10)
	for _, r := range ranges {
		for off := r[0]; off < r[0]+r[1]; {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := int(min(int64(len(buf)), r[0]+r[1]-off))
			m, err := f.ReadAt(buf[:n], off)
			if err != nil && !(err == io.EOF && m == n) {
				return err
			}
			for i := 0; i < n; i += len(zero) {
				b := buf[i:min(n, i+len(zero))]
				if bytes.Equal(b, zero[:len(b)]) {
					continue
				}
				if _, err := w.WriteAt(b, off+int64(i)); err != nil {
					return err
				}
			}
			off += int64(n)
		}
	}
	return w.Truncate(size)
}

// walkFn visits one entry of a get: rel is its slash path in the output.
type walkFn func(rel, name string, fi fs.FileInfo) error

// walkGet visits every path and, for directories, everything beneath them,
// parents before children, never following a symbolic link.
func walkGet(ctx context.Context, fsys archiveFS, names []string, st *ExtractStats, fn walkFn) error {
	var walk func(rel, name string, fi fs.FileInfo, depth int) error
	walk = func(rel, name string, fi fs.FileInfo, depth int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if st.entries++; st.entries > extractMaxEntries {
			return fmt.Errorf("more than %d entries: the file system may loop", extractMaxEntries)
		}
		if rel != "" {
			if err := fn(rel, name, fi); err != nil {
				return err
			}
		}
		if !fi.IsDir() {
			return nil
		}
		if depth > extractMaxDepth {
			return fmt.Errorf("%s: deeper than %d directories: the file system may loop", name, extractMaxDepth)
		}
		ents, sk, err := guestfs.ReadDirSkipped(fsys, name)
		if err != nil {
			return err
		}
		st.Skipped = append(st.Skipped, sk...)
		for _, e := range ents {
			// A hostile file system's "", "." or "..", or a name with a
			// "/" (another file's path) or a NUL, is never restored: it
			// is reported in the stats.
			if skipEntry(&st.Skipped, name, e.Name()) {
				continue
			}
			local, ok := localName(e.Name())
			if !ok {
				continue
			}
			ci, err := e.Info()
			if err != nil {
				return fmt.Errorf("%s: %w", path.Join(name, e.Name()), err)
			}
			if err := walk(path.Join(rel, local), path.Join(name, e.Name()), ci, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range names {
		fi, err := fsys.Lstat(n)
		if err != nil {
			return err
		}
		rel := path.Base(n)
		if n == "." {
			rel = ""
		}
		if err := walk(rel, n, fi, 0); err != nil {
			return err
		}
	}
	return nil
}

// localName turns a name read from a volume into one path component of the
// output: "", "." and ".." (which no sane file system holds but a hostile
// one can) are refused and "/" becomes "_". Other characters are kept: the
// output is a Linux directory or an archive extracted on one (the API's
// archives, for any client, also replace "\" and ":"; see SafeName).
func localName(n string) (string, bool) {
	if n == "" || n == "." || n == ".." {
		return "", false
	}
	return strings.ReplaceAll(n, "/", "_"), true
}

// getDir restores into a new directory. Every write goes through os.Root,
// which refuses any path that would leave OUT, symbolic links included.
func getDir(ctx context.Context, fsys archiveFS, names []string, out string, st *ExtractStats) (err error) {
	if err := os.Mkdir(out, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	// OUT did not exist: a failed get leaves nothing behind (RemoveAll
	// removes links, it does not follow them).
	defer func() {
		if err != nil {
			os.RemoveAll(out)
		}
	}()
	root, err := os.OpenRoot(out)
	if err != nil {
		return err
	}
	defer root.Close()
	type dirTime struct {
		rel string
		fi  fs.FileInfo
	}
	var dirs []dirTime
	err = walkGet(ctx, fsys, names, st, func(rel, name string, fi fs.FileInfo) error {
		local := filepath.FromSlash(rel)
		switch {
		case fi.IsDir():
			if err := root.Mkdir(local, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{local, fi})
			st.Dirs++
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := fsys.Readlink(name)
			if err != nil {
				return err
			}
			// The link is stored as it is; os.Root never follows it out.
			if err := root.Symlink(t, local); err != nil {
				return err
			}
			st.Links++
		case fi.Mode().IsRegular():
			f, err := fsys.OpenFile(name)
			if err != nil {
				return err
			}
			defer f.Close()
			w, err := root.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if err := copySparse(ctx, w, f); err != nil {
				w.Close()
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := w.Chmod(fi.Mode().Perm()); err != nil {
				w.Close()
				return err
			}
			if err := w.Close(); err != nil {
				return err
			}
			if err := root.Chtimes(local, fi.ModTime(), fi.ModTime()); err != nil {
				return err
			}
			st.Files++
			st.Bytes += fi.Size()
		}
		// Devices, fifos and sockets are not recreated.
		return nil
	})
	if err != nil {
		return err
	}
	// Directory modes and times last: files written into them moved them.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := root.Chmod(d.rel, d.fi.Mode().Perm()|0o200); err != nil {
			return err
		}
		if err := root.Chtimes(d.rel, d.fi.ModTime(), d.fi.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

// getArchive writes a .tar or .zip through a temporary file.
func getArchive(ctx context.Context, fsys archiveFS, names []string, out, ext string, st *ExtractStats) error {
	tmp, err := createTempOutput(out)
	if err != nil {
		return err
	}
	defer tmp.discard()
	if ext == ".tar" {
		err = writeTar(ctx, fsys, names, tmp.File, st)
	} else {
		err = writeZip(ctx, fsys, names, tmp.File, st)
	}
	if err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return tmp.publish()
}

func writeTar(ctx context.Context, fsys archiveFS, names []string, w io.Writer, st *ExtractStats) error {
	tw := tar.NewWriter(w)
	err := walkGet(ctx, fsys, names, st, func(rel, name string, fi fs.FileInfo) error {
		h := &tar.Header{Name: rel, ModTime: fi.ModTime(), Mode: int64(guestfs.UnixPerm(fi.Mode())), Format: tar.FormatPAX}
		var f guestfs.File
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, rel+"/"
			st.Dirs++
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := fsys.Readlink(name)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, t
			st.Links++
		case fi.Mode().IsRegular():
			var err error
			if f, err = fsys.OpenFile(name); err != nil {
				return err
			}
			defer f.Close()
			h.Typeflag, h.Size = tar.TypeReg, f.Size()
			st.Files++
			st.Bytes += f.Size()
		default:
			return nil
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if f != nil {
			if _, err := io.Copy(tw, &ctxReader{ctx: ctx, r: io.NewSectionReader(f, 0, f.Size())}); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(st.Skipped) > 0 {
		rep := skippedReport(st.Skipped)
		h := &tar.Header{Name: SkippedReportName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(rep)), ModTime: reportTime(fsys, names), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, rep); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeZip(ctx context.Context, fsys archiveFS, names []string, w io.Writer, st *ExtractStats) error {
	zw := zip.NewWriter(w)
	err := walkGet(ctx, fsys, names, st, func(rel, name string, fi fs.FileInfo) error {
		h := &zip.FileHeader{Name: rel, Modified: fi.ModTime(), Method: zip.Deflate}
		var body io.Reader
		switch {
		case fi.IsDir():
			h.Name, h.Method = rel+"/", zip.Store
			h.SetMode(fs.ModeDir | fi.Mode().Perm())
			st.Dirs++
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := fsys.Readlink(name)
			if err != nil {
				return err
			}
			// Info-ZIP's convention: a symlink's data is its target.
			h.SetMode(fs.ModeSymlink | 0o777)
			h.Method, body = zip.Store, strings.NewReader(t)
			st.Links++
		case fi.Mode().IsRegular():
			f, err := fsys.OpenFile(name)
			if err != nil {
				return err
			}
			defer f.Close()
			h.SetMode(fi.Mode().Perm())
			body = &ctxReader{ctx: ctx, r: io.NewSectionReader(f, 0, f.Size())}
			st.Files++
			st.Bytes += f.Size()
		default:
			return nil
		}
		zf, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if body != nil {
			if _, err := io.Copy(zf, body); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(st.Skipped) > 0 {
		h := &zip.FileHeader{Name: SkippedReportName, Modified: reportTime(fsys, names), Method: zip.Deflate}
		h.SetMode(0o644)
		zf, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(zf, skippedReport(st.Skipped)); err != nil {
			return err
		}
	}
	return zw.Close()
}
