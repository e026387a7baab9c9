package imagebackup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/directio"
	"github.com/vmvault/vmvault/repository"
)

// RestoreRequest describes the restore of one disk to a file.
type RestoreRequest struct {
	// Point is a restore point id or unique prefix; Disk its disk index.
	Point string
	Disk  int
	// Out is the file written; it must not exist unless Force.
	Out   string
	Force bool
	// Sync fsyncs Out before reporting success (like restic and cp, the
	// default leaves write-back to the kernel).
	Sync bool
	// Progress reports the bytes written of total (nil: none).
	Progress func(done, total int64)
	// Clock times the restore; nil is the wall clock.
	Clock clock.Clock
}

// RestoreResult describes a finished restore.
type RestoreResult struct {
	Point   string // the full restore point id
	Disk    int
	Size    int64 // the disk's (and Out's) size in bytes
	Seconds float64
}

// NoDiskError: the restore point has no disk of that index. It matches
// ErrNoDisk.
type NoDiskError struct {
	Point       string // full id
	Disks, Disk int
}

func (e *NoDiskError) Error() string {
	return fmt.Sprintf("restore point %s has %d disk(s); disk %d does not exist", short(e.Point), e.Disks, e.Disk)
}

func (e *NoDiskError) Is(target error) bool { return target == ErrNoDisk }

// CheckOutput refuses an existing out unless force: callers check before
// opening the repository, so that a typo in OUT never destroys a file and a
// refusal changes nothing. Restore checks again.
func CheckOutput(out string, force bool) error {
	if force {
		return nil
	}
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("%s: %w", out, ErrOutputExists)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("check output: %w", err)
	}
	return nil
}

// Restore writes one disk of a restore point to req.Out, sparse (holes are
// not written). It writes to a temporary file beside Out and renames it
// into place only when every byte verified: a failed or cancelled restore
// never leaves a plausible-looking Out behind.
func Restore(ctx context.Context, r *repository.Repository, req RestoreRequest) (RestoreResult, error) {
	if err := CheckOutput(req.Out, req.Force); err != nil {
		return RestoreResult{}, err
	}
	clk := req.Clock
	if clk == nil {
		clk = clock.Real()
	}
	p, err := r.Point(ctx, req.Point)
	if err != nil {
		return RestoreResult{}, err
	}
	if req.Disk < 0 || req.Disk >= len(p.Disks) {
		return RestoreResult{}, &NoDiskError{Point: p.ID, Disks: len(p.Disks), Disk: req.Disk}
	}
	dr, err := r.OpenDisk(ctx, p.ID, req.Disk)
	if err != nil {
		return RestoreResult{}, err
	}
	defer dr.Close()
	tmp, err := os.CreateTemp(filepath.Dir(req.Out), "."+filepath.Base(req.Out)+".restore-*")
	if err != nil {
		return RestoreResult{}, fmt.Errorf("create output: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	start := clk.Now()
	var progress func(int64)
	if req.Progress != nil {
		progress = func(done int64) { req.Progress(done, dr.Size()) }
	}
	// Sized first: the direct writes then fill holes of a file that does
	// not grow, and a hole at the end of the disk is there already.
	if err := tmp.Truncate(dr.Size()); err != nil {
		return RestoreResult{}, fmt.Errorf("size output: %w", err)
	}
	if err := stream(ctx, dr, tmp, progress); err != nil {
		return RestoreResult{}, fmt.Errorf("restore disk %d of %s: %w", req.Disk, short(p.ID), err)
	}
	if req.Sync {
		if err := tmp.Sync(); err != nil {
			return RestoreResult{}, fmt.Errorf("sync output: %w", err)
		}
	}
	if err := tmp.Close(); err != nil {
		return RestoreResult{}, fmt.Errorf("close output: %w", err)
	}
	if err := os.Rename(tmp.Name(), req.Out); err != nil {
		return RestoreResult{}, fmt.Errorf("rename output: %w", err)
	}
	ok = true
	return RestoreResult{Point: p.ID, Disk: req.Disk, Size: dr.Size(), Seconds: clk.Since(start).Seconds()}, nil
}

// stream writes the disk into out with direct I/O where the file system
// allows it (internal/directio says why), else through the page cache.
func stream(ctx context.Context, dr *repository.DiskReader, out *os.File, progress func(int64)) error {
	w, err := directio.Open(out)
	if errors.Is(err, directio.ErrUnsupported) {
		return dr.Stream(ctx, out, progress)
	} else if err != nil {
		return err
	}
	err = dr.Stream(ctx, w, progress)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}
