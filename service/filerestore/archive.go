package filerestore

import (
	"archive/tar"
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmvault/vmvault/guestfs"
)

// Archive formats.
const (
	FormatZip = "zip"
	FormatTar = "tar"
)

// ErrBadFormat: an archive format other than zip or tar.
var ErrBadFormat = errors.New("archive format must be zip or tar")

// Bounds on one archive: a hostile file system with a directory linked into
// itself must end, not stream forever.
const (
	archiveMaxDepth   = 256
	archiveMaxEntries = 10_000_000
)

// WriteArchive streams the selected paths of a volume (directories with
// everything under them) to w as a zip or tar archive. Names are relative to
// the selection's common parent directory, cleaned so that no entry can land
// outside the extraction directory (see SafeName); symbolic links are stored
// as links with their target as the file system holds it, never followed;
// mtimes and permission bits are kept. A path selected twice, or under
// another selected directory, is written once. Entries whose names no path
// can name (guestfs.UnsafeName: "..", a "/" or a NUL inside, from a hostile
// image) are not stored: the archive then ends with a text entry
// SkippedReportName listing each one and why.
func (s *Service) WriteArchive(ctx context.Context, w io.Writer, format, point, volume string, paths []string) error {
	if format != FormatZip && format != FormatTar {
		return fmt.Errorf("%q: %w", format, ErrBadFormat)
	}
	sel, base, err := Selection(paths)
	if err != nil {
		return err
	}
	return s.withFS(ctx, point, volume, func(_ *openPoint, o *openFS) error {
		return WriteArchive(ctx, w, format, o.fs, sel, base)
	})
}

// Selection cleans the user's paths, drops duplicates and paths under
// another selected path, and returns them sorted with their common parent
// directory (the archive's names are relative to it).
func Selection(paths []string) (sel []string, base string, err error) {
	if len(paths) == 0 {
		return nil, "", fmt.Errorf("no path selected: %w", guestfs.ErrBadPath)
	}
	var cl []string
	for _, p := range paths {
		c, err := guestfs.CleanPath(p)
		if err != nil {
			return nil, "", fmt.Errorf("path %q: %w", p, err)
		}
		cl = append(cl, c)
	}
	sort.Strings(cl)
	if slices.Contains(cl, ".") {
		// The root covers everything; sorting does not put it first (" " < ".").
		return []string{"."}, ".", nil
	}
	under := func(p, dir string) bool { return dir == "." || p == dir || strings.HasPrefix(p, dir+"/") }
	for _, c := range cl {
		if len(sel) > 0 && under(c, sel[len(sel)-1]) {
			continue
		}
		// Sorting puts "a" before "a/b" but "a-b" between them; check all.
		dup := false
		for _, d := range sel {
			if under(c, d) {
				dup = true
				break
			}
		}
		if !dup {
			sel = append(sel, c)
		}
	}
	base = parentOf(sel[0])
	for _, c := range sel[1:] {
		base = commonDir(base, parentOf(c))
	}
	return sel, base, nil
}

func parentOf(p string) string {
	if p == "." {
		return "."
	}
	return path.Dir(p)
}

func commonDir(a, b string) string {
	if a == "." || b == "." {
		return "."
	}
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	if n == 0 {
		return "."
	}
	return strings.Join(as[:n], "/")
}

// SafeName turns one name from a file system into an archive path
// component that cannot climb or jump when extracted on Linux or Windows:
// "", "." and ".." (which no sane file system holds but a hostile one can)
// are refused; "/", "\" (a separator for Windows extractors), ":" (a drive
// or stream on Windows) and control characters become "_".
func SafeName(n string) (string, bool) {
	if n == "" || n == "." || n == ".." {
		return "", false
	}
	var b strings.Builder
	for _, r := range n {
		switch {
		case r == '/' || r == '\\' || r == ':' || r < 0x20 || r == 0x7f:
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if out == "." || out == ".." {
		return "", false
	}
	return out, true
}

// SkippedReportName is the last entry of an archive (API download or
// `files get` to a .tar or .zip) when entries were skipped: one line per
// entry, "DIR<TAB>"NAME"<TAB>REASON", the name quoted as Go does.
const SkippedReportName = "vmvault-skipped.txt"

// skippedReport is the text of SkippedReportName.
func skippedReport(sk []guestfs.Skipped) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# vmvault: %d entries of the volume are not in this archive: their names cannot be a path (a hostile or damaged file system).\n", len(sk))
	for _, x := range sk {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", x.Dir, strconv.Quote(x.Name), x.Reason)
	}
	return b.String()
}

// reportTime is the report entry's mtime: the first selected path's, so
// that an archive of one point is the same bytes every time.
func reportTime(fsys archiveFS, sel []string) time.Time {
	if len(sel) > 0 {
		if fi, err := fsys.Lstat(sel[0]); err == nil {
			return fi.ModTime().UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

// reportInfo is the FileInfo of the report entry.
type reportInfo struct {
	size int64
	mod  time.Time
}

func (r reportInfo) Name() string       { return SkippedReportName }
func (r reportInfo) Size() int64        { return r.size }
func (r reportInfo) Mode() fs.FileMode  { return 0o644 }
func (r reportInfo) ModTime() time.Time { return r.mod }
func (r reportInfo) IsDir() bool        { return false }
func (r reportInfo) Sys() any           { return nil }

// skipEntry records a child of dir (a clean volume path) that is not
// stored, when its name is unsafe; it reports whether it was.
func skipEntry(sk *[]guestfs.Skipped, dir, name string) bool {
	why := guestfs.UnsafeName(name)
	if why == "" {
		return false
	}
	*sk = append(*sk, guestfs.Skipped{Dir: guestfs.SlashPath(dir), Name: name, Reason: why})
	return true
}

// archiveFS is what WriteArchive reads: guestfs.FS satisfies it.
type archiveFS interface {
	ReadDir(name string) ([]fs.DirEntry, error)
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	OpenFile(name string) (guestfs.File, error)
}

type archiver interface {
	dir(name string, fi fs.FileInfo) error
	file(name string, fi fs.FileInfo, r io.Reader) error
	link(name, target string, fi fs.FileInfo) error
	close() error
}

// WriteArchive writes sel (clean paths, as Selection returns them) of fsys
// relative to base. Exported for the CLI and tests.
func WriteArchive(ctx context.Context, w io.Writer, format string, fsys archiveFS, sel []string, base string) error {
	var a archiver
	switch format {
	case FormatZip:
		a = &zipArchiver{w: zip.NewWriter(w)}
	case FormatTar:
		a = &tarArchiver{w: tar.NewWriter(w), out: w}
	default:
		return fmt.Errorf("%q: %w", format, ErrBadFormat)
	}
	wr := &walker{ctx: ctx, fsys: fsys, a: a}
	if v, ok := fsys.(interface{ Volume() guestfs.Volume }); ok {
		wr.volSize = v.Volume().Size
	}
	for _, p := range sel {
		// The selection's own components below base come from the user
		// (already cleaned); they still go through SafeName.
		rel := p
		if base != "." {
			rel = strings.TrimPrefix(p, base+"/")
		}
		var name []string
		if rel != "." {
			for _, c := range strings.Split(rel, "/") {
				sc, ok := SafeName(c)
				if !ok {
					return fmt.Errorf("path %q: %w", p, guestfs.ErrBadPath)
				}
				name = append(name, sc)
			}
		}
		fi, err := fsys.Lstat(p)
		if err != nil {
			return err
		}
		if err := wr.entry(p, strings.Join(name, "/"), fi, 0); err != nil {
			return err
		}
	}
	if len(wr.skipped) > 0 {
		rep := skippedReport(wr.skipped)
		if err := a.file(SkippedReportName, reportInfo{int64(len(rep)), reportTime(fsys, sel)}, strings.NewReader(rep)); err != nil {
			return err
		}
	}
	return a.close()
}

type walker struct {
	ctx     context.Context
	fsys    archiveFS
	a       archiver
	n       int
	volSize int64 // the volume's size, 0 if unknown
	skipped []guestfs.Skipped
}

// sparseArchiver is an archiver that can store holes as holes.
type sparseArchiver interface {
	sparse(name string, fi fs.FileInfo, ranges [][2]int64, r io.ReaderAt, size int64) error
}

// entry writes one path (src in the volume, name in the archive; name ""
// is the root of the archive, written without an entry of its own).
func (wr *walker) entry(src, name string, fi fs.FileInfo, depth int) error {
	if err := wr.ctx.Err(); err != nil {
		return err
	}
	if wr.n++; wr.n > archiveMaxEntries {
		return fmt.Errorf("more than %d entries: %w", archiveMaxEntries, guestfs.ErrCorrupt)
	}
	if depth > archiveMaxDepth {
		return fmt.Errorf("%s: deeper than %d directories: %w", src, archiveMaxDepth, guestfs.ErrCorrupt)
	}
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		t, err := wr.fsys.Readlink(src)
		if err != nil {
			return err
		}
		return wr.a.link(name, t, fi)
	case m.IsDir():
		if name != "" {
			if err := wr.a.dir(name, fi); err != nil {
				return err
			}
		}
		ents, sk, err := guestfs.ReadDirSkipped(wr.fsys, src)
		if err != nil {
			return err
		}
		wr.skipped = append(wr.skipped, sk...)
		for _, e := range ents {
			// A hostile "..", or a "/" that would make the name another
			// file's path: never written, and reported.
			if skipEntry(&wr.skipped, src, e.Name()) {
				continue
			}
			sc, ok := SafeName(e.Name())
			if !ok {
				wr.skipped = append(wr.skipped, guestfs.Skipped{Dir: guestfs.SlashPath(src), Name: e.Name(), Reason: "the name cannot be stored safely"})
				continue
			}
			cfi, err := e.Info()
			if err != nil {
				return err
			}
			cn := sc
			if name != "" {
				cn = name + "/" + sc
			}
			if err := wr.entry(path.Join(src, e.Name()), cn, cfi, depth+1); err != nil {
				return err
			}
		}
		return nil
	case m.IsRegular():
		f, err := wr.fsys.OpenFile(src)
		if err != nil {
			return err
		}
		defer f.Close()
		if name == "" {
			name = path.Base(src)
		}
		size := f.Size()
		if sa, ok := wr.a.(sparseArchiver); ok {
			if ranges, known := dataRanges(f); known {
				var data int64
				for _, r := range ranges {
					data += r[1]
				}
				if size-data >= sparseMinHoles {
					return sa.sparse(name, fi, ranges, ctxReaderAt{wr.ctx, f}, size)
				}
			}
		}
		// Without holes kept, a file is sent whole: one that claims more
		// than its volume holds would be a stream of zeros with no end
		// worth waiting for.
		if wr.volSize > 0 && size > wr.volSize {
			return fmt.Errorf("/%s claims %d bytes on a volume of %d: %w; download it as tar (holes kept) or restore it to a directory", src, size, wr.volSize, ErrTooSparse)
		}
		return wr.a.file(name, fi, &ctxReader{ctx: wr.ctx, r: io.NewSectionReader(f, 0, size)})
	}
	return nil // devices, fifos, sockets: nothing to restore
}

// ctxReader stops a long copy when the request is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ctxReaderAt is ctxReader for random access.
type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(p, off)
}

type zipArchiver struct{ w *zip.Writer }

func (z *zipArchiver) header(name string, fi fs.FileInfo, method uint16) *zip.FileHeader {
	h := &zip.FileHeader{Name: name, Method: method, Modified: fi.ModTime()}
	h.SetMode(fi.Mode())
	return h
}

func (z *zipArchiver) dir(name string, fi fs.FileInfo) error {
	_, err := z.w.CreateHeader(z.header(name+"/", fi, zip.Store))
	return err
}

func (z *zipArchiver) file(name string, fi fs.FileInfo, r io.Reader) error {
	h := z.header(name, fi, zip.Deflate)
	h.UncompressedSize64 = uint64(fi.Size())
	w, err := z.w.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, r)
	return err
}

func (z *zipArchiver) link(name, target string, fi fs.FileInfo) error {
	w, err := z.w.CreateHeader(z.header(name, fi, zip.Store))
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, target)
	return err
}

func (z *zipArchiver) close() error { return z.w.Close() }

type tarArchiver struct {
	w   *tar.Writer
	out io.Writer // beneath w: sparse entries are written by hand
}

func (t *tarArchiver) sparse(name string, fi fs.FileInfo, ranges [][2]int64, r io.ReaderAt, size int64) error {
	if err := t.w.Flush(); err != nil {
		return err
	}
	return writeSparse(t.out, name, fi, ranges, r, size)
}

func tarHeader(name string, fi fs.FileInfo, typ byte) *tar.Header {
	return &tar.Header{Name: name, Typeflag: typ, Mode: int64(guestfs.UnixPerm(fi.Mode())), ModTime: fi.ModTime(), Format: tar.FormatPAX}
}

func (t *tarArchiver) dir(name string, fi fs.FileInfo) error {
	return t.w.WriteHeader(tarHeader(name+"/", fi, tar.TypeDir))
}

func (t *tarArchiver) file(name string, fi fs.FileInfo, r io.Reader) error {
	h := tarHeader(name, fi, tar.TypeReg)
	h.Size = fi.Size()
	if err := t.w.WriteHeader(h); err != nil {
		return err
	}
	_, err := io.Copy(t.w, r)
	return err
}

func (t *tarArchiver) link(name, target string, fi fs.FileInfo) error {
	h := tarHeader(name, fi, tar.TypeSymlink)
	h.Linkname = target
	return t.w.WriteHeader(h)
}

func (t *tarArchiver) close() error { return t.w.Close() }
