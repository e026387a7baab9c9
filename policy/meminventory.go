package policy

import (
	"context"
	"slices"
	"sync"
)

// MemInventory is an in-memory Inventory: the demo and unit tests use it;
// the daemon uses inventory.New over a vsphere client.
type MemInventory struct {
	mu  sync.Mutex
	vms []VM
	err error
}

// NewMemInventory returns an inventory holding vms.
func NewMemInventory(vms ...VM) *MemInventory { return &MemInventory{vms: slices.Clone(vms)} }

// Set replaces the VMs (a VM moved, retagged, created or deleted).
func (m *MemInventory) Set(vms ...VM) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vms = slices.Clone(vms)
}

// SetError makes VMs fail with err (nil clears it), to test an unreachable vCenter.
func (m *MemInventory) SetError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

// VMs returns a copy of the VMs.
func (m *MemInventory) VMs(ctx context.Context) ([]VM, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	return slices.Clone(m.vms), nil
}
