package repository

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// DiskFullError is what a write returns when the repository's file system
// has no space left (ENOSPC). Nothing half-written is committed: packs and
// commit records reach their final names only complete, and the catalog
// transaction that failed is rolled back. errors.Is(err, syscall.ENOSPC)
// holds; the message tells the operator what to do.
type DiskFullError struct {
	Dir string // the repository directory
	Err error
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("the repository's disk is full (%s): free space there or reclaim, then retry: %v", e.Dir, e.Err)
}

func (e *DiskFullError) Unwrap() error { return e.Err }

// diskFull wraps an ENOSPC error once in a DiskFullError; other errors pass.
func (r *Repository) diskFull(err error) error {
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	var d *DiskFullError
	if errors.As(err, &d) {
		return err
	}
	return &DiskFullError{Dir: r.dir, Err: err}
}

// Commit flushes packs, writes the manifest and commits the restore point
// LAST (commit record file, then catalog). A full disk fails it with a
// DiskFullError and commits nothing.
func (s *Session) Commit(ctx context.Context, p NewPoint) (Point, error) {
	pt, err := s.commit(ctx, p)
	return pt, s.r.diskFull(err)
}

// Reclaim removes what no restore point references and repacks mostly-dead
// packs. It is safe while sessions write (see the package documentation).
// Reclaim refuses to delete anything when a restore point cannot be read,
// because then the live set is unknown. A full disk (repacking writes new
// packs before old ones go) fails it with a DiskFullError.
func (r *Repository) Reclaim(ctx context.Context, progress func(Progress)) (*ReclaimReport, error) {
	if err := r.writable("reclaim"); err != nil {
		return nil, err
	}
	rep, err := r.reclaim(ctx, progress)
	return rep, r.diskFull(err)
}

// packFailure returns the error of a pack holding this session's blobs
// that failed to finalise (fsync, rename, catalog), if any. Its blobs left
// the pending set without reaching the catalog, so a later reference to
// one of them would otherwise report "not found" instead of the disk error.
func (s *Session) packFailure() error {
	r := s.r
	r.mu.Lock()
	packs := make([]*packWriter, 0, len(s.packs)+len(s.waits))
	for pw := range s.packs {
		packs = append(packs, pw)
	}
	for pb := range s.waits {
		if pb.pw != nil {
			packs = append(packs, pb.pw)
		}
	}
	r.mu.Unlock()
	for _, pw := range packs {
		select {
		case <-pw.done:
			if pw.err != nil {
				return pw.err
			}
		default:
		}
	}
	return nil
}
