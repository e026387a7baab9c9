package vsphere

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/vmware/govmomi/nfc"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/disk/vmdk"
)

// DiskFiller writes one disk's content into w in increasing offset order
// (w.WriteGrainsAt); bytes it never writes are zeros.
type DiskFiller func(ctx context.Context, disk int, w *vmdk.StreamWriter) error

// ImportVM creates a VM through an NFC import lease (ResourcePool.ImportVApp)
// and uploads every disk of spec as a streamOptimized VMDK encoded on the fly
// from fill: nothing is buffered beyond one grain, zeros are not sent, and
// it works where the datastore file service cannot (vSAN, vVols). The lease
// is kept alive, completed on success and aborted on failure. progress, if
// set, gets the compressed bytes sent so far.
func (c *Client) ImportVM(ctx context.Context, spec VMSpec, fill DiskFiller, progress func(sent int64)) (vm VM, err error) {
	op := "import VM " + spec.Name
	b, err := c.buildVM(ctx, op, spec)
	if err != nil {
		return VM{}, err
	}
	req := &types.ImportVApp{This: b.pool.Reference(), Spec: &types.VirtualMachineImportSpec{ConfigSpec: b.spec}}
	fref := b.folder.Reference()
	req.Folder = &fref
	if b.host != nil {
		h := b.host.Reference()
		req.Host = &h
	}
	res, err := methods.ImportVApp(ctx, c.vim, req)
	if err != nil {
		return VM{}, mapFault(op, err)
	}
	var total int64
	for _, d := range spec.Disks {
		total += d.CapacityBytes
	}
	k, err := holdLease(ctx, c.vim, op, res.Returnval, 0, func(*nfc.LeaseInfo) int64 { return total })
	if err != nil {
		return VM{}, err
	}
	defer k.end(ctx, &err)
	info := k.info

	disk := 0
	for i, du := range info.DeviceUrl {
		if du.Disk == nil || !*du.Disk {
			continue
		}
		if disk >= len(spec.Disks) {
			return VM{}, fmt.Errorf("%s: the lease has more disks than the spec", op)
		}
		if err := c.uploadStream(ctx, info.Items[i], du.TargetId, spec.Disks[disk].CapacityBytes, disk, fill, &k.done, progress); err != nil {
			return VM{}, fmt.Errorf("%s: disk %d: %w", op, disk, err)
		}
		disk++
	}
	if disk != len(spec.Disks) {
		return VM{}, fmt.Errorf("%s: the lease has %d disks, the spec %d", op, disk, len(spec.Disks))
	}
	return c.VM(ctx, VMRef{MoRef: info.Entity.Value})
}

// uploadStream PUTs one disk: an encoder goroutine writes into a pipe that
// the HTTP request body reads (chunked, size unknown in advance).
func (c *Client) uploadStream(ctx context.Context, item nfc.FileItem, name string, capacity int64, disk int, fill DiskFiller, sent *atomic.Int64, progress func(int64)) error {
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sw, err := vmdk.NewStreamWriter(pw, capacity, vmdk.StreamWriterOptions{ExtentName: name})
		if err == nil {
			err = fill(ctx, disk, sw)
			if cerr := sw.Close(); err == nil {
				err = cerr
			}
		}
		pw.CloseWithError(err)
	}()
	body := &progressReader{r: pr, n: sent, fn: progress}
	cr := &countingReader{r: body, c: c}
	err := c.sc.Upload(ctx, cr, item.URL, &soap.Upload{
		Method: http.MethodPut, Type: "application/x-vnd.vmware-streamVmdk",
		Headers: map[string]string{"Overwrite": "t"},
	})
	// Unblock the encoder if the upload stopped reading early.
	pr.CloseWithError(fmt.Errorf("upload ended"))
	wg.Wait()
	return err
}
