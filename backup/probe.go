package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vmvault/vmvault/vsphere"
)

// probeBytes is what a probe reads through each transport: enough to
// prove the path works (the boot sector and the first structures behind
// it), little enough to answer in a second.
const probeBytes = 1 << 20

// TransportProbe is one transport tried on one disk.
type TransportProbe struct {
	Disk      int32     `json:"disk"`
	Label     string    `json:"label,omitempty"`
	Transport Transport `json:"transport"`
	OK        bool      `json:"ok"`
	// Reason says why it failed, or what it did not test.
	Reason  string  `json:"reason,omitempty"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// ProbeResult answers "which transports can read this VM's disks".
type ProbeResult struct {
	VM       vsphere.VMRef    `json:"vm"`
	Probes   []TransportProbe `json:"probes"`
	Warnings []string         `json:"warnings,omitempty"`
	// Auto is the transport a backup with policy auto would use per disk
	// (the first one that worked, in auto's order).
	Auto map[int32]Transport `json:"auto"`
}

// ProbeTransports tries every transport on every supported disk of a VM
// before a job relies on them: it takes a crash-consistent snapshot of
// ours (removed whatever happens), reads the first MiB of each disk
// through HotAdd (when the appliance is a VM), the datastore file service
// and NFC export (whose stream is cut after the first MiB), and reports
// what worked and why not.
func (e *Engine) ProbeTransports(ctx context.Context, vmID string) (ProbeResult, error) {
	var res ProbeResult
	vm, err := e.vs.FindVM(ctx, vmID)
	if err != nil {
		return res, fmt.Errorf("find VM %s: %w", vmID, err)
	}
	res.VM = vm.VMRef
	if reason := unsupportedVM(vm); reason != "" {
		return res, fmt.Errorf("%w: %s: %s", ErrUnsupportedVM, vm.Name, reason)
	}
	if vm.Template {
		return res, fmt.Errorf("%w: %s is a template: it is read at rest, through the file service", ErrUnsupportedVM, vm.Name)
	}
	if !e.claim(vm.MoRef) {
		return res, fmt.Errorf("%w: %s", ErrBusy, vm.Name)
	}
	defer e.unclaim(vm.MoRef)
	snap, err := e.createSnapshot(ctx, vm, vsphere.SnapshotOptions{Name: "probe-" + time.Now().UTC().Format("20060102T150405.000")})
	if err != nil {
		return res, fmt.Errorf("snapshot %s for the probe: %w", vm.Name, err)
	}
	var rr Result
	defer func() {
		e.removeSnapshot(ctx, vm.VMRef, snap, &rr)
		res.Warnings = append(res.Warnings, rr.Warnings...)
	}()
	res.Auto = map[int32]Transport{}
	order := e.transportOrder(TransportAuto)
	for _, d := range snap.Disks {
		if d.Unsupported != "" {
			res.Probes = append(res.Probes, TransportProbe{Disk: d.Key, Label: d.Label, Reason: "not backed up: " + d.Unsupported})
			continue
		}
		for _, tr := range []Transport{TransportHotAdd, TransportNetwork, TransportNFC} {
			p := e.probeOne(ctx, snap, d, tr)
			res.Probes = append(res.Probes, p)
			if p.OK {
				if _, ok := res.Auto[d.Key]; !ok && contains(order, tr) {
					res.Auto[d.Key] = tr
				}
			}
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
		}
	}
	return res, nil
}

func contains(l []Transport, t Transport) bool {
	for _, x := range l {
		if x == t {
			return true
		}
	}
	return false
}

func (e *Engine) probeOne(ctx context.Context, snap *vsphere.Snapshot, d vsphere.Disk, tr Transport) TransportProbe {
	p := TransportProbe{Disk: d.Key, Label: d.Label, Transport: tr}
	start := time.Now()
	defer func() { p.Seconds = time.Since(start).Seconds() }()
	n := min(int64(probeBytes), d.CapacityBytes)
	readFrom := func(src DiskSource) {
		buf := make([]byte, n)
		got, err := src.ReadAt(buf, 0)
		p.Bytes = int64(got)
		if err != nil && !(errors.Is(err, io.EOF) && int64(got) == n) {
			p.Reason = "read: " + shortReason(err)
			return
		}
		p.OK = true
	}
	closeSrc := func(src DiskSource) {
		if c, ok := src.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil && p.OK {
				p.OK, p.Reason = false, "close (detach): "+shortReason(err)
			}
		}
	}
	switch tr {
	case TransportHotAdd:
		ha, ok := e.vs.(HotAddOpener)
		if !ok {
			p.Reason = "the appliance is not set up for HotAdd (not a VM of this vCenter, or no appliance VM configured)"
			return p
		}
		src, err := ha.HotAddDisk(ctx, snap, d.Key)
		if err != nil {
			p.Reason = "open: " + shortReason(err)
			return p
		}
		readFrom(src)
		closeSrc(src)
	case TransportNetwork:
		src, err := e.vs.OpenDisk(ctx, snap, d.Key)
		if err != nil {
			p.Reason = "open: " + shortReason(err)
			return p
		}
		readFrom(src)
		closeSrc(src)
	case TransportNFC:
		ex, ok := e.vs.(DiskExporter)
		if !ok {
			p.Reason = "this vCenter connection cannot export disks"
			return p
		}
		// The export streams the whole disk: cut it once the first MiB
		// has arrived, which proves the lease and the stream work.
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var received int64
		src, err := ex.ExportDisk(cctx, snap, d.Key, []vsphere.Extent{{Offset: 0, Length: n}}, e.opts.ExportDir, func(r int64) {
			received = r
			if r >= n {
				cancel()
			}
		})
		switch {
		case err == nil:
			readFrom(src)
			closeSrc(src)
		case received >= n && ctx.Err() == nil:
			p.OK, p.Bytes = true, received
			p.Reason = "stream cut after the first MiB (a backup through NFC reads the whole disk)"
		default:
			p.Reason = "export: " + shortReason(err)
		}
	}
	return p
}
