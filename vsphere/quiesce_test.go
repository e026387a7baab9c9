package vsphere

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"
)

func TestQuiesceSpec(t *testing.T) {
	tests := []struct {
		name   string
		opts   SnapshotOptions
		family string
		want   string // "" for no spec
	}{
		{"no quiesce", SnapshotOptions{}, "windowsGuest", ""},
		{"linux", SnapshotOptions{Quiesce: true}, "linuxGuest", "plain 15"},
		{"linux with writers", SnapshotOptions{Quiesce: true, Writers: true, VSSBackupType: VSSFull}, "linuxGuest", "plain 15"},
		{"unknown family", SnapshotOptions{Quiesce: true, Writers: true}, "", "plain 15"},
		{"windows file systems", SnapshotOptions{Quiesce: true}, "windowsGuest", "vss 15 ctx_file_share_backup 5 false false"},
		// FULL without writers would promise a truncation nothing does.
		{"windows file systems, full asked", SnapshotOptions{Quiesce: true, VSSBackupType: VSSFull}, "windowsGuest", "vss 15 ctx_file_share_backup 5 false false"},
		{"windows writers", SnapshotOptions{Quiesce: true, Writers: true}, "windowsGuest", "vss 15 ctx_backup 5 true false"},
		{"windows writers full", SnapshotOptions{Quiesce: true, Writers: true, VSSBackupType: VSSFull}, "windowsGuest", "vss 15 ctx_backup 1 true false"},
		{"windows writers, bad type", SnapshotOptions{Quiesce: true, Writers: true, VSSBackupType: 3}, "windowsGuest", "vss 15 ctx_backup 5 true false"},
		{"timeout clamped low", SnapshotOptions{Quiesce: true, QuiesceTimeout: time.Minute}, "linuxGuest", "plain 5"},
		{"timeout clamped high", SnapshotOptions{Quiesce: true, QuiesceTimeout: 1000 * time.Minute}, "linuxGuest", "plain 240"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, sent := quiesceSpec(tc.opts, tc.family)
			var got string
			switch s := spec.(type) {
			case nil:
			case *types.VirtualMachineWindowsQuiesceSpec:
				got = fmt.Sprintf("vss %d %s %d %v %v", s.Timeout, s.VssBackupContext, s.VssBackupType, *s.VssBootableSystemState, *s.VssPartialFileSupport)
				if !sent.Windows || sent.VSSContext != s.VssBackupContext || sent.VSSBackupType != s.VssBackupType ||
					sent.BootableSystemState != *s.VssBootableSystemState || sent.TimeoutMinutes != s.Timeout {
					t.Errorf("sent %+v does not match the spec %s", sent, got)
				}
			case *types.VirtualMachineGuestQuiesceSpec:
				got = fmt.Sprintf("plain %d", s.Timeout)
				if sent.Windows || sent.TimeoutMinutes != s.Timeout {
					t.Errorf("sent %+v for %s", sent, got)
				}
			}
			if got != tc.want {
				t.Errorf("spec %q, want %q", got, tc.want)
			}
		})
	}
}

func TestToolsVersionString(t *testing.T) {
	for in, want := range map[string]string{"": "", "0": "", "12352": "12.2.0", "9344": "9.4.0", "10338": "10.3.2", "-1": "-1", "abc": "abc"} {
		if got := ToolsVersionString(in); got != want {
			t.Errorf("ToolsVersionString(%q) = %q, want %q", in, got, want)
		}
	}
}

// A quiesce fault's messages (the guest's own words) reach the error and
// FaultMessages; vcsim's "*types.X" placeholder does not.
func TestQuiesceFaultMessages(t *testing.T) {
	f := &types.ApplicationQuiesceFault{SnapshotFault: types.SnapshotFault{VimFault: types.VimFault{MethodFault: types.MethodFault{
		FaultMessage: []types.LocalizableMessage{{Key: "k", Message: "VSS writer failed: 0x800423f4"}, {Key: "k2", Message: "VSS writer failed: 0x800423f4"}},
	}}}}
	err := task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: f, LocalizedMessage: "An error occurred while quiescing"}}
	m := mapFault("snapshot vm1", err)
	if !errors.Is(m, ErrQuiesceFailed) || !strings.Contains(m.Error(), "0x800423f4") || !strings.Contains(m.Error(), "An error occurred while quiescing") {
		t.Errorf("mapped %v", m)
	}
	if got := FaultMessages(m); strings.Join(got, "|") != "An error occurred while quiescing|VSS writer failed: 0x800423f4" {
		t.Errorf("FaultMessages = %q", got)
	}
	placeholder := task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: &types.ToolsUnavailable{}, LocalizedMessage: "*types.ToolsUnavailable"}}
	if got := FaultMessages(placeholder); len(got) != 0 {
		t.Errorf("placeholder messages %q", got)
	}
	if got := FaultMessages(errors.New("plain")); got != nil {
		t.Errorf("no fault: %q", got)
	}
}
