package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/internal/clock"
)

// Defaults of Options.
const (
	DefaultMaxErrors = 100
	// DefaultMaxDepth is deeper than real guest trees (Windows' MAX_PATH
	// of 260 characters stops near 130 levels; Linux tools give up past
	// PATH_MAX) and shallow enough to bound what a hostile chain of
	// directories costs: guestfs resolves every path from the root, so a
	// walk down one chain costs the cube of its depth (measured: 0.14 s
	// at 50 levels, 1.2 s at 100; by the cube some 20 s at 256 and half
	// an hour at 1024). It matches the file catalog's (service/filerestore).
	DefaultMaxDepth = 256
)

// Volume statuses.
const (
	StatusPassed  = "passed"
	StatusFailed  = "failed"
	StatusSkipped = "skipped" // not browsable: nothing to walk
)

// Sentinel errors: the problems a walk finds beyond the readers' own
// errors (their text is in PathError.Error), and ErrFailed for callers
// that turn a failed report into an error.
var (
	// ErrTooDeep: a directory lies deeper than Options.MaxDepth.
	ErrTooDeep = errors.New("directory nesting deeper than the limit")
	// ErrLoop: a directory was reached a second time (a directory hard
	// link or a loop in a damaged or hostile image).
	ErrLoop = errors.New("the same directory reached twice (a directory hard link or a loop)")
	// ErrTypeMismatch: a directory entry's type contradicts its inode.
	ErrTypeMismatch = errors.New("the directory entry's type contradicts its inode")
	// ErrUnsafeName: a name no path can name (guestfs.UnsafeName).
	ErrUnsafeName = errors.New("a name no path can name")
	// ErrOversized: a file claims more bytes than its volume holds.
	ErrOversized = errors.New("a file claims more bytes than its volume holds")
	// ErrFailed: the verification found damage (VerifyPoint's callers
	// branch on it; Walk reports it in Report.Passed).
	ErrFailed = errors.New("verification failed")
)

// Options tune a walk.
type Options struct {
	// ReadData reads every regular file's bytes to the end (only the
	// extents that hold data, when the reader knows them): slower, but
	// it catches damaged file data and damaged repository blobs too.
	ReadData bool
	// MaxErrors bounds the errors kept per volume (all are counted);
	// default DefaultMaxErrors.
	MaxErrors int
	// MaxDepth bounds directory nesting; deeper directories are an
	// ErrTooDeep error and are not entered. Default DefaultMaxDepth.
	MaxDepth int
	// Progress, if set, is called every few hundred entries, every few
	// dozen MiB of file data and as each volume ends.
	Progress func(Progress)
	// Clock times the volumes; default the real clock.
	Clock clock.Clock
}

// Progress is how far a walk is.
type Progress struct {
	Volume      string `json:"volume"`      // the volume being walked ("" between volumes)
	VolumesDone int    `json:"volumesDone"` // volumes finished (walked or skipped)
	Volumes     int    `json:"volumes"`
	Entries     int64  `json:"entries"`   // entries walked so far, all volumes
	BytesRead   int64  `json:"bytesRead"` // file data read so far (ReadData)
}

// PathError is one problem found at one path of a volume.
type PathError struct {
	Path  string `json:"path"`  // absolute inside the volume: "/etc/hostname"
	Op    string `json:"op"`    // open, readdir, lstat, readlink, read, walk
	Error string `json:"error"` // what went wrong
}

// VolumeResult is the verification of one volume.
type VolumeResult struct {
	ID         string      `json:"id"`
	Disk       string      `json:"disk"`
	FS         string      `json:"fs"`
	Label      string      `json:"label"`
	Size       int64       `json:"size"`
	Status     string      `json:"status"`           // passed | failed | skipped
	Reason     string      `json:"reason,omitempty"` // why skipped (not browsable) or failed
	Dirs       int64       `json:"dirs"`             // directories, the root included
	Files      int64       `json:"files"`            // regular files
	Symlinks   int64       `json:"symlinks"`
	Other      int64       `json:"other"`     // devices, fifos, sockets
	Bytes      int64       `json:"bytes"`     // sum of the regular files' sizes
	BytesRead  int64       `json:"bytesRead"` // file data read (ReadData; holes are not read)
	ErrorCount int64       `json:"errorCount"`
	Errors     []PathError `json:"errors"` // the first MaxErrors
	Seconds    float64     `json:"seconds"`
}

// Entries is how many entries the walk read, the root included.
func (v VolumeResult) Entries() int64 { return v.Dirs + v.Files + v.Symlinks + v.Other }

// Report is the verification of a restore point's volumes.
type Report struct {
	Repository   string         `json:"repository,omitempty"`
	RestorePoint string         `json:"restorePoint,omitempty"`
	VM           string         `json:"vm,omitempty"`
	ReadData     bool           `json:"readData"`
	Passed       bool           `json:"passed"`
	Verdict      string         `json:"verdict"` // passed | failed
	Reason       string         `json:"reason"`
	Volumes      []VolumeResult `json:"volumes"`
	Seconds      float64        `json:"seconds"`
}

// Walk verifies every volume on disks (see the package doc for the
// verdict). Its error is for what stops the walk itself: ctx ending (the
// report then holds the volumes done so far) or disks that cannot be read
// at all; damage inside a volume is in the report, never an error.
func Walk(ctx context.Context, disks []guestfs.Disk, opts Options) (Report, error) {
	o := opts.withDefaults()
	start := o.Clock.Now()
	rep := Report{ReadData: o.ReadData, Volumes: []VolumeResult{}}
	finish := func() { rep.Seconds = o.Clock.Since(start).Seconds() }
	vols, err := guestfs.Volumes(ctx, disks)
	if err != nil {
		finish()
		if cerr := ctx.Err(); cerr != nil {
			return rep, cerr
		}
		return rep, fmt.Errorf("find the volumes: %w", err)
	}
	w := &walker{ctx: ctx, disks: disks, o: o, prog: Progress{Volumes: len(vols)}}
	for _, v := range vols {
		res := w.volume(v)
		rep.Volumes = append(rep.Volumes, res)
		if err := ctx.Err(); err != nil {
			finish()
			rep.Verdict, rep.Reason = StatusFailed, "cancelled: "+err.Error()
			return rep, err
		}
		w.prog.VolumesDone++
		w.prog.Volume = ""
		w.report()
	}
	rep.Passed, rep.Reason = verdict(rep.Volumes)
	rep.Verdict = StatusFailed
	if rep.Passed {
		rep.Verdict = StatusPassed
	}
	finish()
	return rep, nil
}

func (o Options) withDefaults() Options {
	if o.MaxErrors <= 0 {
		o.MaxErrors = DefaultMaxErrors
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	return o
}

// partitionTableDamage are the reasons guestfs gives a disk whose
// partition table it found but could not read (guestfs/volumes.go).
var partitionTableDamage = []string{"unreadable partition table", "partition table partly unreadable"}

// verdict says whether the volumes pass, and why in one line.
func verdict(vols []VolumeResult) (bool, string) {
	var failed []string
	walked, skipped := 0, 0
	var dirs, files, links int64
	for _, v := range vols {
		switch v.Status {
		case StatusFailed:
			if len(failed) < 3 {
				failed = append(failed, fmt.Sprintf("%s (%s): %s", v.ID, v.FS, v.Reason))
			} else if len(failed) == 3 {
				failed = append(failed, "…")
			}
		case StatusSkipped:
			skipped++
		default:
			walked++
			dirs, files, links = dirs+v.Dirs, files+v.Files, links+v.Symlinks
		}
	}
	if n := countStatus(vols, StatusFailed); n > 0 {
		return false, fmt.Sprintf("%d of %d volume(s) failed: %s", n, len(vols), strings.Join(failed, "; "))
	}
	note := ""
	if skipped > 0 {
		note = fmt.Sprintf("; %d not browsable, skipped", skipped)
	}
	if walked == 0 {
		return true, "no browsable volume: nothing was walked" + note
	}
	return true, fmt.Sprintf("%d volume(s) walked without errors (%d dirs, %d files, %d links)%s", walked, dirs, files, links, note)
}

func countStatus(vols []VolumeResult, s string) int {
	n := 0
	for _, v := range vols {
		if v.Status == s {
			n++
		}
	}
	return n
}

// walker carries one Walk's state across volumes.
type walker struct {
	ctx   context.Context
	disks []guestfs.Disk
	o     Options
	prog  Progress
	buf   []byte // ReadData's buffer, allocated on first use

	lastEntries, lastBytes int64
}

const (
	progressEntries = 256
	progressBytes   = 32 << 20
	readBuffer      = 1 << 20
)

func (w *walker) report() {
	w.lastEntries, w.lastBytes = w.prog.Entries, w.prog.BytesRead
	if w.o.Progress != nil {
		w.o.Progress(w.prog)
	}
}

func (w *walker) tick() {
	if w.prog.Entries-w.lastEntries >= progressEntries || w.prog.BytesRead-w.lastBytes >= progressBytes {
		w.report()
	}
}

// volumeRun is one volume's walk in progress.
type volumeRun struct {
	w   *walker
	res *VolumeResult
}

// fail records err at p (a clean io/fs path).
func (r volumeRun) fail(p, op string, err error) {
	r.res.ErrorCount++
	if len(r.res.Errors) < r.w.o.MaxErrors {
		r.res.Errors = append(r.res.Errors, PathError{Path: guestfs.SlashPath(p), Op: op, Error: message(err)})
	}
}

// message is err without the outer fs.PathError's "op path: ", which
// PathError already says.
func message(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err != nil {
		return pe.Err.Error()
	}
	return err.Error()
}

func (w *walker) volume(v guestfs.Volume) VolumeResult {
	start := w.o.Clock.Now()
	res := VolumeResult{ID: v.ID, Disk: v.Disk, FS: v.FS, Label: v.Label, Size: v.Size, Errors: []PathError{}}
	defer func() { res.Seconds = w.o.Clock.Since(start).Seconds() }()
	if !v.Browsable {
		res.Status, res.Reason = StatusSkipped, v.Reason
		for _, p := range partitionTableDamage {
			if strings.HasPrefix(v.Reason, p) {
				res.Status = StatusFailed
				res.ErrorCount = 1
				res.Errors = append(res.Errors, PathError{Path: "/", Op: "open", Error: v.Reason})
			}
		}
		return res
	}
	w.prog.Volume = v.ID
	r := volumeRun{w: w, res: &res}
	fsys, err := guestfs.Open(w.ctx, w.disks, v.ID)
	if err != nil {
		if w.ctx.Err() == nil {
			r.fail(".", "open", err)
		}
	} else {
		r.walk(fsys, v.Size)
		fsys.Close()
	}
	switch {
	case w.ctx.Err() != nil:
		res.Status, res.Reason = StatusFailed, "cancelled"
	case res.ErrorCount > 0:
		e := res.Errors[0]
		res.Status = StatusFailed
		res.Reason = fmt.Sprintf("%d error(s), first at %s: %s: %s", res.ErrorCount, e.Path, e.Op, e.Error)
	default:
		res.Status = StatusPassed
	}
	return res
}

// pending is a directory still to be read.
type pending struct {
	dir   string
	depth int
}

// walk reads the whole tree of fsys depth first, from an explicit stack:
// memory is the stack of directories not read yet, never a recursion.
func (r volumeRun) walk(fsys guestfs.FS, volSize int64) {
	w, res := r.w, r.res
	root, err := fsys.Lstat(".")
	if err != nil {
		r.fail(".", "lstat", err)
		return
	}
	if !root.IsDir() {
		r.fail(".", "lstat", fmt.Errorf("the root is not a directory (%v)", root.Mode().Type()))
		return
	}
	res.Dirs++
	w.prog.Entries++
	seen := map[uint64]struct{}{}
	if id, ok := guestfs.FileID(root); ok {
		seen[id] = struct{}{}
	}
	stack := []pending{{".", 0}}
	var subdirs []string
	for len(stack) > 0 {
		if w.ctx.Err() != nil {
			return
		}
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ents, skipped, err := guestfs.ReadDirSkipped(fsys, d.dir)
		if err != nil {
			if w.ctx.Err() != nil {
				return
			}
			r.fail(d.dir, "readdir", err)
			continue
		}
		for _, sk := range skipped {
			r.fail(d.dir, "readdir", fmt.Errorf("%w: %s: %s", ErrUnsafeName, strconv.Quote(sk.Name), sk.Reason))
		}
		subdirs = subdirs[:0]
		for _, e := range ents {
			if w.ctx.Err() != nil {
				return
			}
			p := path.Join(d.dir, e.Name())
			if r.entry(fsys, e, p, volSize, seen) {
				if d.depth+1 > w.o.MaxDepth {
					r.fail(p, "walk", fmt.Errorf("%w (%d): not entered", ErrTooDeep, w.o.MaxDepth))
					continue
				}
				subdirs = append(subdirs, p)
			}
			w.prog.Entries++
			w.tick()
		}
		// Pushed in reverse so that the walk goes in name order.
		for i := len(subdirs) - 1; i >= 0; i-- {
			stack = append(stack, pending{subdirs[i], d.depth + 1})
		}
	}
}

// entry checks one directory entry and says whether it is a directory to
// enter.
func (r volumeRun) entry(fsys guestfs.FS, e fs.DirEntry, p string, volSize int64, seen map[uint64]struct{}) bool {
	w, res := r.w, r.res
	// Info reads the entry's inode (MFT record, directory entry) without
	// walking the path again: what Lstat(p) returns, at the cost of one
	// read, which matters in a 100,000-entry directory.
	fi, err := e.Info()
	if err != nil {
		if w.ctx.Err() == nil {
			r.fail(p, "lstat", err)
		}
		return false
	}
	if t := e.Type(); t != fi.Mode().Type() {
		r.fail(p, "lstat", fmt.Errorf("%w: the directory says %s, the inode %s", ErrTypeMismatch, typeName(t), typeName(fi.Mode().Type())))
		return false
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		res.Dirs++
		if id, ok := guestfs.FileID(fi); ok {
			if _, dup := seen[id]; dup {
				r.fail(p, "walk", fmt.Errorf("%w: not entered again", ErrLoop))
				return false
			}
			seen[id] = struct{}{}
		}
		return true
	case m&fs.ModeSymlink != 0:
		res.Symlinks++
		if _, err := fsys.Readlink(p); err != nil && w.ctx.Err() == nil {
			r.fail(p, "readlink", err)
		}
	case m.IsRegular():
		res.Files++
		res.Bytes += fi.Size()
		if w.o.ReadData {
			r.readFile(fsys, p, volSize)
		}
	default:
		res.Other++
	}
	return false
}

func typeName(t fs.FileMode) string {
	if t == 0 {
		return "regular file"
	}
	if t.IsDir() {
		return "directory"
	}
	if t&fs.ModeSymlink != 0 {
		return "symbolic link"
	}
	return "special file (" + t.String() + ")"
}

// readFile reads a regular file's data to the end: only its data extents
// when the reader knows them (holes cost nothing), else every byte, which
// a file claiming more than its volume holds cannot honestly have.
func (r volumeRun) readFile(fsys guestfs.FS, p string, volSize int64) {
	w, res := r.w, r.res
	f, err := fsys.OpenFile(p)
	if err != nil {
		if w.ctx.Err() == nil {
			r.fail(p, "open", err)
		}
		return
	}
	defer f.Close()
	size := f.Size()
	ranges := [][2]int64{{0, size}}
	if s, ok := f.(guestfs.Sparse); ok {
		if ext, ok := s.DataExtents(); ok {
			ranges = ext
		}
	}
	var total int64
	for _, rg := range ranges {
		total += max(0, min(rg[0]+rg[1], size)-max(rg[0], 0))
	}
	if volSize > 0 && total > volSize {
		r.fail(p, "read", fmt.Errorf("%w: %d bytes of data on a volume of %d", ErrOversized, total, volSize))
		return
	}
	if w.buf == nil {
		w.buf = make([]byte, readBuffer)
	}
	for _, rg := range ranges {
		off, end := max(rg[0], 0), min(rg[0]+rg[1], size)
		for off < end {
			if w.ctx.Err() != nil {
				return
			}
			n, err := f.ReadAt(w.buf[:min(int64(len(w.buf)), end-off)], off)
			off += int64(n)
			res.BytesRead += int64(n)
			w.prog.BytesRead += int64(n)
			if err == io.EOF && off < end {
				err = fmt.Errorf("the data ends at byte %d of %d: %w", off, size, io.ErrUnexpectedEOF)
			}
			if err != nil && err != io.EOF {
				if w.ctx.Err() == nil {
					r.fail(p, "read", err)
				}
				return
			}
			if n == 0 {
				r.fail(p, "read", fmt.Errorf("no progress reading at byte %d of %d", off, size))
				return
			}
			w.tick()
		}
	}
}
