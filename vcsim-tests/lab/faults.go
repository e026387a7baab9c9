package lab

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// WriteFault makes datastore file-service PUTs and NFC import uploads fail.
type WriteFault struct {
	// PathContains selects requests whose URL path contains it ("" = all).
	PathContains string
	// Status is the HTTP status answered (default 500).
	Status int
	// AfterBytes of the body are read (and discarded) before the answer.
	AfterBytes int64
	// Times is how many requests the fault hits (0 means 1).
	Times int
}

// InjectWriteFault queues a fault for the next matching datastore PUTs.
func (l *Lab) InjectWriteFault(f WriteFault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.Status == 0 {
		f.Status = http.StatusInternalServerError
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writeFaults = append(l.writeFaults, &f)
}

// ClearWriteFaults removes queued datastore write faults.
func (l *Lab) ClearWriteFaults() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writeFaults = nil
}

// FolderPuts counts datastore file-service PUTs received so far.
func (l *Lab) FolderPuts() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.folderPut
}

func (l *Lab) serveFolderPut(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.folderPut++
	l.mu.Unlock()
	if !l.takeWriteFault(w, r) {
		l.model.Service.ServeDatastore(w, r)
	}
}

// takeWriteFault answers r with the first queued write fault matching its
// path (datastore and NFC uploads) and reports whether it did.
func (l *Lab) takeWriteFault(w http.ResponseWriter, r *http.Request) bool {
	l.mu.Lock()
	var hit *WriteFault
	for i, f := range l.writeFaults {
		if strings.Contains(r.URL.Path, f.PathContains) {
			f.Times--
			if f.Times == 0 {
				l.writeFaults = append(l.writeFaults[:i:i], l.writeFaults[i+1:]...)
			}
			hit = f
			break
		}
	}
	l.mu.Unlock()
	if hit == nil {
		return false
	}
	_, _ = io.CopyN(io.Discard, r.Body, hit.AfterBytes)
	http.Error(w, "lab: injected upload failure", hit.Status)
	return true
}

// UnderReportCBT makes QueryChangedDiskAreas of disk idx of vm lie: the
// changes it reports since an earlier change id never include
// [off, off+length) (the "*" allocated areas stay true). It models the CBT
// bugs that lose writes, deterministically, for the backup's CBT
// verification. length <= 0 clears it.
func (l *Lab) UnderReportCBT(vm string, idx int, off, length int64) error {
	info, err := l.Disk(vm, idx)
	if err != nil {
		return err
	}
	if off < 0 || off >= info.Capacity {
		return fmt.Errorf("lab: under-report at %d outside disk of %d bytes", off, info.Capacity)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.disks[info.FlatPath]
	if length <= 0 {
		d.hideStart, d.hideEnd = 0, 0
		return nil
	}
	d.hideStart, d.hideEnd = off, min(off+length, info.Capacity)
	return nil
}

// hide cuts [d.hideStart, d.hideEnd) out of changed areas; l.mu is held.
func (d *disk) hide(in []types.DiskChangeExtent) []types.DiskChangeExtent {
	if d.hideEnd <= d.hideStart {
		return in
	}
	var out []types.DiskChangeExtent
	for _, e := range in {
		s, end := e.Start, e.Start+e.Length
		if end <= d.hideStart || s >= d.hideEnd {
			out = append(out, e)
			continue
		}
		if s < d.hideStart {
			out = append(out, types.DiskChangeExtent{Start: s, Length: d.hideStart - s})
		}
		if end > d.hideEnd {
			out = append(out, types.DiskChangeExtent{Start: d.hideEnd, Length: end - d.hideEnd})
		}
	}
	return out
}

// LoseSnapshotReply makes the next snapshot of vm happen while its caller
// gets a SystemError instead of the task: the reply lost on the way, so a
// retry without a sweep would leave a snapshot behind.
func (l *Lab) LoseSnapshotReply(vm string) error {
	v, err := l.findVM(vm)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state(v.Self.Value).lostReplies++
	return nil
}

func (l *Lab) takeLostReply(vm *simulator.VirtualMachine) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(vm.Self.Value)
	if st.lostReplies == 0 {
		return false
	}
	st.lostReplies--
	return true
}

// leaseRef is an NFC lease in the session registry it lives in.
type leaseRef struct {
	reg *simulator.Registry
	ref types.ManagedObjectReference
}

// trackLease remembers a lease just created in ctx's session.
func (l *Lab) trackLease(ctx *simulator.Context, ref types.ManagedObjectReference) {
	if ctx.Session == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.allLeases = append(l.allLeases, leaseRef{reg: ctx.Session.Registry, ref: ref})
}

// OpenLeases counts the NFC leases (export and import) created so far that
// were neither completed nor aborted: what a failed backup or restore must
// not leave behind (on ESXi an open export lease keeps the disks locked
// until it times out).
func (l *Lab) OpenLeases() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, lr := range l.allLeases {
		if lr.reg.Get(lr.ref) != nil {
			n++
		}
	}
	return n
}
