package vsphere

import (
	"context"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// GuestStatus is what vCenter says of a VM's guest: whether it is powered
// on, whether VMware Tools runs and answers (the heartbeat), and the
// addresses Tools reports.
type GuestStatus struct {
	PowerState string `json:"powerState"` // poweredOn, poweredOff, suspended
	// Heartbeat is guestHeartbeatStatus: green (Tools answer), yellow
	// (intermittent), red (none), gray (Tools not installed or not
	// running), "" when vCenter did not say.
	Heartbeat string `json:"heartbeat"`
	// ToolsRunningStatus is guest.toolsRunningStatus (guestToolsRunning,
	// guestToolsNotRunning, guestToolsExecutingScripts).
	ToolsRunningStatus string `json:"toolsRunningStatus"`
	// IPAddress is guest.ipAddress, the primary address (may be empty
	// until Tools report it); IPs are every address of every NIC.
	IPAddress string   `json:"ipAddress,omitempty"`
	IPs       []string `json:"ips,omitempty"`
}

// Heartbeat statuses (types.ManagedEntityStatus).
const (
	HeartbeatGreen = string(types.ManagedEntityStatusGreen)
	HeartbeatGray  = string(types.ManagedEntityStatusGray)
)

// ToolsRunning says whether Tools run in the guest.
func (g GuestStatus) ToolsRunning() bool {
	return g.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
}

// Alive says whether the guest is up as vCenter sees it: powered on and
// its heartbeat green. A vCenter that reports no heartbeat at all (some
// simulators) counts Tools running instead.
func (g GuestStatus) Alive() bool {
	if g.PowerState != string(types.VirtualMachinePowerStatePoweredOn) {
		return false
	}
	if g.Heartbeat == "" {
		return g.ToolsRunning()
	}
	return g.Heartbeat == HeartbeatGreen
}

// GuestStatus reads a VM's power state, Tools heartbeat and guest
// addresses in one property retrieve.
func (c *Client) GuestStatus(ctx context.Context, vm VMRef) (GuestStatus, error) {
	var m mo.VirtualMachine
	props := []string{"runtime.powerState", "guestHeartbeatStatus", "guest.toolsRunningStatus", "guest.ipAddress", "guest.net"}
	if err := c.retrieveOne(ctx, vmMoRef(vm), props, &m); err != nil {
		return GuestStatus{}, mapFault("guest status of "+vmLabel(vm), err)
	}
	g := GuestStatus{PowerState: string(m.Runtime.PowerState), Heartbeat: string(m.GuestHeartbeatStatus)}
	if m.Guest != nil {
		g.ToolsRunningStatus, g.IPAddress = m.Guest.ToolsRunningStatus, m.Guest.IpAddress
		for _, n := range m.Guest.Net {
			g.IPs = append(g.IPs, n.IpAddress...)
		}
	}
	return g, nil
}
