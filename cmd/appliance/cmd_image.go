package main

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
	"github.com/vmvault/vmvault/diskimage"
	progresspkg "github.com/vmvault/vmvault/internal/progress"
	"github.com/vmvault/vmvault/repository"
)

func init() {
	register(&command{name: "image backup", summary: "back up disk image files (raw or VMDK) as one restore point", run: runImageBackup})
	register(&command{name: "image restore", summary: "write a restored disk to a file (sparse)", run: runImageRestore})
}

// imageBackupJSON is the documented `image backup --json` output.
type imageBackupJSON struct {
	RestorePoint     string          `json:"restorePoint"`
	VM               string          `json:"vm"`
	Parent           string          `json:"parent,omitempty"`
	LogicalBytes     int64           `json:"logicalBytes"`
	BytesRead        int64           `json:"bytesRead"`
	ParentBytesRead  int64           `json:"parentBytesRead"`
	NewBytes         int64           `json:"newBytes"`
	StoredBytesAdded int64           `json:"storedBytesAdded"`
	Seconds          float64         `json:"seconds"`
	Disks            []imageDiskJSON `json:"disks"`
}

type imageDiskJSON struct {
	Image           string  `json:"image"`
	Format          string  `json:"format"`
	Mode            string  `json:"mode"` // full | allocated | incremental
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

// changedExtent is one entry of the --changed file, as CBT reports changes.
type changedExtent struct {
	Offset *int64 `json:"offset"`
	Length *int64 `json:"length"`
}

// readChanged parses and validates a --changed file against the disk size.
func readChanged(path string, size int64) ([]dedup.Extent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --changed file: %w", err)
	}
	var raw []changedExtent
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("--changed %s: want a JSON list of {\"offset\":N,\"length\":N}: %w", path, err)
	}
	exts := make([]dedup.Extent, 0, len(raw))
	for i, r := range raw {
		if r.Offset == nil || r.Length == nil {
			return nil, fmt.Errorf("--changed %s: entry %d needs both offset and length", path, i)
		}
		o, l := *r.Offset, *r.Length
		if o < 0 || l < 0 || o > size || l > size-o {
			return nil, fmt.Errorf("--changed %s: entry %d (offset %d, length %d) lies outside the %d-byte disk", path, i, o, l, size)
		}
		if l > 0 {
			exts = append(exts, dedup.Extent{Offset: o, Length: l})
		}
	}
	return normalizeExtents(exts), nil
}

// normalizeExtents sorts and merges overlapping or adjacent extents, as CBT
// results may come in any order.
func normalizeExtents(exts []dedup.Extent) []dedup.Extent {
	if len(exts) == 0 {
		return exts
	}
	sortExtents(exts)
	out := exts[:1]
	for _, e := range exts[1:] {
		last := &out[len(out)-1]
		if e.Offset <= last.Offset+last.Length {
			if end := e.Offset + e.Length; end > last.Offset+last.Length {
				last.Length = end - last.Offset
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

func runImageBackup(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "image backup")
	rf := addRepoFlags(fs)
	vm := fs.String("vm", "", "name of the VM the images belong to (required)")
	parentID := fs.String("parent", "", "parent restore point (with --changed: incremental)")
	changedPath := fs.String("changed", "", "JSON list of changed byte ranges since --parent, as CBT reports them")
	asJSON := fs.Bool("json", false, "print one JSON object with the statistics")
	workers := fs.Int("workers", 0, "parallel hashing/compression workers (default: number of CPUs)")
	forceRead := fs.Bool("force-read", false, "read every image even when it is unchanged since the last restore point of this VM")
	images, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *vm == "" {
		return fmt.Errorf("%w: --vm is required", errUsage)
	}
	if len(images) == 0 {
		return fmt.Errorf("%w: give at least one IMAGE", errUsage)
	}
	if (*changedPath != "") && *parentID == "" {
		return fmt.Errorf("%w: --changed needs --parent", errUsage)
	}
	if *changedPath != "" && len(images) != 1 {
		return fmt.Errorf("%w: --changed describes one disk: give exactly one IMAGE", errUsage)
	}
	// Open every image before touching the repository: bad input changes nothing.
	var opened []diskimage.Image
	defer func() {
		for _, im := range opened {
			im.Close()
		}
	}()
	for _, path := range images {
		im, err := diskimage.Open(path)
		if err != nil {
			return err // it says "open image" and names the file
		}
		opened = append(opened, im)
	}
	var changed []dedup.Extent
	if *changedPath != "" {
		if changed, err = readChanged(*changedPath, opened[0].Size()); err != nil {
			return err
		}
	}

	r, err := rf.open(ctx, env)
	if err != nil {
		return err
	}
	defer r.Close()
	chunker, err := dedup.New(chunkerParams(r.Config().Chunker))
	if err != nil {
		return fmt.Errorf("repository chunker: %w", err)
	}
	var parent *repository.Point
	if *parentID != "" {
		p, err := r.Point(ctx, *parentID)
		if err != nil {
			return fmt.Errorf("--parent: %w", err) // err says "restore point ID"
		}
		if p.Partial {
			return fmt.Errorf("parent restore point %s is partial and cannot be a parent", p.ID)
		}
		parent = &p
	}

	var last *repository.Point
	if !*forceRead && *changedPath == "" {
		if last, err = lastGoodPoint(ctx, r, *vm); err != nil {
			return err
		}
	}

	bar := newProgress(env, *asJSON)
	defer bar.Finish()
	start := time.Now()
	sess, err := r.NewSession(ctx)
	if err != nil {
		return err
	}
	defer sess.Abort()
	out := imageBackupJSON{VM: *vm, Disks: []imageDiskJSON{}}
	np := repository.NewPoint{VM: repository.VMIdentity{Name: *vm}, Time: start.UTC(), Tags: map[string]string{}}
	if parent != nil {
		np.Parent = parent.ID
		out.Parent = parent.ID
	}
	for i, im := range opened {
		ident := sourceIdentity(images[i], im)
		if ident != "" {
			np.Tags[sourceTag(i)] = ident
		}
		var d repository.NewDisk
		var stats imageDiskJSON
		var warn string
		if prev, ok := unchangedDisk(last, i, ident); ok {
			// Same file, same size, same mtime and ctime as when it was last
			// backed up: its disk map is reused without reading a byte, as
			// restic does for unchanged files (--force-read re-reads).
			d = prev
			stats = imageDiskJSON{Format: im.Format(), Mode: "unchanged", LogicalBytes: im.Size()}
			if np.Parent == "" {
				np.Parent = last.ID
				out.Parent = last.ID
			}
		} else if d, stats, warn, err = backupImage(ctx, r, sess, chunker, im, i, parent, changed, *changedPath != "", *workers,
			imageProgress(bar, images, i)); err != nil {
			return fmt.Errorf("back up image %s: %w", images[i], err)
		}
		if warn != "" {
			np.Warnings = append(np.Warnings, warn)
			fmt.Fprintf(env.stderr, "warning: %s\n", warn)
		}
		d.Label = filepath.Base(images[i])
		np.Disks = append(np.Disks, d)
		stats.Image = images[i]
		out.Disks = append(out.Disks, stats)
		out.LogicalBytes += stats.LogicalBytes
		out.BytesRead += stats.BytesRead
		out.ParentBytesRead += stats.ParentBytesRead
		out.NewBytes += stats.NewBytes
		out.StoredBytesAdded += stats.StoredBytes
	}
	p, err := sess.Commit(ctx, np)
	if err != nil {
		return fmt.Errorf("commit restore point: %w", err)
	}
	out.RestorePoint = p.ID
	out.Seconds = time.Since(start).Seconds()
	bar.Finish()
	if *asJSON {
		return writeJSON(env.stdout, out)
	}
	for _, d := range out.Disks {
		fmt.Fprintf(env.stdout, "%s: %s %s, read %s, new %s, stored %s in %.2fs\n", d.Image, d.Mode,
			humanBytes(d.LogicalBytes), humanBytes(d.BytesRead), humanBytes(d.NewBytes), humanBytes(d.StoredBytes), d.Seconds)
	}
	fmt.Fprintln(env.stdout, p.ID)
	return nil
}

// imageProgress reports image i's backup on bar (nil when there is no bar).
func imageProgress(bar *progresspkg.Bar, images []string, i int) func(backup.Progress) {
	if bar == nil {
		return nil
	}
	label := "back up " + filepath.Base(images[i])
	if len(images) > 1 {
		label = fmt.Sprintf("back up %d/%d %s", i+1, len(images), filepath.Base(images[i]))
	}
	return func(p backup.Progress) { bar.Update(label, p.Done, p.Size, true) }
}

// backupImage streams one image into the session. With a parent and a
// --changed list it reads only the changed ranges; when the parent cannot
// serve (no such disk, other size) it falls back to a full read and says why.
func backupImage(ctx context.Context, r *repository.Repository, sess *repository.Session, chunker dedup.Chunker,
	im diskimage.Image, idx int, parent *repository.Point, changed []dedup.Extent, haveChanged bool, workers int,
	progress func(backup.Progress),
) (repository.NewDisk, imageDiskJSON, string, error) {
	in := backup.DiskInput{Source: im, Size: im.Size()}
	stats := imageDiskJSON{Format: im.Format(), LogicalBytes: im.Size(), Mode: "allocated"}
	var warn string
	if parent != nil && haveChanged {
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
			in.Parent = &backup.ParentDisk{Reader: pr, Extents: exts, Changed: changed}
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
	res, err := backup.WriteDisk(ctx, sess, chunker, in, backup.Options{Workers: workers, Progress: progress, ProgressEvery: progresspkg.Every})
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

func runImageRestore(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "image restore")
	rf := addRepoFlags(fs)
	pointID := fs.String("restore-point", "", "restore point id or unique prefix (required)")
	disk := fs.Int("disk", 0, "disk index within the restore point")
	force := fs.Bool("force", false, "replace OUT if it exists")
	doSync := fs.Bool("sync", false, "fsync OUT before reporting success (like restic and cp, the default leaves write-back to the kernel)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *pointID == "" {
		return fmt.Errorf("%w: --restore-point is required", errUsage)
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: give exactly one OUT file", errUsage)
	}
	outPath := pos[0]
	// Refuse before opening the repository: a typo in OUT must not destroy a
	// file, and a refusal changes nothing.
	if !*force {
		if _, err := os.Lstat(outPath); err == nil {
			return fmt.Errorf("%s already exists: give --force to replace it", outPath)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("check output: %w", err)
		}
	}
	r, err := rf.open(ctx, env)
	if err != nil {
		return err
	}
	defer r.Close()
	p, err := r.Point(ctx, *pointID)
	if err != nil {
		return err
	}
	if *disk < 0 || *disk >= len(p.Disks) {
		return fmt.Errorf("%w: restore point %s has %d disk(s); --disk %d does not exist", errUsage, short(p.ID), len(p.Disks), *disk)
	}
	dr, err := r.OpenDisk(ctx, p.ID, *disk)
	if err != nil {
		return err
	}
	defer dr.Close()
	// Write to a temporary file and rename it into place only when every byte
	// verified: a failed restore never leaves a plausible-looking OUT behind.
	tmp, err := os.CreateTemp(filepath.Dir(outPath), "."+filepath.Base(outPath)+".restore-*")
	if err != nil {
		return fmt.Errorf("create output: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bar := newProgress(env, false)
	defer bar.Finish()
	label := fmt.Sprintf("restore disk %d", *disk)
	start := time.Now()
	var progress func(int64)
	if bar != nil {
		progress = func(done int64) { bar.Update(label, done, dr.Size(), true) }
	}
	if err := dr.Stream(ctx, tmp, progress); err != nil {
		return fmt.Errorf("restore disk %d of %s: %w", *disk, short(p.ID), err)
	}
	if err := tmp.Truncate(dr.Size()); err != nil {
		return fmt.Errorf("size output: %w", err)
	}
	if *doSync {
		if err := tmp.Sync(); err != nil {
			return fmt.Errorf("sync output: %w", err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close output: %w", err)
	}
	if err := os.Rename(tmp.Name(), outPath); err != nil {
		return fmt.Errorf("rename output: %w", err)
	}
	ok = true
	secs := time.Since(start).Seconds()
	bar.Finish()
	fmt.Fprintf(env.stdout, "restored disk %d of %s (%s) to %s in %.2fs\n", *disk, short(p.ID), humanBytes(dr.Size()), outPath, secs)
	return nil
}

// sourceTag names the restore point tag that records where disk i came from.
func sourceTag(i int) string { return fmt.Sprintf("source.%d", i) }

// sourceIdentity describes an image file well enough to tell that it has not
// changed: path, device, inode, size, mtime and ctime (any write moves
// ctime). Formats whose data lives in other files (a descriptor with flat
// extents) get no identity: their descriptor can stay the same while the
// extents change.
func sourceIdentity(path string, im diskimage.Image) string {
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
