package vsphere

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/nfc"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"
)

// defaultLeaseKeepAlive is how often a held NFC lease hears of progress;
// vSphere drops a lease that hears nothing for its timeout (300 s).
const defaultLeaseKeepAlive = 10 * time.Second

// leaseKeeper holds one NFC lease, an export's or an import's, for the
// length of a transfer: it reports progress every keep-alive period so the
// lease does not time out, and its end completes the lease after a
// transfer that succeeded or aborts it, with the error, after one that
// failed. The end runs on a context detached from the caller's: a
// cancelled transfer must still release its lease (vCenter holds the
// snapshot or the half-imported VM until then).
type leaseKeeper struct {
	op    string
	lease *nfc.Lease
	info  *nfc.LeaseInfo
	// done counts the bytes moved so far; the transfer adds to it and the
	// keep-alive reports done/total as the lease's percentage.
	done  atomic.Int64
	total int64
	stop  chan struct{}
	wg    sync.WaitGroup
}

// holdLease waits for lease ref to be ready and starts its keep-alive
// (every <= 0: defaultLeaseKeepAlive). total gives the transfer's expected
// bytes from the lease info (for the percentage). A lease that fails to
// become ready is aborted. The caller must call end.
func holdLease(ctx context.Context, vim *vim25.Client, op string, ref types.ManagedObjectReference, every time.Duration, total func(*nfc.LeaseInfo) int64) (*leaseKeeper, error) {
	if every <= 0 {
		every = defaultLeaseKeepAlive
	}
	lease := nfc.NewLease(vim, ref)
	info, err := lease.Wait(ctx, nil)
	if err != nil {
		err = mapFault(op+": lease", err)
		abortLease(ctx, lease, err)
		return nil, err
	}
	k := &leaseKeeper{op: op, lease: lease, info: info, total: max(total(info), 1), stop: make(chan struct{})}
	k.wg.Add(1)
	go k.keepAlive(ctx, every)
	return k, nil
}

func (k *leaseKeeper) keepAlive(ctx context.Context, every time.Duration) {
	defer k.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			// Never 100 before the end: Complete says that.
			_ = k.lease.Progress(ctx, k.percent())
		}
	}
}

func (k *leaseKeeper) percent() int32 {
	return int32(min(99, max(k.done.Load(), 0)*100/k.total))
}

// end stops the keep-alive, then completes the lease when *errp is nil or
// aborts it with *errp. A failed Complete becomes *errp: the transfer is
// not known to have landed.
func (k *leaseKeeper) end(ctx context.Context, errp *error) {
	close(k.stop)
	k.wg.Wait()
	if *errp != nil {
		abortLease(ctx, k.lease, *errp)
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultCallTimeout)
	defer cancel()
	if err := k.lease.Complete(dctx); err != nil {
		*errp = mapFault(k.op+": complete lease", err)
		// A lease left open holds the disks until it times out.
		abortLease(ctx, k.lease, *errp)
	}
}

// abortLease aborts a lease with err as its fault, best effort (the lease
// may already be in an error state), on a detached, bounded context.
func abortLease(ctx context.Context, lease *nfc.Lease, err error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultCallTimeout)
	defer cancel()
	_ = lease.Abort(dctx, &types.LocalizedMethodFault{Fault: &types.SystemError{Reason: err.Error()}, LocalizedMessage: err.Error()})
}
