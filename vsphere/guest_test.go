package vsphere

import "testing"

// TestGuestAlive: the heartbeat decides when vCenter reports one; only a
// vCenter that reports none falls back to Tools running; a VM that is not
// powered on is never alive.
func TestGuestAlive(t *testing.T) {
	for _, tc := range []struct {
		g    GuestStatus
		want bool
	}{
		{GuestStatus{PowerState: "poweredOn", Heartbeat: "green"}, true},
		{GuestStatus{PowerState: "poweredOn", Heartbeat: "yellow", ToolsRunningStatus: "guestToolsRunning"}, false},
		{GuestStatus{PowerState: "poweredOn", Heartbeat: "gray", ToolsRunningStatus: "guestToolsRunning"}, false},
		{GuestStatus{PowerState: "poweredOn", ToolsRunningStatus: "guestToolsRunning"}, true},
		{GuestStatus{PowerState: "poweredOn", ToolsRunningStatus: "guestToolsNotRunning"}, false},
		{GuestStatus{PowerState: "poweredOff", Heartbeat: "green", ToolsRunningStatus: "guestToolsRunning"}, false},
		{GuestStatus{PowerState: "suspended", Heartbeat: "green"}, false},
	} {
		if got := tc.g.Alive(); got != tc.want {
			t.Errorf("%+v: alive %v, want %v", tc.g, got, tc.want)
		}
	}
}
