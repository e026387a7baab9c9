package vsphere

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/vmvault/vmvault/internal/extent"
)

// ExportOptions tune OpenExport.
type ExportOptions struct {
	NFCOptions
	// Dir is where the kept extents are staged (default os.TempDir()).
	Dir string
}

// ExportSource is a snapshotted disk read whole through NFC export
// (ExportDisk), of which only the extents the caller asked to keep were
// staged in a sparse temporary file. It serves ReadAt at any offset within
// those extents; a read outside them is an error rather than zeros, so a
// read plan that disagrees with the kept set cannot corrupt a backup.
//
// NFC has no Range support and ESXi consolidates a snapshot's delta chain
// into the stream, so this is the reader for vSAN/vVols disks, for disks
// the datastore file service refuses (403/404) and for VMs whose own
// snapshots sit under ours. Changed block tracking still decides what is
// stored: everything outside keep is dropped as it streams by.
type ExportSource struct {
	f    *os.File
	size int64
	keep []Extent // sorted, merged; nil keeps everything
	// Received is the NFC bytes received (compressed stream).
	Received int64
}

// OpenExport streams disk diskKey of snap through an NFC export lease and
// stages the bytes that fall in keep (nil: the whole disk). Close removes
// the staging file.
func (c *Client) OpenExport(ctx context.Context, snap *Snapshot, diskKey int32, keep []Extent, opts ExportOptions) (*ExportSource, error) {
	d, ok := snap.Disk(diskKey)
	if !ok {
		return nil, fmt.Errorf("NFC export of %s disk %d: %w", snap.VM.Name, diskKey, ErrNotFound)
	}
	f, err := os.CreateTemp(opts.Dir, "vmvault-export-*.raw")
	if err != nil {
		return nil, fmt.Errorf("NFC export of %s disk %d: staging file: %w", snap.VM.Name, diskKey, err)
	}
	_ = os.Remove(f.Name()) // unlinked now: a crash leaves nothing behind
	src := &ExportSource{f: f, size: d.CapacityBytes}
	if keep != nil {
		src.keep = extent.Normalize(keep, d.CapacityBytes)
		if src.keep == nil {
			src.keep = []Extent{} // nothing to keep, not everything
		}
	}
	if err := f.Truncate(d.CapacityBytes); err != nil {
		f.Close()
		return nil, fmt.Errorf("NFC export of %s disk %d: staging file: %w", snap.VM.Name, diskKey, err)
	}
	prog := opts.Progress
	opts.Progress = func(n int64) {
		src.Received = n
		if prog != nil {
			prog(n)
		}
	}
	err = c.ExportDisk(ctx, snap, diskKey, opts.NFCOptions, func(off int64, data []byte) error {
		return src.stage(off, data)
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return src, nil
}

// stage writes the parts of a grain that fall in keep.
func (s *ExportSource) stage(off int64, data []byte) error {
	end := off + int64(len(data))
	if off < 0 || end > s.size {
		return fmt.Errorf("NFC export: grain %d+%d outside the disk (%d bytes)", off, len(data), s.size)
	}
	if s.keep == nil {
		_, err := s.f.WriteAt(data, off)
		return err
	}
	i := sort.Search(len(s.keep), func(i int) bool { return s.keep[i].End() > off })
	for ; i < len(s.keep) && s.keep[i].Offset < end; i++ {
		a, b := max(off, s.keep[i].Offset), min(end, s.keep[i].End())
		if _, err := s.f.WriteAt(data[a-off:b-off], a); err != nil {
			return fmt.Errorf("NFC export: stage: %w", err)
		}
	}
	return nil
}

// Size is the disk's capacity.
func (s *ExportSource) Size() int64 { return s.size }

// ReadAt reads staged bytes; bytes the stream did not carry are zeros.
func (s *ExportSource) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("NFC export: negative offset %d", off)
	}
	if off >= s.size {
		return 0, io.EOF
	}
	var eof error
	if rem := s.size - off; int64(len(p)) > rem {
		p, eof = p[:rem], io.EOF
	}
	if s.keep != nil && !s.covered(off, off+int64(len(p))) {
		return 0, fmt.Errorf("NFC export: read %d+%d outside the extents kept from the stream", off, len(p))
	}
	n, err := s.f.ReadAt(p, off)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	if err != nil {
		return n, fmt.Errorf("NFC export: staged read: %w", err)
	}
	return n, eof
}

func (s *ExportSource) covered(a, b int64) bool {
	i := sort.Search(len(s.keep), func(i int) bool { return s.keep[i].End() > a })
	for ; i < len(s.keep) && a < b; i++ {
		if s.keep[i].Offset > a {
			return false
		}
		a = s.keep[i].End()
	}
	return a >= b
}

// Close drops the staged data.
func (s *ExportSource) Close() error { return s.f.Close() }
