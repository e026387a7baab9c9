package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vmvault/vmvault/vsphere"
)

// Transport is how a job's disks are read from vSphere.
type Transport string

// Transports. Auto tries HotAdd, then network, then NFC, per disk; the
// others use that one transport and fail the disk when it cannot read it.
const (
	TransportAuto    Transport = "auto"    // HotAdd -> network -> NFC
	TransportHotAdd  Transport = "hotadd"  // attach the frozen disk to the appliance VM
	TransportNetwork Transport = "network" // HTTP range reads through the datastore file service
	TransportNFC     Transport = "nfc"     // NFC export stream (whole disk, filtered by CBT)
)

// ParseTransport validates a transport ("" is auto).
func ParseTransport(s string) (Transport, error) {
	switch Transport(s) {
	case "":
		return TransportAuto, nil
	case TransportAuto, TransportHotAdd, TransportNetwork, TransportNFC:
		return Transport(s), nil
	}
	return "", fmt.Errorf("transport %q: want auto, hotadd, network or nfc", s)
}

// ErrTransport: the job's transport cannot read the disk (HotAdd-only
// without an appliance VM, network-only for a disk the file service
// refuses, NFC-only where export is unavailable); the error says why.
var ErrTransport = errors.New("backup: the transport cannot read the disk")

// HotAddOpener is optionally implemented by a VSphere whose appliance runs
// as a VM of the vCenter: it attaches the snapshot's frozen disk to the
// appliance VM and reads it as a local block device. Closing the source
// detaches the disk. Requirements that fail give
// vsphere.ErrHotAddUnavailable.
type HotAddOpener interface {
	HotAddDisk(ctx context.Context, snap *vsphere.Snapshot, diskKey int32) (DiskSource, error)
}

// ReaderHotAdd is the reader of a disk read through HotAdd (the network
// transport's reader is ReaderDatastore).
const ReaderHotAdd = "hotadd"

// tagTransportReason records, per disk, why the disk was not read by the
// first transport of the policy ("hotadd: … -> network").
const tagTransportReason = "disk.%d.transport_reason"

// tagTransport records the job's transport policy.
const tagTransport = "transport"

// transportOrder is the transports to try for a policy. Auto leaves HotAdd
// out when the engine has no HotAddOpener (the appliance is not a VM):
// there is nothing to fall back from.
func (e *Engine) transportOrder(t Transport) []Transport {
	switch t {
	case TransportHotAdd, TransportNetwork, TransportNFC:
		return []Transport{t}
	}
	var out []Transport
	if _, ok := e.vs.(HotAddOpener); ok {
		out = append(out, TransportHotAdd)
	}
	return append(out, TransportNetwork, TransportNFC)
}

// sourceError marks an error the disk source (not the repository)
// returned, so the engine may try the next transport.
type sourceError struct{ err error }

func (s *sourceError) Error() string { return s.err.Error() }
func (s *sourceError) Unwrap() error { return s.err }

// markedSource wraps a source's read errors in sourceError and keeps its
// Close error for the disk's warnings (a HotAdd detach that failed).
type markedSource struct {
	DiskSource
	closeErr *error
}

func (m markedSource) ReadAt(p []byte, off int64) (int, error) {
	n, err := m.DiskSource.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &sourceError{err}
	}
	return n, err
}

func (m markedSource) Close() error {
	c, ok := m.DiskSource.(interface{ Close() error })
	if !ok {
		return nil
	}
	err := c.Close()
	if err != nil && m.closeErr != nil {
		*m.closeErr = err
	}
	return err
}

// shortReason is the first line of an error, bounded, for a point's tag.
func shortReason(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
