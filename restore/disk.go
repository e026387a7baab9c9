package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/vmvault/vmvault/disk/vmdk"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vsphere"
)

// AttachRequest restores one disk of a restore point as a new disk of an
// existing VM.
type AttachRequest struct {
	RestorePoint string
	Disk         int    // disk index in the restore point
	VM           string // name, inventory path or id of the VM to attach to
	// Datastore for the new disk; default: the VM's.
	Datastore string
	// ControllerType ("scsi", "sata", "nvme", "ide") and Bus pick one of
	// the VM's controllers; default: its first SCSI controller.
	ControllerType string
	Bus            int32
	Thin           bool
	Progress       func(Progress)
}

// AttachDisk adds a new disk to an existing VM and fills it with a restore
// point disk. If the upload fails or is cancelled, the new disk is removed
// and deleted; the VM's other disks are never touched.
func (e *Engine) AttachDisk(ctx context.Context, req AttachRequest) (Result, error) {
	start := time.Now()
	if e.vc == nil {
		return Result{}, fmt.Errorf("%w: no vCenter connection", ErrInvalidRequest)
	}
	if req.VM == "" {
		return Result{}, fmt.Errorf("%w: no VM to attach to", ErrInvalidRequest)
	}
	p, _, err := e.loadPoint(ctx, req.RestorePoint, false)
	if err != nil {
		return Result{}, err
	}
	if req.Disk < 0 || req.Disk >= len(p.Disks) {
		return Result{}, fmt.Errorf("%w: restore point %s has %d disk(s), no disk %d", ErrInvalidRequest, p.ID, len(p.Disks), req.Disk)
	}
	pd := p.Disks[req.Disk]
	vm, err := e.vc.FindVM(ctx, req.VM)
	if err != nil {
		if errors.Is(err, vsphere.ErrNotFound) {
			return Result{}, fmt.Errorf("%w: %w", ErrTargetNotFound, err)
		}
		return Result{}, err
	}
	if vm.HasSnapshots {
		return Result{}, fmt.Errorf("%w: VM %s has snapshots; a disk added now would sit under them", ErrInvalidRequest, vm.Name)
	}
	ds := req.Datastore
	if ds == "" && len(vm.Datastores) > 0 {
		ds = vm.Datastores[0]
	}
	if ds != "" {
		info, err := e.vc.DatastoreInfo(ctx, vm.Datacenter, ds)
		if err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrTargetNotFound, err)
		}
		if info.FreeBytes < pd.Capacity {
			return Result{}, fmt.Errorf("%w: datastore %s has %d bytes free, the disk needs %d", ErrNoSpace, ds, info.FreeBytes, pd.Capacity)
		}
	}
	res := Result{Mode: "attach", RestorePoint: p.ID, VM: vm.VMRef}
	disk, err := e.vc.AttachDisk(ctx, vm.VMRef, vsphere.AttachDiskSpec{CapacityBytes: pd.Capacity, Thin: req.Thin,
		Datastore: req.Datastore, ControllerType: req.ControllerType, Bus: req.Bus})
	if err != nil {
		if errors.Is(err, vsphere.ErrNotFound) {
			return res, fmt.Errorf("%w: %w", ErrTargetNotFound, err)
		}
		return res, err
	}
	dres, err := e.uploadDisk(ctx, vm.VMRef, p.ID, req.Disk, disk.Key, req.Progress)
	if err != nil {
		cctx, cancel := e.cleanupCtx(ctx)
		defer cancel()
		if derr := e.vc.DetachDisk(cctx, vm.VMRef, disk.Key); derr != nil {
			return res, fmt.Errorf("attach disk %d to %s: %w; removing the new disk %s failed too: %v", req.Disk, vm.Name, err, disk.FileName, derr)
		}
		return res, fmt.Errorf("attach disk %d to %s: %w (the new disk was removed)", req.Disk, vm.Name, err)
	}
	dres.SourceKey, dres.Label, dres.Target = pd.Key, pd.Label, disk.FileName
	res.Disks = []DiskResult{dres}
	res.finish(start)
	return res, nil
}

// Download formats.
const (
	FormatRaw  = "raw"
	FormatVMDK = "vmdk" // streamOptimized
)

// DownloadRequest writes one restore point disk to a local file.
type DownloadRequest struct {
	RestorePoint string
	Disk         int
	Output       string
	Format       string // FormatRaw (default) or FormatVMDK
	Progress     func(Progress)
}

// DownloadDisk writes a restore point disk to a file: a sparse raw image
// (zero runs are skipped, not written) or a streamOptimized VMDK (zero
// grains are not stored). The file appears under its name only when
// complete; a failure or cancellation leaves nothing behind. An existing
// file is not overwritten.
func (e *Engine) DownloadDisk(ctx context.Context, req DownloadRequest) (Result, error) {
	start := time.Now()
	if req.Output == "" {
		return Result{}, fmt.Errorf("%w: no output file", ErrInvalidRequest)
	}
	if req.Format == "" {
		req.Format = FormatRaw
	}
	if req.Format != FormatRaw && req.Format != FormatVMDK {
		return Result{}, fmt.Errorf("%w: format %q (want raw or vmdk)", ErrInvalidRequest, req.Format)
	}
	if _, err := os.Lstat(req.Output); err == nil {
		return Result{}, fmt.Errorf("%w: %s exists", ErrInvalidRequest, req.Output)
	}
	p, _, err := e.loadPoint(ctx, req.RestorePoint, false)
	if err != nil {
		return Result{}, err
	}
	if req.Disk < 0 || req.Disk >= len(p.Disks) {
		return Result{}, fmt.Errorf("%w: restore point %s has %d disk(s), no disk %d", ErrInvalidRequest, p.ID, len(p.Disks), req.Disk)
	}
	dr, err := e.repo.OpenDisk(ctx, p.ID, req.Disk)
	if err != nil {
		return Result{}, err
	}
	defer dr.Close()
	size := dr.Size()
	if req.Format == FormatVMDK && size%512 != 0 {
		return Result{}, fmt.Errorf("%w: disk of %d bytes is not a whole number of sectors; download it raw", ErrInvalidRequest, size)
	}
	tmp, err := os.CreateTemp(filepath.Dir(req.Output), "."+filepath.Base(req.Output)+".restore-*")
	if err != nil {
		return Result{}, fmt.Errorf("create output: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := newAsyncHasher()
	hashed := false
	defer func() {
		if !hashed {
			h.Sum()
		}
	}()
	progress := func(done int64) {
		if req.Progress != nil {
			req.Progress(Progress{Phase: "disk", Disk: req.Disk, Done: done, Size: size})
		}
	}
	var written int64
	switch req.Format {
	case FormatRaw:
		sw := &sparseWriter{f: tmp}
		if _, err := dr.StreamTo(ctx, io.MultiWriter(h, sw), progress); err != nil {
			return Result{}, fmt.Errorf("restore disk %d of %s: %w", req.Disk, p.ID, err)
		}
		if err := tmp.Truncate(size); err != nil {
			return Result{}, fmt.Errorf("size output: %w", err)
		}
		written = sw.data
	case FormatVMDK:
		cw := &countWriter{w: tmp}
		vw, err := vmdk.NewStreamWriter(cw, size, vmdk.StreamWriterOptions{ExtentName: filepath.Base(req.Output)})
		if err != nil {
			return Result{}, err
		}
		gw := &grainWriter{w: vw}
		if _, err := dr.StreamTo(ctx, io.MultiWriter(h, gw), progress); err != nil {
			return Result{}, fmt.Errorf("restore disk %d of %s: %w", req.Disk, p.ID, err)
		}
		if err := vw.Close(); err != nil {
			return Result{}, fmt.Errorf("finish VMDK: %w", err)
		}
		written = cw.n
	}
	digest := h.Sum()
	hashed = true
	// A cancellation that arrives after the last byte still wins: the caller
	// was told nothing will appear, so nothing is published.
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("restore disk %d of %s: %w", req.Disk, p.ID, err)
	}
	if err := tmp.Sync(); err != nil {
		return Result{}, fmt.Errorf("sync output: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Result{}, fmt.Errorf("close output: %w", err)
	}
	// A hard link publishes without ever replacing a file that appeared
	// meanwhile; where links are not supported, rename after a last check.
	if err := os.Link(tmp.Name(), req.Output); err != nil {
		if errors.Is(err, os.ErrExist) {
			return Result{}, fmt.Errorf("%w: %s exists", ErrInvalidRequest, req.Output)
		}
		if _, serr := os.Lstat(req.Output); serr == nil {
			return Result{}, fmt.Errorf("%w: %s exists", ErrInvalidRequest, req.Output)
		}
		if err := os.Rename(tmp.Name(), req.Output); err != nil {
			return Result{}, fmt.Errorf("publish %s: %w", req.Output, err)
		}
	} else {
		os.Remove(tmp.Name())
	}
	ok = true
	res := Result{Mode: "download", RestorePoint: p.ID, Disks: []DiskResult{{Index: req.Disk, SourceKey: p.Disks[req.Disk].Key,
		Label: p.Disks[req.Disk].Label, Capacity: size, BytesWritten: written, SHA256: digest,
		Seconds: time.Since(start).Seconds(), Target: req.Output}}}
	res.finish(start)
	return res, nil
}

// sparseWriter writes a stream to a file, seeking over all-zero runs so
// they stay holes (the file is truncated to size at the end).
type sparseWriter struct {
	f    *os.File
	off  int64
	data int64 // bytes actually written
}

var zeroBlock [64 << 10]byte

func (w *sparseWriter) Write(p []byte) (int, error) {
	n := len(p)
	// Runs of non-zero blocks go out in one write each.
	for len(p) > 0 {
		run := 0
		for run < len(p) {
			c := min(len(p)-run, len(zeroBlock))
			if bytes.Equal(p[run:run+c], zeroBlock[:c]) {
				break
			}
			run += c
		}
		if run > 0 {
			if _, err := w.f.WriteAt(p[:run], w.off); err != nil {
				return 0, err
			}
			w.data += int64(run)
			w.off += int64(run)
			p = p[run:]
			continue
		}
		c := min(len(p), len(zeroBlock))
		w.off += int64(c)
		p = p[c:]
	}
	return n, nil
}

// grainWriter feeds an ordered stream to a VMDK stream writer.
type grainWriter struct {
	w   *vmdk.StreamWriter
	off int64
}

func (g *grainWriter) Write(p []byte) (int, error) {
	if err := g.w.WriteGrainsAt(p, g.off); err != nil {
		return 0, err
	}
	g.off += int64(len(p))
	return len(p), nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

var _ Points = (*repository.Repository)(nil)
