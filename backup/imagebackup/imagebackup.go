// Package imagebackup backs up disk image files (raw or VMDK, as disk/imagefile
// opens them) into a repository as one restore point, and restores a disk
// of a restore point to a sparse file. It is the engine behind `appliance
// image backup` and `image restore`, usable by any caller that holds an open
// repository.
//
// What it owns: the choice per image between reusing the last restore
// point's disk map (the file is unchanged: same path, inode, size, mtime and
// ctime, recorded in the point's source.N tags), an incremental read of the
// changed ranges against a parent, and a read of the allocated extents; the
// parsing of a changed-range list as CBT reports it; and the restore to a
// temporary file renamed into place only once every byte verified. What it
// does not: flags and output (cmd/appliance), chunking and storing
// (backup, repository), image formats (disk/imagefile).
package imagebackup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/disk/imagefile"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/extent"
	"github.com/vmvault/vmvault/repository"
)

// Sentinel errors callers branch on.
var (
	// ErrPartialParent: the parent restore point is partial.
	ErrPartialParent = errors.New("partial restore point cannot be a parent")
	// ErrNoDisk: the restore point has no disk of that index.
	ErrNoDisk = errors.New("no such disk")
	// ErrOutputExists: the restore's output file exists and Force is off.
	ErrOutputExists = errors.New("output exists")
	// ErrBadRequest: the request contradicts itself (no VM, no image,
	// changed ranges without a parent or for several images).
	ErrBadRequest = errors.New("bad image backup request")
)

// Result is one backup's statistics; it is the documented `image backup
// --json` output.
type Result struct {
	RestorePoint     string       `json:"restorePoint"`
	VM               string       `json:"vm"`
	Parent           string       `json:"parent,omitempty"`
	LogicalBytes     int64        `json:"logicalBytes"`
	BytesRead        int64        `json:"bytesRead"`
	ParentBytesRead  int64        `json:"parentBytesRead"`
	NewBytes         int64        `json:"newBytes"`
	StoredBytesAdded int64        `json:"storedBytesAdded"`
	Seconds          float64      `json:"seconds"`
	Disks            []DiskResult `json:"disks"`
	// Warnings are also in the restore point (and were passed to
	// Request.Warn as they arose).
	Warnings []string `json:"-"`
}

// DiskResult is one image's statistics.
type DiskResult struct {
	Image           string  `json:"image"`
	Format          string  `json:"format"`
	Mode            string  `json:"mode"` // unchanged | allocated | incremental
	LogicalBytes    int64   `json:"logicalBytes"`
	BytesRead       int64   `json:"bytesRead"`
	ParentBytesRead int64   `json:"parentBytesRead"`
	NewBytes        int64   `json:"newBytes"`
	StoredBytes     int64   `json:"storedBytesAdded"`
	ZeroBytes       int64   `json:"zeroBytes"`
	ReusedBytes     int64   `json:"reusedBytes"`
	Chunks          int     `json:"chunks"`
	Seconds         float64 `json:"seconds"`
}

// Images is a set of open disk images, in the order they become the restore
// point's disks.
type Images struct {
	paths []string
	ims   []imagefile.Image
}

// Open opens every image, so that a bad one is refused before the
// repository is touched. Close the result.
func Open(paths []string) (*Images, error) {
	s := &Images{}
	for _, p := range paths {
		im, err := imagefile.Open(p)
		if err != nil {
			s.Close()
			return nil, err // it says "open image" and names the file
		}
		s.paths = append(s.paths, p)
		s.ims = append(s.ims, im)
	}
	return s, nil
}

// Len is the number of images.
func (s *Images) Len() int { return len(s.ims) }

// Size is image i's virtual size in bytes.
func (s *Images) Size(i int) int64 { return s.ims[i].Size() }

// Close closes every image.
func (s *Images) Close() {
	for _, im := range s.ims {
		im.Close()
	}
	s.ims = nil
}

// Request describes one image backup.
type Request struct {
	VM string
	// Parent, with Changed, makes the backup incremental: only the changed
	// ranges are read, the rest comes from the parent's disk. ResolveParent
	// finds it.
	Parent *repository.Point
	// Changed lists the ranges changed since Parent (one image only);
	// HaveChanged says that the list was given, even if empty.
	Changed     []dedup.Extent
	HaveChanged bool
	// ForceRead reads every image even when it is unchanged since the VM's
	// last restore point.
	ForceRead bool
	// Workers bounds the hashing/compression workers; 0 is one per CPU.
	Workers int
	// Progress reports image i's progress every ProgressEvery (nil: none).
	Progress      func(i int, p backup.Progress)
	ProgressEvery time.Duration
	// Warn receives each warning as it arises (nil: only in the Result).
	Warn func(string)
	// Clock stamps the restore point; nil is the wall clock.
	Clock clock.Clock
}

// ResolveParent returns the restore point id (or unique prefix) names, which
// must be complete to serve as a parent.
func ResolveParent(ctx context.Context, r *repository.Repository, id string) (*repository.Point, error) {
	p, err := r.Point(ctx, id)
	if err != nil {
		return nil, err // it says "restore point ID"
	}
	if p.Partial {
		return nil, fmt.Errorf("parent restore point %s is partial and cannot be a parent: %w", p.ID, ErrPartialParent)
	}
	return &p, nil
}

// Backup backs up the images as one restore point of req.VM and commits it.
// On any failure (cancellation included) nothing is committed.
func Backup(ctx context.Context, r *repository.Repository, ims *Images, req Request) (Result, error) {
	switch {
	case req.VM == "":
		return Result{}, fmt.Errorf("%w: a VM name is required", ErrBadRequest)
	case ims.Len() == 0:
		return Result{}, fmt.Errorf("%w: no image", ErrBadRequest)
	case req.HaveChanged && req.Parent == nil:
		return Result{}, fmt.Errorf("%w: changed ranges need a parent", ErrBadRequest)
	case req.HaveChanged && ims.Len() != 1:
		return Result{}, fmt.Errorf("%w: changed ranges describe one disk, not %d", ErrBadRequest, ims.Len())
	}
	clk := req.Clock
	if clk == nil {
		clk = clock.Real()
	}
	chunker, err := backup.RepoStore(r).Chunker()
	if err != nil {
		return Result{}, err
	}
	var last *repository.Point
	if !req.ForceRead && !req.HaveChanged {
		if last, err = lastGoodPoint(ctx, r, req.VM); err != nil {
			return Result{}, err
		}
	}
	start := clk.Now()
	sess, err := r.NewSession(ctx)
	if err != nil {
		return Result{}, err
	}
	defer sess.Abort()
	out := Result{VM: req.VM, Disks: []DiskResult{}}
	np := repository.NewPoint{VM: repository.VMIdentity{Name: req.VM}, Time: start.UTC(), Tags: map[string]string{}}
	if req.Parent != nil {
		np.Parent = req.Parent.ID
		out.Parent = req.Parent.ID
	}
	for i, im := range ims.ims {
		path := ims.paths[i]
		ident := sourceIdentity(path, im)
		if ident != "" {
			np.Tags[sourceTag(i)] = ident
		}
		var d repository.NewDisk
		var stats DiskResult
		var warn string
		if prev, ok := unchangedDisk(last, i, ident); ok {
			// Same file, same size, same mtime and ctime as when it was last
			// backed up: its disk map is reused without reading a byte, as
			// restic does for unchanged files (ForceRead re-reads).
			d = prev
			stats = DiskResult{Format: im.Format(), Mode: "unchanged", LogicalBytes: im.Size()}
			if np.Parent == "" {
				np.Parent = last.ID
				out.Parent = last.ID
			}
		} else {
			var progress func(backup.Progress)
			if req.Progress != nil {
				progress = func(p backup.Progress) { req.Progress(i, p) }
			}
			if d, stats, warn, err = backupImage(ctx, r, sess, chunker, im, i, req, progress); err != nil {
				return Result{}, fmt.Errorf("back up image %s: %w", path, err)
			}
		}
		if warn != "" {
			np.Warnings = append(np.Warnings, warn)
			out.Warnings = append(out.Warnings, warn)
			if req.Warn != nil {
				req.Warn(warn)
			}
		}
		d.Label = filepath.Base(path)
		np.Disks = append(np.Disks, d)
		stats.Image = path
		out.Disks = append(out.Disks, stats)
		out.LogicalBytes += stats.LogicalBytes
		out.BytesRead += stats.BytesRead
		out.ParentBytesRead += stats.ParentBytesRead
		out.NewBytes += stats.NewBytes
		out.StoredBytesAdded += stats.StoredBytes
	}
	p, err := sess.Commit(ctx, np)
	if err != nil {
		return Result{}, fmt.Errorf("commit restore point: %w", err)
	}
	out.RestorePoint = p.ID
	out.Seconds = clk.Since(start).Seconds()
	return out, nil
}

// backupImage streams one image into the session. With a parent and a
// changed list it reads only the changed ranges; when the parent cannot
// serve (no such disk, other size) it falls back to a full read and says why.
func backupImage(ctx context.Context, r *repository.Repository, sess *repository.Session, chunker dedup.Chunker,
	im imagefile.Image, idx int, req Request, progress func(backup.Progress),
) (repository.NewDisk, DiskResult, string, error) {
	in := backup.DiskInput{Source: im, Size: im.Size()}
	stats := DiskResult{Format: im.Format(), LogicalBytes: im.Size(), Mode: "allocated"}
	var warn string
	if parent := req.Parent; parent != nil && req.HaveChanged {
		switch {
		case idx >= len(parent.Disks):
			warn = fmt.Sprintf("disk %d is not in parent %s: full read", idx, short(parent.ID))
		case parent.Disks[idx].Capacity != im.Size():
			warn = fmt.Sprintf("disk %d changed size since parent %s (%d -> %d bytes): full read", idx, short(parent.ID), parent.Disks[idx].Capacity, im.Size())
		default:
			_, exts, err := r.DiskExtents(ctx, parent.ID, idx)
			if err != nil {
				return repository.NewDisk{}, stats, "", fmt.Errorf("parent disk map: %w", err)
			}
			pr, err := r.OpenDisk(ctx, parent.ID, idx)
			if err != nil {
				return repository.NewDisk{}, stats, "", fmt.Errorf("open parent disk: %w", err)
			}
			defer pr.Close()
			in.Parent = &backup.ParentDisk{Reader: pr, Extents: exts, Changed: req.Changed}
			stats.Mode = "incremental"
		}
	}
	if in.Parent == nil {
		alloc, err := im.Allocated()
		if err != nil {
			return repository.NewDisk{}, stats, "", fmt.Errorf("allocated extents: %w", err)
		}
		in.Allocated = make([]dedup.Extent, len(alloc))
		for i, a := range alloc {
			in.Allocated[i] = dedup.Extent{Offset: a.Offset, Length: a.Length}
		}
	}
	res, err := backup.WriteDisk(ctx, sess, chunker, in, backup.Options{Workers: req.Workers, Progress: progress, ProgressEvery: req.ProgressEvery})
	if err != nil {
		return repository.NewDisk{}, stats, "", err
	}
	root, err := sess.PutDisk(ctx, im.Size(), res.Extents)
	if err != nil {
		return repository.NewDisk{}, stats, "", fmt.Errorf("store disk map: %w", err)
	}
	stats.BytesRead = res.BytesRead
	stats.ParentBytesRead = res.ParentBytesRead
	stats.NewBytes = res.NewBytes
	stats.StoredBytes = res.StoredBytes
	stats.ZeroBytes = res.ZeroBytes
	stats.ReusedBytes = res.ReusedBytes
	stats.Chunks = res.Chunks
	stats.Seconds = res.Duration.Seconds()
	d := repository.NewDisk{Key: int32(idx), Capacity: im.Size(), Map: root, ChangeID: "", Stats: repository.DiskStats{
		LogicalBytes: im.Size(), BytesRead: res.BytesRead, NewBytes: res.NewBytes, StoredBytes: res.StoredBytes, Mode: stats.Mode}}
	return d, stats, warn, nil
}

// changedExtent is one entry of a changed-range list, as CBT reports changes.
type changedExtent struct {
	Offset *int64 `json:"offset"`
	Length *int64 `json:"length"`
}

// ParseChanged parses a JSON list of {"offset":N,"length":N} (the ranges a
// guest wrote since the parent, as CBT reports them) and checks it against
// the disk size. The result is sorted and merged; empty ranges are dropped.
func ParseChanged(b []byte, size int64) ([]dedup.Extent, error) {
	var raw []changedExtent
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("want a JSON list of {\"offset\":N,\"length\":N}: %w", err)
	}
	exts := make([]dedup.Extent, 0, len(raw))
	for i, r := range raw {
		if r.Offset == nil || r.Length == nil {
			return nil, fmt.Errorf("entry %d needs both offset and length", i)
		}
		o, l := *r.Offset, *r.Length
		if o < 0 || l < 0 || o > size || l > size-o {
			return nil, fmt.Errorf("entry %d (offset %d, length %d) lies outside the %d-byte disk", i, o, l, size)
		}
		if l > 0 {
			exts = append(exts, dedup.Extent{Offset: o, Length: l})
		}
	}
	// CBT results may come in any order.
	return extent.Normalize(exts, extent.NoLimit), nil
}

// sourceTag names the restore point tag that records where disk i came from.
func sourceTag(i int) string { return fmt.Sprintf("source.%d", i) }

// sourceIdentity describes an image file well enough to tell that it has not
// changed: path, device, inode, size, mtime and ctime (any write moves
// ctime). Formats whose data lives in other files (a descriptor with flat
// extents) get no identity: their descriptor can stay the same while the
// extents change.
func sourceIdentity(path string, im imagefile.Image) string {
	switch im.Format() {
	case "raw", "monolithicSparse", "streamOptimized":
	default:
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	st, err := os.Stat(abs)
	if err != nil {
		return ""
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s|%d|%d|%d|%d.%d|%d.%d", abs, sys.Dev, sys.Ino, st.Size(),
		sys.Mtim.Sec, sys.Mtim.Nsec, sys.Ctim.Sec, sys.Ctim.Nsec)
}

// lastGoodPoint returns the newest complete restore point of the VM, or nil.
func lastGoodPoint(ctx context.Context, r *repository.Repository, vm string) (*repository.Point, error) {
	points, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := len(points) - 1; i >= 0; i-- {
		if p := points[i]; p.VM.Name == vm && !p.Partial {
			return &p, nil
		}
	}
	return nil, nil
}

// unchangedDisk returns disk i of last when it was read from the same,
// unmodified file.
func unchangedDisk(last *repository.Point, i int, ident string) (repository.NewDisk, bool) {
	if last == nil || ident == "" || i >= len(last.Disks) || last.Tags[sourceTag(i)] != ident {
		return repository.NewDisk{}, false
	}
	d := last.Disks[i]
	d.Stats.BytesRead, d.Stats.NewBytes, d.Stats.StoredBytes, d.Stats.Mode = 0, 0, 0, "unchanged"
	return d, true
}

// short abbreviates a restore point id in messages, as the CLI prints it.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
