package backup

import (
	"context"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vsphere"
)

// ForClient is the engine the daemon and `appliance backup` both run:
// disks read from c's vCenter with vsphere's default reader options,
// points stored in r, their identities naming c's host.
func ForClient(c *vsphere.Client, r *repository.Repository, opts EngineOptions) *Engine {
	opts.VCenter = c.Host()
	return NewEngine(FromClient(c, vsphere.ReaderOptions{}), RepoStore(r), opts)
}

// ContainerLister finds the VMs under inventory containers (folders,
// clusters, hosts, ...): *vsphere.Client.
type ContainerLister interface {
	VMsIn(ctx context.Context, containers ...string) ([]vsphere.VMRef, error)
}

// Targets is what a backup of vms (names, inventory paths or ids) and of
// every VM in containers covers: vms first, then the containers' VMs by
// id, each once. The containers are asked only when there are some; their
// lookup error is returned as is.
func Targets(ctx context.Context, c ContainerLister, vms, containers []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, v := range vms {
		add(v)
	}
	if len(containers) > 0 {
		refs, err := c.VMsIn(ctx, containers...)
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			add(r.MoRef)
		}
	}
	return out, nil
}
