package vsphere

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

func TestParseContentRange(t *testing.T) {
	cases := []struct {
		in         string
		start, end int64
		ok         bool
	}{
		{"bytes 8-23/1048576", 8, 23, true},
		{"bytes 0-0/1", 0, 0, true},
		{"bytes 5-9/*", 5, 9, true},
		{"bytes 9-5/10", 0, 0, false},
		{"bytes -5/10", 0, 0, false},
		{"items 0-1/2", 0, 0, false},
		{"bytes 0-x/2", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tc := range cases {
		s, e, err := parseContentRange(tc.in)
		if (err == nil) != tc.ok || s != tc.start || e != tc.end {
			t.Errorf("parseContentRange(%q) = %d, %d, %v", tc.in, s, e, err)
		}
	}
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 8-23/1048576", "bytes 0-0/*", "bytes 1-", "bytes 99999999999999999999-1/2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, b, err := parseContentRange(s)
		if err == nil && (a < 0 || b < a) {
			t.Fatalf("accepted %q as %d-%d", s, a, b)
		}
	})
}

func TestChangeIDParts(t *testing.T) {
	id := "52 3c 4b 16 7a 28 20 5e-d9 24 6e 33 5b 73 0b 2d/12"
	if changeIDEpoch(id) != "52 3c 4b 16 7a 28 20 5e-d9 24 6e 33 5b 73 0b 2d" || seqOf(id) != 12 {
		t.Errorf("epoch %q seq %d", changeIDEpoch(id), seqOf(id))
	}
	if seqOf("*") != 0 || changeIDEpoch("*") != "*" {
		t.Error("'*' parsed as a change id")
	}
}

func TestTransientClassification(t *testing.T) {
	soapFault := func(f types.BaseMethodFault) error {
		return soap.WrapSoapFault(&soap.Fault{Code: "ServerFaultCode", Detail: struct {
			//lint:ignore SA5008 govmomi's vim25/xml fork defines the typeattr option
			Fault types.AnyType `xml:",any,typeattr"`
		}{Fault: f}})
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"net error", &net.OpError{Op: "dial", Err: errors.New("refused")}, true},
		{"attempt timeout", context.DeadlineExceeded, true},
		{"canceled", context.Canceled, false},
		{"503", &httpStatusError{code: 503}, true},
		{"404", &httpStatusError{code: 404}, false},
		{"SystemError fault", soapFault(&types.SystemError{}), true},
		{"TaskInProgress fault", soapFault(&types.TaskInProgress{}), true},
		{"InvalidArgument fault", soapFault(&types.InvalidArgument{}), false},
		{"plain error", errors.New("boom"), false},
	}
	for _, tc := range cases {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMapFault(t *testing.T) {
	taskErr := func(f types.BaseMethodFault) error {
		return task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: f}}
	}
	cases := []struct {
		err  error
		want error
	}{
		{taskErr(&types.ToolsUnavailable{}), ErrToolsUnavailable},
		{taskErr(&types.ApplicationQuiesceFault{}), ErrQuiesceFailed},
		{taskErr(&types.ManagedObjectNotFound{}), ErrNotFound},
		{taskErr(&types.InvalidLogin{}), ErrLogin},
	}
	for _, tc := range cases {
		if got := mapFault("op", tc.err); !errors.Is(got, tc.want) {
			t.Errorf("mapFault(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if got := snapshotError(VMRef{Name: "vm"}, taskErr(&types.FileFault{})); !errors.Is(got, ErrSnapshotFailed) {
		t.Errorf("snapshotError(FileFault) = %v", got)
	}
}

func TestDisksFromFlagsUnsupported(t *testing.T) {
	ctl := &types.ParaVirtualSCSIController{VirtualSCSIController: types.VirtualSCSIController{VirtualController: types.VirtualController{VirtualDevice: types.VirtualDevice{Key: 1000}, BusNumber: 1}}}
	unit := int32(3)
	disk := func(key int32, b types.BaseVirtualDeviceBackingInfo) *types.VirtualDisk {
		return &types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: key, ControllerKey: 1000, UnitNumber: &unit, Backing: b}, CapacityInBytes: 1 << 30}
	}
	flat := func(mode string) *types.VirtualDiskFlatVer2BackingInfo {
		return &types.VirtualDiskFlatVer2BackingInfo{VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: "[ds1] vm/vm.vmdk"}, DiskMode: mode, ThinProvisioned: types.NewBool(true)}
	}
	enc := flat("persistent")
	enc.KeyId = &types.CryptoKeyId{KeyId: "k"}
	shared := flat("persistent")
	shared.Sharing = string(types.VirtualDiskSharingSharingMultiWriter)
	delta := flat("persistent")
	delta.FileName = "[ds1] vm/vm-000002.vmdk"
	delta.Parent = flat("persistent")
	delta.Parent.FileName = "[ds1] vm/vm-000001.vmdk"
	delta.Parent.Parent = flat("persistent")
	devs := []types.BaseVirtualDevice{ctl,
		disk(1, flat("persistent")),
		disk(2, flat("independent_persistent")),
		disk(3, &types.VirtualDiskRawDiskMappingVer1BackingInfo{VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: "[ds1] vm/rdm.vmdk"}, CompatibilityMode: "physicalMode"}),
		disk(4, &types.VirtualDiskRawDiskMappingVer1BackingInfo{VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: "[ds1] vm/rdmv.vmdk"}, CompatibilityMode: "virtualMode", DiskMode: "persistent"}),
		disk(5, enc),
		disk(6, shared),
		disk(7, delta),
		disk(8, &types.VirtualDiskPartitionedRawDiskVer2BackingInfo{}),
	}
	ds := disksFrom(devs, false)
	if len(ds) != 8 {
		t.Fatalf("disks = %d", len(ds))
	}
	want := map[int32]string{1: "", 2: "independent", 3: "physical-mode RDM", 4: "", 5: "encrypted", 6: "multi-writer", 7: "", 8: "not supported"}
	for _, d := range ds {
		w := want[d.Key]
		if (w == "") != (d.Unsupported == "") || w != "" && !contains(d.Unsupported, w) {
			t.Errorf("disk %d unsupported = %q, want %q", d.Key, d.Unsupported, w)
		}
	}
	if d := ds[0]; d.ControllerType != "scsi" || d.Bus != 1 || d.Unit != 3 || !d.Thin || d.Datastore != "ds1" || d.CapacityBytes != 1<<30 {
		t.Errorf("disk 1 = %+v", d)
	}
	if d := ds[6]; d.ChainDepth != 2 || d.BaseFileName != "[ds1] vm/vm.vmdk" {
		t.Errorf("delta chain: depth %d base %q", d.ChainDepth, d.BaseFileName)
	}
	if ds[1].Independent != true || ds[2].RDM != "physicalMode" {
		t.Errorf("flags: %+v %+v", ds[1], ds[2])
	}
}

func contains(s, sub string) bool {
	return strings.Contains(s, sub)
}

func TestParseURL(t *testing.T) {
	cases := map[string]string{
		"vc.example.com":             "https://vc.example.com/sdk",
		"https://u:p@vc:443":         "https://vc:443/sdk",
		"https://vc.example.com/sdk": "https://vc.example.com/sdk",
		"http://127.0.0.1:8989/sdk":  "http://127.0.0.1:8989/sdk",
	}
	for in, want := range cases {
		u, err := parseURL(in)
		if err != nil || u.String() != want {
			t.Errorf("parseURL(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	for _, bad := range []string{"", "https://", "://x"} {
		if _, err := parseURL(bad); err == nil {
			t.Errorf("parseURL(%q) accepted", bad)
		}
	}
}

func TestEndsFile(t *testing.T) {
	cases := []struct {
		cr   string
		end  int64
		want bool
	}{
		{"bytes 0-99/100", 99, true},
		{"bytes 0-49/100", 49, false},
		{"bytes 0-49/*", 49, false},
		{"bytes 0-49", 49, false},
	}
	for _, tc := range cases {
		if got := endsFile(tc.cr, tc.end); got != tc.want {
			t.Errorf("endsFile(%q) = %v", tc.cr, got)
		}
	}
}

func TestNormalizeThumbprint(t *testing.T) {
	for in, want := range map[string]string{
		"ab:cd:ef": "AB:CD:EF",
		" ABCDEF ": "AB:CD:EF",
		"ab cd ef": "AB:CD:EF",
		"AB:CD:EF": "AB:CD:EF",
		"abc":      "ABC",
	} {
		if got := normalizeThumbprint(in); got != want {
			t.Errorf("normalizeThumbprint(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWrappedSoapFaultClassified: a SOAP fault wrapped with context (as
// CreateSnapshot returns it) is still seen: a SystemError is transient, a
// FileFault is not. Before the fix faultOf saw only a bare SOAP fault, so
// the backup engine never retried a snapshot that failed transiently.
func TestWrappedSoapFaultClassified(t *testing.T) {
	wrap := func(f types.BaseMethodFault) error {
		sf := &soap.Fault{Code: "ServerFaultCode", String: "injected"}
		sf.Detail.Fault = f
		return fmt.Errorf("%w: %w", ErrSnapshotFailed, fmt.Errorf("snapshot vm: %w", soap.WrapSoapFault(sf)))
	}
	if err := wrap(&types.SystemError{Reason: "reset"}); !IsTransient(err) {
		t.Errorf("wrapped SystemError not transient: %v", err)
	}
	if err := wrap(&types.FileFault{File: "x"}); IsTransient(err) {
		t.Errorf("wrapped FileFault transient: %v", err)
	}
	if f := faultOf(wrap(&types.ToolsUnavailable{})); f == nil {
		t.Error("wrapped ToolsUnavailable: no fault found")
	} else if _, ok := f.(*types.ToolsUnavailable); !ok {
		t.Errorf("wrapped ToolsUnavailable: got %T", f)
	}
}
