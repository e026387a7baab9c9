package daemon

// The console's vSphere-backed services (service/topology) wired into web.

import (
	"github.com/vmvault/vmvault/internal/cache"
	"github.com/vmvault/vmvault/service/topology"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/web"
)

// serveTargets holds the daemon's vSphere-backed console services.
type serveTargets struct {
	topology *topology.Topology
}

// newServeTargets returns the services over the daemon's vCenter session;
// opts go to the inventory's cache.
func newServeTargets(client *vsphere.Client, opts ...cache.Option) *serveTargets {
	return &serveTargets{topology: topology.New(client, opts...)}
}

// wire sets them in the web configuration. A nil *serveTargets (no vCenter
// connected) leaves Topology nil (503); the tester is the daemon's either way.
func (t *serveTargets) wire(w *web.Config, tester *topology.VCenterTester) {
	w.VCenter = tester
	if t == nil {
		return
	}
	w.Topology = t.topology
}
