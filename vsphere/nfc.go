package vsphere

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/nfc"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/disk/vmdk"
)

// NFCOptions tune ExportDisk.
type NFCOptions struct {
	// KeepAlive is how often lease progress is reported so the lease does
	// not time out (default defaultLeaseKeepAlive, 10 s; vSphere's lease
	// timeout is 300 s).
	KeepAlive time.Duration
	// Progress, if set, gets the compressed bytes received so far.
	Progress func(received int64)
}

// ExportDisk reads a snapshotted disk through an NFC export lease
// (ExportSnapshot), decoding the streamOptimized VMDK that ESXi serves, and
// calls fn for every stored grain in disk order (bytes in no grain are
// zeros). It is the sequential, full-read fallback for datastores without a
// readable flat extent (vSAN, vVols): NFC has no CBT filtering and no Range
// support. The lease is kept alive while reading, completed on success and
// aborted on failure.
func (c *Client) ExportDisk(ctx context.Context, snap *Snapshot, diskKey int32, opts NFCOptions, fn func(off int64, data []byte) error) (err error) {
	op := fmt.Sprintf("NFC export of %s disk %d", snap.VM.Name, diskKey)
	d, ok := snap.Disk(diskKey)
	if !ok {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	if d.Unsupported != "" {
		return &UnsupportedDiskError{VM: snap.VM.Name, Disk: diskKey, Reason: d.Unsupported}
	}
	ordinal := -1
	for i, x := range snap.Disks {
		if x.Key == diskKey {
			ordinal = i
		}
	}
	res, err := methods.ExportSnapshot(ctx, c.vim, &types.ExportSnapshot{This: types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: snap.MoRef}})
	if err != nil {
		return mapFault(op, err)
	}
	k, err := holdLease(ctx, c.vim, op, res.Returnval, opts.KeepAlive, func(info *nfc.LeaseInfo) int64 { return info.TotalDiskCapacityInKB * 1024 })
	if err != nil {
		return err
	}
	defer k.end(ctx, &err)
	info := k.info
	// Match the device URL: by target file name when the server gives one,
	// else by the disk's position among the disks.
	var target *url.URL
	n := 0
	for i, du := range info.DeviceUrl {
		if du.Disk == nil || !*du.Disk {
			continue
		}
		if du.TargetId != "" && du.TargetId == path.Base(d.FileName) || du.TargetId == "" && n == ordinal {
			target = info.Items[i].URL
			break
		}
		n++
	}
	if target == nil {
		return fmt.Errorf("%s: the lease has no URL for this disk: %w", op, ErrNotFound)
	}

	resp, err := c.sc.DownloadRequest(ctx, target, &soap.Download{Method: http.MethodGet})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %w", op, &httpStatusError{code: resp.StatusCode, status: resp.Status, url: target.Path})
	}
	body := &progressReader{r: resp.Body, n: &k.done, fn: opts.Progress}
	sr, err := vmdk.NewStreamReader(body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if sr.Capacity() != d.CapacityBytes {
		return fmt.Errorf("%s: stream capacity %d, disk capacity %d", op, sr.Capacity(), d.CapacityBytes)
	}
	for {
		off, data, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if err := fn(off, data); err != nil {
			return err
		}
	}
}

type progressReader struct {
	r  io.Reader
	n  *atomic.Int64
	fn func(int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		v := p.n.Add(int64(n))
		if p.fn != nil {
			p.fn(v)
		}
	}
	return n, err
}
