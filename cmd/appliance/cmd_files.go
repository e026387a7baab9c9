package main

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
	"text/tabwriter"
	"time"

	"github.com/vmvault/vmvault/flr"
	"github.com/vmvault/vmvault/flr/mount"
	"github.com/vmvault/vmvault/repository"
)

func init() {
	register(&command{name: "files volumes", summary: "list the volumes (partitions, LVs) of a restore point and their file systems", run: runFilesVolumes})
	register(&command{name: "files ls", summary: "list a directory inside a restore point's volume", run: runFilesLs})
	register(&command{name: "files get", summary: "restore files from a restore point's volume to a file, directory, .tar or .zip", run: runFilesGet})
}

// Bounds on what one `files get` walks: a hostile file system with a
// directory linked into itself must end, not fill the disk.
const (
	filesMaxDepth   = 256
	filesMaxEntries = 50_000_000
)

// pointDisks opens every disk of a restore point for file-level restore.
func pointDisks(ctx context.Context, r *repository.Repository, pointID string) (repository.Point, []flr.Disk, func(), error) {
	p, err := r.Point(ctx, pointID)
	if err != nil {
		return p, nil, nil, err
	}
	var disks []flr.Disk
	var readers []*repository.DiskReader
	closeAll := func() {
		for _, dr := range readers {
			dr.Close()
		}
	}
	for i, d := range p.Disks {
		dr, err := r.OpenDisk(ctx, p.ID, i)
		if err != nil {
			closeAll()
			return p, nil, nil, fmt.Errorf("open disk %d of %s: %w", i, short(p.ID), err)
		}
		readers = append(readers, dr)
		name := d.Label
		if name == "" {
			name = fmt.Sprintf("disk%d", i)
		}
		disks = append(disks, flr.Disk{Name: name, R: dr, Size: dr.Size()})
	}
	return p, disks, closeAll, nil
}

type filesFlags struct {
	rf     *repoFlags
	point  *string
	volume *string
}

func addFilesFlags(fs interface {
	String(name, value, usage string) *string
}, rf *repoFlags, needVolume bool) filesFlags {
	f := filesFlags{rf: rf, point: fs.String("restore-point", "", "restore point id or unique prefix (required)")}
	if needVolume {
		f.volume = fs.String("volume", "", "volume id, as `files volumes` lists it (required)")
	}
	return f
}

// openDisks opens the repository and every disk of --restore-point; the
// returned func closes the disks, then the repository.
func (f filesFlags) openDisks(ctx context.Context, env *cliEnv) (repository.Point, []flr.Disk, func(), error) {
	if *f.point == "" {
		return repository.Point{}, nil, nil, fmt.Errorf("%w: --restore-point is required", errUsage)
	}
	r, err := f.rf.open(ctx, env)
	if err != nil {
		return repository.Point{}, nil, nil, err
	}
	p, disks, closeDisks, err := pointDisks(ctx, r, *f.point)
	if err != nil {
		r.Close()
		return repository.Point{}, nil, nil, err
	}
	return p, disks, func() { closeDisks(); r.Close() }, nil
}

// openVolume opens the repository, the point's disks and one volume.
func (f filesFlags) openVolume(ctx context.Context, env *cliEnv) (flr.FS, func(), error) {
	// A missing --restore-point is reported first, by openDisks.
	if *f.point != "" && *f.volume == "" {
		return nil, nil, fmt.Errorf("%w: --volume is required (see `appliance files volumes`)", errUsage)
	}
	_, disks, closeAll, err := f.openDisks(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	fsys, err := flr.Open(ctx, disks, *f.volume)
	if err != nil {
		closeAll()
		if errors.Is(err, flr.ErrNoVolume) {
			return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		return nil, nil, err
	}
	return fsys, func() { fsys.Close(); closeAll() }, nil
}

func runFilesVolumes(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files volumes")
	rf := addRepoFlags(fs)
	ff := addFilesFlags(fs, rf, false)
	asJSON := fs.Bool("json", false, "print a JSON list")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, pos)
	}
	_, disks, closeAll, err := ff.openDisks(ctx, env)
	if err != nil {
		return err
	}
	defer closeAll()
	vols, err := flr.Volumes(ctx, disks)
	if err != nil {
		return err
	}
	if *asJSON {
		if vols == nil {
			vols = []flr.Volume{}
		}
		return writeJSON(env.stdout, vols)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDISK\tPART\tFS\tLABEL\tLV\tSIZE\tNOTE")
	for _, v := range vols {
		p := "-"
		if v.Partition != nil {
			p = fmt.Sprint(*v.Partition)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Disk, p, v.FS, v.Label, v.LV, humanBytes(v.Size), v.Reason)
	}
	return tw.Flush()
}

func runFilesLs(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files ls")
	rf := addRepoFlags(fs)
	ff := addFilesFlags(fs, rf, true)
	asJSON := fs.Bool("json", false, "print a JSON list")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return fmt.Errorf("%w: give at most one PATH", errUsage)
	}
	p := "/"
	if len(pos) == 1 {
		p = pos[0]
	}
	name, err := flr.CleanPath(p)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", errUsage, p, err)
	}
	fsys, done, err := ff.openVolume(ctx, env)
	if err != nil {
		return err
	}
	defer done()
	fi, err := fsys.Stat(name)
	if err != nil {
		return err
	}
	var ents []flr.Entry
	if fi.IsDir() {
		if ents, err = flr.List(fsys, name); err != nil {
			return err
		}
	} else {
		// `ls FILE` describes the file, as ls does.
		li, err := fsys.Lstat(name)
		if err != nil {
			return err
		}
		e := flr.Entry{Name: li.Name(), Type: flr.TypeOf(li.Mode()), Size: li.Size(), Mtime: li.ModTime().UTC(), Mode: li.Mode()}
		if e.Type == "symlink" {
			e.Target, _ = fsys.Readlink(name)
		}
		ents = []flr.Entry{e}
	}
	if *asJSON {
		if ents == nil {
			ents = []flr.Entry{}
		}
		return writeJSON(env.stdout, ents)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 1, ' ', tabwriter.AlignRight)
	for _, e := range ents {
		n := e.Name
		if e.Type == "symlink" {
			n += " -> " + e.Target
		} else if e.Type == "dir" {
			n += "/"
		}
		fmt.Fprintf(tw, "%s\t %d\t %s\t %s\n", e.Mode.String(), e.Size, e.Mtime.Format("2006-01-02 15:04:05"), sanitize(n))
	}
	return tw.Flush()
}

// sanitize keeps control characters in file names off the terminal.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func runFilesGet(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files get")
	rf := addRepoFlags(fs)
	ff := addFilesFlags(fs, rf, true)
	out := fs.String("output", "", "OUT: a file (one regular file), a .tar or .zip, or a new directory (required)")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("%w: give at least one PATH", errUsage)
	}
	if *out == "" {
		return fmt.Errorf("%w: --output is required", errUsage)
	}
	if _, err := os.Lstat(*out); err == nil {
		return fmt.Errorf("%w: %s exists: files get never overwrites", errUsage, *out)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		if names[i], err = flr.CleanPath(p); err != nil {
			return fmt.Errorf("%w: %q: %v", errUsage, p, err)
		}
	}
	fsys, done, err := ff.openVolume(ctx, env)
	if err != nil {
		return err
	}
	defer done()
	// Check every path before writing anything.
	tops := map[string]string{}
	for i, n := range names {
		if _, err := fsys.Lstat(n); err != nil {
			return err
		}
		if n == "." {
			continue
		}
		b := path.Base(n)
		if prev, dup := tops[b]; dup {
			return fmt.Errorf("%w: %s and %s would both be stored as %q", errUsage, prev, paths[i], b)
		}
		tops[b] = paths[i]
	}
	start := time.Now()
	var st getStats
	switch ext := strings.ToLower(filepath.Ext(*out)); {
	case ext == ".tar" || ext == ".zip":
		err = getArchive(ctx, fsys, names, *out, ext, &st)
	case len(names) == 1:
		fi, lerr := fsys.Lstat(names[0])
		if lerr == nil && fi.Mode().IsRegular() {
			err = getOneFile(ctx, fsys, names[0], fi, *out, &st)
			break
		}
		fallthrough
	default:
		err = getDir(ctx, fsys, names, *out, &st)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "restored %d file(s), %d dir(s), %d link(s), %s to %s in %.2fs\n",
		st.files, st.dirs, st.links, humanBytes(st.bytes), *out, time.Since(start).Seconds())
	return nil
}

type getStats struct {
	files, dirs, links, entries int
	bytes                       int64
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
func getOneFile(ctx context.Context, fsys flr.FS, name string, fi fs.FileInfo, out string, st *getStats) error {
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
	st.files++
	st.bytes += f.Size()
	return nil
}

// copySparse copies f into w, writing only data extents (or, when the
// reader does not know them, only non-zero blocks) and sizing w, so holes
// stay holes.
func copySparse(ctx context.Context, w *os.File, f flr.File) error {
	size := f.Size()
	ranges, ok := [][2]int64(nil), false
	if s, is := f.(flr.Sparse); is {
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
func walkGet(ctx context.Context, fsys flr.FS, names []string, st *getStats, fn walkFn) error {
	var walk func(rel, name string, fi fs.FileInfo, depth int) error
	walk = func(rel, name string, fi fs.FileInfo, depth int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if st.entries++; st.entries > filesMaxEntries {
			return fmt.Errorf("more than %d entries: the file system may loop", filesMaxEntries)
		}
		if rel != "" {
			if err := fn(rel, name, fi); err != nil {
				return err
			}
		}
		if !fi.IsDir() {
			return nil
		}
		if depth > filesMaxDepth {
			return fmt.Errorf("%s: deeper than %d directories: the file system may loop", name, filesMaxDepth)
		}
		ents, err := fsys.ReadDir(name)
		if err != nil {
			return err
		}
		for _, e := range ents {
			ci, err := e.Info()
			if err != nil {
				return fmt.Errorf("%s: %w", path.Join(name, e.Name()), err)
			}
			if err := walk(path.Join(rel, e.Name()), path.Join(name, e.Name()), ci, depth+1); err != nil {
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

// getDir restores into a new directory. Every write goes through os.Root,
// which refuses any path that would leave OUT, symbolic links included.
func getDir(ctx context.Context, fsys flr.FS, names []string, out string, st *getStats) (err error) {
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
			st.dirs++
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := fsys.Readlink(name)
			if err != nil {
				return err
			}
			// The link is stored as it is; os.Root never follows it out.
			if err := root.Symlink(t, local); err != nil {
				return err
			}
			st.links++
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
			st.files++
			st.bytes += fi.Size()
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
func getArchive(ctx context.Context, fsys flr.FS, names []string, out, ext string, st *getStats) error {
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

func writeTar(ctx context.Context, fsys flr.FS, names []string, w io.Writer, st *getStats) error {
	tw := tar.NewWriter(w)
	err := walkGet(ctx, fsys, names, st, func(rel, name string, fi fs.FileInfo) error {
		h := &tar.Header{Name: rel, ModTime: fi.ModTime(), Mode: int64(flr.UnixPerm(fi.Mode())), Format: tar.FormatPAX}
		var f flr.File
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, rel+"/"
			st.dirs++
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := fsys.Readlink(name)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, t
			st.links++
		case fi.Mode().IsRegular():
			var err error
			if f, err = fsys.OpenFile(name); err != nil {
				return err
			}
			defer f.Close()
			h.Typeflag, h.Size = tar.TypeReg, f.Size()
			st.files++
			st.bytes += f.Size()
		default:
			return nil
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if f != nil {
			if _, err := io.Copy(tw, ctxReader(ctx, io.NewSectionReader(f, 0, f.Size()))); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func writeZip(ctx context.Context, fsys flr.FS, names []string, w io.Writer, st *getStats) error {
	zw := zip.NewWriter(w)
	err := walkGet(ctx, fsys, names, st, func(rel, name string, fi fs.FileInfo) error {
		h := &zip.FileHeader{Name: rel, Modified: fi.ModTime(), Method: zip.Deflate}
		var body io.Reader
		switch {
		case fi.IsDir():
			h.Name, h.Method = rel+"/", zip.Store
			h.SetMode(fs.ModeDir | fi.Mode().Perm())
			st.dirs++
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := fsys.Readlink(name)
			if err != nil {
				return err
			}
			// Info-ZIP's convention: a symlink's data is its target.
			h.SetMode(fs.ModeSymlink | 0o777)
			h.Method, body = zip.Store, strings.NewReader(t)
			st.links++
		case fi.Mode().IsRegular():
			f, err := fsys.OpenFile(name)
			if err != nil {
				return err
			}
			defer f.Close()
			h.SetMode(fi.Mode().Perm())
			body = ctxReader(ctx, io.NewSectionReader(f, 0, f.Size()))
			st.files++
			st.bytes += f.Size()
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
	return zw.Close()
}

// ctxReader stops a copy when ctx is cancelled.
func ctxReader(ctx context.Context, r io.Reader) io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return r.Read(p)
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func init() {
	register(&command{name: "files mount", summary: "mount a restore point's volumes read-only through FUSE (until interrupted)", run: runFilesMount})
}

func runFilesMount(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files mount")
	rf := addRepoFlags(fs)
	ff := addFilesFlags(fs, rf, false)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: give exactly one MOUNTPOINT", errUsage)
	}
	p, disks, closeAll, err := ff.openDisks(ctx, env)
	if err != nil {
		return err
	}
	defer closeAll()
	vols, err := flr.Volumes(ctx, disks)
	if err != nil {
		return err
	}
	open := map[string]flr.FS{}
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	for _, v := range vols {
		if !v.Browsable {
			fmt.Fprintf(env.stderr, "%s (%s): not mounted: %s\n", v.ID, v.FS, v.Reason)
			continue
		}
		f, err := flr.Open(ctx, disks, v.ID)
		if err != nil {
			fmt.Fprintf(env.stderr, "%s (%s): not mounted: %v\n", v.ID, v.FS, err)
			continue
		}
		open[v.ID] = f
	}
	srv, err := mount.Mount(pos[0], open)
	if err != nil {
		return fmt.Errorf("mount %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.stdout, "mounted %d volume(s) of %s read-only at %s; interrupt to unmount\n", len(open), short(p.ID), pos[0])
	<-ctx.Done()
	if err := srv.Unmount(); err != nil {
		return fmt.Errorf("unmount %s: %w", pos[0], err)
	}
	srv.Wait()
	return nil
}
