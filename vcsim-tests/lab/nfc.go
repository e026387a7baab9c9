package lab

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/vmvault/vmvault/vmdk"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// nfcDisk is what an export lease URL serves: a flat file as streamOptimized.
type nfcDisk struct {
	flat     string
	capacity int64
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
	files := map[string]nfcDisk{}
	for _, d := range s.lab.vmDisks(s.Config.Hardware.Device) {
		fb := d.vd.Backing.(types.BaseVirtualDeviceFileBackingInfo).GetVirtualDeviceFileBackingInfo()
		files[path.Base(fb.FileName)] = nfcDisk{flat: d.flat, capacity: capacityOf(d.vd)}
	}
	s.lab.mu.Lock()
	if s.lab.leases == nil {
		s.lab.leases = map[string]map[string]nfcDisk{}
	}
	s.lab.leases[body.Res.Returnval.Value] = files
	s.lab.mu.Unlock()
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
	f, err := os.Open(d.flat)
	if err != nil {
		return err
	}
	defer f.Close()
	sw, err := vmdk.NewStreamWriter(w, d.capacity, vmdk.StreamWriterOptions{ExtentName: name})
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < d.capacity; off += int64(len(buf)) {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), d.capacity-off)], off)
		if err != nil && err != io.EOF {
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
