package lab

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/disk/vmdk"
)

// nfcDisk is what an export lease URL serves: a flat file as streamOptimized.
type nfcDisk struct {
	flat     string
	capacity int64
	// layers are the chain's deltas the snapshot sees on top of the flat
	// file (ESXi consolidates them into the stream).
	layers []map[int64][]byte
}

// ExportSnapshot records the lease's disks so that GET /nfc/<lease>/<file>
// serves them as streamOptimized VMDK encoded from the base flat file (the
// snapshot-time content), as ESXi does; vcsim itself serves the descriptor.
func (s *labSnapshot) ExportSnapshot(ctx *simulator.Context, req *types.ExportSnapshot) soap.HasFault {
	res := s.VirtualMachineSnapshot.ExportSnapshot(ctx, req)
	body, ok := res.(*methods.ExportSnapshotBody)
	if !ok || body.Res == nil {
		return res
	}
	depth := 0
	if vm, ok := ctx.Map.Get(s.Vm).(*simulator.VirtualMachine); ok && vm.Snapshot != nil {
		depth = max(0, depthOf(vm.Snapshot.RootSnapshotList, s.Self, 0))
	}
	files := map[string]nfcDisk{}
	s.lab.mu.Lock()
	for _, d := range s.lab.vmDisks(s.Config.Hardware.Device) {
		fb := d.vd.Backing.(types.BaseVirtualDeviceFileBackingInfo).GetVirtualDeviceFileBackingInfo()
		nd := nfcDisk{flat: d.flat, capacity: capacityOf(d.vd)}
		if st := s.lab.disks[d.flat]; st != nil {
			for _, m := range st.frozen[:min(depth, len(st.frozen))] {
				cp := make(map[int64][]byte, len(m))
				for k, v := range m {
					cp[k] = v // frozen blocks are replaced on merge, never written
				}
				nd.layers = append(nd.layers, cp)
			}
		}
		files[path.Base(fb.FileName)] = nd
	}
	if s.lab.leases == nil {
		s.lab.leases = map[string]map[string]nfcDisk{}
	}
	s.lab.leases[body.Res.Returnval.Value] = files
	s.lab.mu.Unlock()
	s.lab.trackLease(ctx, body.Res.Returnval)
	return res
}

// NFCGets counts NFC GETs served as streamOptimized.
func (l *Lab) NFCGets() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nfcGets
}

func (l *Lab) serveNFCGet(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/nfc/"), "/")
	var d nfcDisk
	var ok bool
	l.mu.Lock()
	if len(parts) == 2 {
		d, ok = l.leases[parts[0]][parts[1]]
	}
	if ok {
		l.nfcGets++
	}
	hit := l.takeFault(r.URL.Path)
	l.mu.Unlock()
	if !ok {
		simulator.ServeNFC(w, r)
		return
	}
	if hit != nil && hit.Status != 0 {
		w.WriteHeader(hit.Status)
		return
	}
	var out io.Writer = w
	if hit != nil {
		fw := &faultWriter{ResponseWriter: w, left: hit.AfterBytes, stall: hit.Stall, done: r.Context().Done(), closed: l.closed}
		out = fw
		defer fw.fire()
	}
	w.Header().Set("Content-Type", "application/x-vnd.vmware-streamVmdk")
	if err := encodeStream(out, d, parts[1]); err != nil {
		panic(http.ErrAbortHandler)
	}
}

func encodeStream(w io.Writer, d nfcDisk, name string) error {
	sw, err := vmdk.NewStreamWriter(w, d.capacity, vmdk.StreamWriterOptions{ExtentName: name})
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < d.capacity; off += int64(len(buf)) {
		n := int(min(int64(len(buf)), d.capacity-off))
		if err := (&disk{flat: d.flat}).readLevels(buf[:n], off, d.layers); err != nil {
			return fmt.Errorf("lab: NFC read: %w", err)
		}
		if n > 0 && !allZero(buf[:n]) {
			if err := sw.WriteGrainsAt(buf[:n], off); err != nil {
				return err
			}
		}
	}
	return sw.Close()
}

// labPool records import leases so that uploads can find their VM.
type labPool struct {
	*simulator.ResourcePool
	lab *Lab
}

func (p *labPool) ImportVApp(ctx *simulator.Context, req *types.ImportVApp) soap.HasFault {
	res := p.ResourcePool.ImportVApp(ctx, req)
	if body, ok := res.(*methods.ImportVAppBody); ok && body.Res != nil {
		// vcsim keeps leases in the session's registry, not the global map.
		if lease, ok := ctx.Session.Get(body.Res.Returnval).(*simulator.HttpNfcLease); ok {
			p.lab.mu.Lock()
			if p.lab.imports == nil {
				p.lab.imports = map[string]*simulator.HttpNfcLease{}
			}
			p.lab.imports[body.Res.Returnval.Value] = lease
			p.lab.mu.Unlock()
			p.lab.trackLease(ctx, body.Res.Returnval)
		}
	}
	return res
}

// serveNFCPut writes an uploaded streamOptimized VMDK into the imported
// VM's flat file (vcsim itself only hashes and discards the bytes). Uploads
// that are not streamOptimized go to vcsim unchanged.
func (l *Lab) serveNFCPut(w http.ResponseWriter, r *http.Request) {
	if l.takeWriteFault(w, r) {
		return
	}
	if !strings.Contains(r.Header.Get("Content-Type"), "streamVmdk") {
		simulator.ServeNFC(w, r)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/nfc/"), "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	m := l.model.Map()
	l.mu.Lock()
	lease, ok := l.imports[parts[0]]
	l.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	var entity string
	m.WithLock(l.lctx, lease, func() {
		if lease.Info != nil {
			entity = lease.Info.Entity.Value
		}
	})
	var target *nfcDisk
	err := l.withVM(entity, func(v *simulator.VirtualMachine) error {
		for _, d := range l.vmDisks(v.Config.Hardware.Device) {
			fb := d.vd.Backing.(types.BaseVirtualDeviceFileBackingInfo).GetVirtualDeviceFileBackingInfo()
			if path.Base(fb.FileName) == parts[1] {
				target = &nfcDisk{flat: d.flat, capacity: capacityOf(d.vd)}
			}
		}
		return nil
	})
	if err != nil || target == nil {
		http.NotFound(w, r)
		return
	}
	if err := decodeStream(r.Body, *target); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	l.nfcPuts++
	l.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func decodeStream(r io.Reader, d nfcDisk) error {
	sr, err := vmdk.NewStreamReader(r)
	if err != nil {
		return err
	}
	if sr.Capacity() > d.capacity {
		return fmt.Errorf("stream of %d bytes for a %d-byte disk", sr.Capacity(), d.capacity)
	}
	f, err := os.OpenFile(d.flat, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(d.capacity); err != nil {
		return err
	}
	for {
		off, data, err := sr.Next()
		if err == io.EOF {
			return f.Close()
		}
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(data, off); err != nil {
			return err
		}
	}
}

// NFCPuts counts streamOptimized NFC uploads written into flat files.
func (l *Lab) NFCPuts() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nfcPuts
}
