package restore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// AnyNetwork is NetworkMap's key for every network no other key names.
const AnyNetwork = "*"

// VMRequest asks for a whole-VM restore. Empty placement fields take the
// original's (from the restore point's configuration) when it still exists.
type VMRequest struct {
	RestorePoint string
	// Name of the new VM; default: the original name (which must then be
	// free). Ignored with Overwrite; rehearsals get "<vm>-rehearsal-<time>".
	Name       string
	Datacenter string
	Folder     string // VM folder inventory path
	// At most one of Host, Cluster and ResourcePool (names or inventory
	// paths).
	Host, Cluster, ResourcePool string
	// Datastore for the VM's files and every disk; default: each disk's
	// original datastore.
	Datastore string
	// DiskDatastores overrides Datastore per restore point disk index.
	DiskDatastores map[int]string
	// NetworkMap maps a source network name to a target network; unmapped
	// networks keep their name. The key AnyNetwork maps every network no
	// other key names (verification puts every NIC on one isolated port
	// group without knowing the point's networks).
	NetworkMap map[string]string
	// Thin makes every disk thin; otherwise each keeps its provisioning.
	Thin    bool
	PowerOn bool
	// Overwrite writes the restore point over the original VM's disks. The
	// VM must be powered off unless PowerOff allows the restore to do it.
	Overwrite bool
	PowerOff  bool
	// Rehearsal restores a copy named "<vm>-rehearsal-<time>" with every NIC
	// disconnected.
	Rehearsal bool
	// Transport writes a new VM's disks: TransportPUT (default: create the
	// VM, then one datastore PUT of each whole flat file, zeros streamed) or
	// TransportNFC (an NFC import of streamOptimized VMDKs: zero grains are
	// not sent, data is compressed; works where the datastore file service
	// does not, e.g. vSAN). Restores over the original always use PUT.
	Transport string
	Progress  func(Progress)

	// existing (instant recovery) maps disk indexes to files to attach
	// instead of disks to create; isolated disconnects every NIC.
	existing map[int]string
	isolated bool
	// identity keeps the original's BIOS UUID and MACs (and its instance
	// UUID when the original is gone).
	identity, originalGone bool
}

// Transports of VMRequest.Transport.
const (
	TransportPUT = "put"
	TransportNFC = "nfc"
)

// RehearsalMarker starts the notes of every rehearsal VM; CleanupRehearsals
// only removes VMs that carry it.
const RehearsalMarker = "vmvault-rehearsal"

// rehearsalTimeFormat is the <time> of rehearsal names (UTC, sortable, no
// characters vSphere would escape).
const rehearsalTimeFormat = "20060102T150405Z"

// plan is a validated VM restore: everything resolved, nothing changed yet.
type plan struct {
	point    repository.Point
	cfg      *vmconfig.VMConfig
	spec     vsphere.VMSpec
	diskIdx  []int // restore point disk index of spec.Disks[i]
	warnings []string
}

// RestoreVM restores a whole VM: to a new VM, as a rehearsal, or over the
// original. Validation runs first and changes nothing when it fails; a
// failure or cancellation after that removes the VM it created (a new VM or
// rehearsal). Over the original nothing is removed: the error says which
// disks were already overwritten.
func (e *Engine) RestoreVM(ctx context.Context, req VMRequest) (Result, error) {
	start := time.Now()
	report := func(p Progress) {
		if req.Progress != nil {
			req.Progress(p)
		}
	}
	report(Progress{Phase: "validate"})
	if req.Overwrite && req.Rehearsal {
		return Result{}, fmt.Errorf("%w: overwrite and rehearsal exclude each other", ErrInvalidRequest)
	}
	switch req.Transport {
	case "", TransportPUT:
	case TransportNFC:
		if req.Overwrite {
			return Result{}, fmt.Errorf("%w: a restore over the original writes through the datastore (PUT), not NFC", ErrInvalidRequest)
		}
	default:
		return Result{}, fmt.Errorf("%w: transport %q (want put or nfc)", ErrInvalidRequest, req.Transport)
	}
	if e.vc == nil {
		return Result{}, fmt.Errorf("%w: no vCenter connection", ErrInvalidRequest)
	}
	p, cfg, err := e.loadPoint(ctx, req.RestorePoint, true)
	if err != nil {
		return Result{}, err
	}
	if req.Overwrite {
		return e.overwrite(ctx, req, p, cfg, start)
	}
	pl, err := e.planNew(ctx, req, p, cfg)
	if err != nil {
		return Result{}, err
	}
	res := Result{Mode: "new", RestorePoint: p.ID, Warnings: pl.warnings}
	if req.Rehearsal {
		res.Mode = "rehearsal"
	}

	report(Progress{Phase: "create"})
	var vm vsphere.VM
	if req.Transport == TransportNFC {
		vm, err = e.importVM(ctx, pl, &res, report)
		if err != nil {
			res.Disks = nil
			if rerr := e.removeNamed(ctx, pl.spec.Name); rerr != nil {
				return res, fmt.Errorf("restore VM %s: %w; removing the half-made VM failed too: %v (remove it by hand)", pl.spec.Name, err, rerr)
			}
			return res, fmt.Errorf("restore VM %s: %w (the half-made VM was removed)", pl.spec.Name, err)
		}
		res.VM = vm.VMRef
	} else {
		vm, err = e.vc.CreateVM(ctx, pl.spec)
		if err != nil {
			// A failed CreateVM may still have left a VM behind (a task that
			// failed late); remove anything with our name that did not exist.
			if rerr := e.removeNamed(ctx, pl.spec.Name); rerr != nil {
				return res, fmt.Errorf("create VM %s: %w; removing what it left failed too: %v (check for a VM of that name)", pl.spec.Name, err, rerr)
			}
			return res, fmt.Errorf("create VM %s: %w (nothing was left behind)", pl.spec.Name, err)
		}
		res.VM = vm.VMRef
	}
	fail := func(err error) (Result, error) {
		report(Progress{Phase: "cleanup"})
		cctx, cancel := e.cleanupCtx(ctx)
		defer cancel()
		if derr := e.vc.DestroyVM(cctx, vm.VMRef); derr != nil {
			return res, fmt.Errorf("restore VM %s: %w; removing the half-made VM %s failed too: %v (remove it by hand)", vm.Name, err, vm.MoRef, derr)
		}
		res.VM = vsphere.VMRef{}
		return res, fmt.Errorf("restore VM %s: %w (the half-made VM was removed)", vm.Name, err)
	}
	if len(vm.Disks) != len(pl.spec.Disks) {
		return fail(fmt.Errorf("created VM has %d disks, want %d", len(vm.Disks), len(pl.spec.Disks)))
	}
	targets, err := matchDisks(vm.Disks, pl.spec)
	if err != nil {
		return fail(err)
	}
	if req.Transport == TransportNFC {
		for i := range res.Disks {
			res.Disks[i].TargetKey, res.Disks[i].Target = targets[i].Key, targets[i].FileName
		}
	} else {
		for i, idx := range pl.diskIdx {
			dres, err := e.uploadDisk(ctx, vm.VMRef, p.ID, idx, targets[i].Key, report)
			if err != nil {
				return fail(err)
			}
			dres.SourceKey, dres.Label, dres.Target = p.Disks[idx].Key, p.Disks[idx].Label, targets[i].FileName
			res.Disks = append(res.Disks, dres)
		}
	}
	if req.PowerOn {
		report(Progress{Phase: "power-on"})
		if err := e.vc.PowerOn(ctx, vm.VMRef); err != nil {
			return fail(err)
		}
		res.PoweredOn = true
	}
	if req.Rehearsal {
		res.RemoveCommand = fmt.Sprintf("appliance rehearsal cleanup [vCenter flags]   (removes every rehearsal VM; or delete VM %q in vCenter)", vm.Name)
	}
	res.finish(start)
	report(Progress{Phase: "done"})
	return res, nil
}

// matchDisks pairs the created VM's disks with the spec's, by controller
// and unit (the order vCenter lists them in is not the spec's).
func matchDisks(got []vsphere.Disk, spec vsphere.VMSpec) ([]vsphere.Disk, error) {
	out := make([]vsphere.Disk, len(spec.Disks))
	if len(spec.Controllers) == 0 {
		copy(out, got)
		return out, nil
	}
	for i, d := range spec.Disks {
		c := spec.Controllers[d.Controller]
		typ := c.Type
		if typ != "sata" && typ != "nvme" && typ != "ide" {
			typ = "scsi"
		}
		found := false
		for _, g := range got {
			if g.ControllerType == typ && g.Bus == c.Bus && g.Unit == d.Unit {
				out[i], found = g, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("created VM has no disk at %s%d:%d", typ, c.Bus, d.Unit)
		}
		if out[i].CapacityBytes < d.CapacityBytes {
			return nil, fmt.Errorf("created disk at %s%d:%d has %d bytes, want %d", typ, c.Bus, d.Unit, out[i].CapacityBytes, d.CapacityBytes)
		}
	}
	return out, nil
}

// removeNamed destroys every VM named name (clean-up after a failed
// create or import; the name was checked free before, so any such VM is
// ours).
func (e *Engine) removeNamed(ctx context.Context, name string) error {
	cctx, cancel := e.cleanupCtx(ctx)
	defer cancel()
	refs, err := e.vc.VMsNamed(cctx, name)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range refs {
		errs = append(errs, e.vc.DestroyVM(cctx, r))
	}
	return errors.Join(errs...)
}

// scsiModel is the SCSI controller model used when the configuration only
// says "scsi" (backup records the controller family, not the model).
const scsiModel = "pvscsi"

var scsiModels = map[string]bool{"pvscsi": true, "lsilogic": true, "lsilogic-sas": true, "buslogic": true}

var nicTypes = map[string]bool{"vmxnet3": true, "vmxnet2": true, "vmxnet": true, "e1000": true, "e1000e": true, "pcnet32": true, "sriov": false}

func (e *Engine) planNew(ctx context.Context, req VMRequest, p repository.Point, cfg *vmconfig.VMConfig) (*plan, error) {
	pl := &plan{point: p, cfg: cfg}
	warn := func(f string, a ...any) { pl.warnings = append(pl.warnings, fmt.Sprintf(f, a...)) }
	if p.Tags["user_snapshots"] == "true" {
		// backup records this tag when the VM carried the administrator's
		// snapshots: the point holds the state at backup time only.
		warn("VM %s had snapshots of its own when it was backed up: the restored VM has its state at backup time and no snapshot tree", cfg.Name)
	}
	inv, err := e.vc.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the vCenter inventory: %w", err)
	}
	name := req.Name
	if req.Rehearsal {
		if name == "" {
			name = cfg.Name
		}
		name = name + "-rehearsal-" + e.opts.Now().UTC().Format(rehearsalTimeFormat)
	} else if name == "" {
		name = cfg.Name
	}
	for _, v := range inv.VMs {
		if v.Name == name {
			return nil, fmt.Errorf("%w: a VM named %q exists (%s); choose another --name", ErrNameInUse, name, v.Path)
		}
	}
	dc := req.Datacenter
	if dc == "" {
		dc = cfg.Datacenter
		if !hasDatacenter(inv, dc) {
			dc = ""
		}
	} else if !hasDatacenter(inv, dc) {
		return nil, fmt.Errorf("%w: datacenter %q", ErrTargetNotFound, dc)
	}
	pool, host, err := placement(inv, req, cfg, dc)
	if err != nil {
		return nil, err
	}
	if req.Folder != "" && !hasFolder(inv, req.Folder) {
		return nil, fmt.Errorf("%w: folder %q", ErrTargetNotFound, req.Folder)
	}
	spec := vsphere.VMSpec{
		Name: name, Datacenter: dc, Folder: req.Folder, ResourcePool: pool, Host: host,
		GuestID: cfg.GuestID, NumCPU: cfg.NumCPU, MemoryMB: int64(cfg.MemoryMB), Firmware: cfg.Firmware,
		CoresPerSocket: cfg.CoresPerSocket, ExtraConfig: cfg.ExtraConfig, Annotation: cfg.Annotation,
	}
	if req.identity {
		spec.UUID = cfg.BIOSUUID
		if req.originalGone {
			// Two VMs may not share an instance UUID; the original's is
			// free only when it is gone.
			spec.InstanceUUID = cfg.InstanceUUID
		}
	}
	for _, hd := range cfg.HostDevices {
		warn("%s %q is tied to the source host and is not restored", hd.Kind, hd.Label)
	}
	if spec.CoresPerSocket > 0 && spec.NumCPU%spec.CoresPerSocket != 0 {
		warn("%d CPUs are not a multiple of %d cores per socket; using one core per socket", spec.NumCPU, spec.CoresPerSocket)
		spec.CoresPerSocket = 0
	}
	if req.Rehearsal {
		spec.Annotation = fmt.Sprintf("%s source=%s point=%s created=%s\nRestore rehearsal made by vmvault; remove with `appliance rehearsal cleanup`.",
			RehearsalMarker, cfg.Name, p.ID, e.opts.Now().UTC().Format(time.RFC3339))
	}

	// Datastores: the VM's files go with the first disk unless one is named.
	dsFor := func(idx int, orig string) string {
		if d := req.DiskDatastores[idx]; d != "" {
			return d
		}
		if req.Datastore != "" {
			return req.Datastore
		}
		return orig
	}
	ctlIndex := map[int32]int{}
	need := map[string]int64{}
	for _, d := range cfg.Disks {
		if d.Index < 0 {
			warn("disk %q (key %d) was not backed up (%s); the restored VM does not have it", d.Label, d.Key, d.Skipped)
			continue
		}
		pd := p.Disks[d.Index]
		ds := dsFor(d.Index, d.Datastore)
		attach := req.existing[d.Index] != ""
		if ds == "" && !attach {
			return nil, fmt.Errorf("%w: disk %d has no original datastore on record; name one with --datastore", ErrInvalidRequest, d.Index)
		}
		if !attach && !hasDatastore(inv, ds) {
			if req.Datastore == "" && req.DiskDatastores[d.Index] == "" {
				return nil, fmt.Errorf("%w: datastore %q of disk %d (the original's) does not exist; choose one with --datastore", ErrTargetNotFound, ds, d.Index)
			}
			return nil, fmt.Errorf("%w: datastore %q", ErrTargetNotFound, ds)
		}
		ci, ok := ctlIndex[d.ControllerKey]
		if !ok {
			typ, model := d.ControllerType, ""
			for _, c := range cfg.Controllers {
				if c.Key == d.ControllerKey && c.Type != "" {
					typ, model = c.Type, c.Model
				}
			}
			switch typ {
			case "sata", "nvme", "ide":
			case "scsi":
				if scsiModels[model] {
					typ = model
					break
				}
				typ = scsiModel
				warn("SCSI controller %d: the model is not recorded in the restore point; created %s (change it if the guest lacks the driver)", d.Bus, scsiModel)
			default:
				warn("controller %d of type %q cannot be created; its disks go on a %s controller", d.ControllerKey, typ, scsiModel)
				typ = scsiModel
			}
			ci = len(spec.Controllers)
			ctlIndex[d.ControllerKey] = ci
			spec.Controllers = append(spec.Controllers, vsphere.ControllerSpec{Type: typ, Bus: d.Bus})
		}
		if d.Mode != "" && d.Mode != "persistent" {
			warn("disk %d was %s; restored as persistent", d.Index, d.Mode)
		}
		pl.diskIdx = append(pl.diskIdx, d.Index)
		if f := req.existing[d.Index]; f != "" {
			// The disk is the export's file: nothing to create or to fit.
			spec.Disks = append(spec.Disks, vsphere.DiskSpec{CapacityBytes: pd.Capacity, Controller: ci, Unit: d.Unit, ExistingFile: f})
			continue
		}
		spec.Disks = append(spec.Disks, vsphere.DiskSpec{CapacityBytes: pd.Capacity, Thin: req.Thin || d.Thin,
			Controller: ci, Unit: d.Unit, Datastore: ds})
		// The full-file PUT writes every byte, so even a thin disk ends up
		// using its capacity.
		need[ds] += pd.Capacity
	}
	if len(pl.diskIdx) != len(p.Disks) {
		return nil, fmt.Errorf("%w: the configuration lists %d of the point's %d disks", ErrPointUnusable, len(pl.diskIdx), len(p.Disks))
	}
	if err := checkControllers(spec); err != nil {
		return nil, err
	}
	spec.Datastore = req.Datastore
	if spec.Datastore == "" && len(spec.Disks) > 0 {
		spec.Datastore = spec.Disks[0].Datastore
	}
	if spec.Datastore == "" && len(req.existing) > 0 {
		for _, d := range cfg.Disks {
			if d.Index >= 0 && d.Datastore != "" && hasDatastore(inv, d.Datastore) {
				spec.Datastore = d.Datastore
				break
			}
		}
	}
	if spec.Datastore == "" {
		if len(cfg.Datastores) == 0 || !hasDatastore(inv, cfg.Datastores[0]) {
			return nil, fmt.Errorf("%w: no datastore for the VM's files; name one with --datastore", ErrInvalidRequest)
		}
		spec.Datastore = cfg.Datastores[0]
	}
	for i := range spec.Disks {
		if spec.Disks[i].Datastore == spec.Datastore {
			spec.Disks[i].Datastore = ""
		}
	}
	for ds, n := range need {
		dsDC := dc
		if dsDC == "" {
			dsDC = datacenterOf(inv, ds)
		}
		info, err := e.vc.DatastoreInfo(ctx, dsDC, ds)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTargetNotFound, err)
		}
		if info.FreeBytes < n {
			return nil, fmt.Errorf("%w: datastore %s has %d bytes free, the disks need %d", ErrNoSpace, ds, info.FreeBytes, n)
		}
	}
	for _, n := range cfg.NICs {
		// A distributed port group may be recorded by its key; the map
		// may name it by key or by name.
		srcName := networkName(inv, n.Network)
		net := n.Network
		if m, ok := req.NetworkMap[net]; ok {
			net = m
		} else if m, ok := req.NetworkMap[srcName]; ok {
			net = m
		} else if m, ok := req.NetworkMap[AnyNetwork]; ok && net != "" {
			net = m
		}
		if net == "" {
			warn("NIC %q had no network; it is not restored", n.Label)
			continue
		}
		if !hasNetwork(inv, net) {
			return nil, fmt.Errorf("%w: network %q (for NIC %q on %q); map it with --network-map %s=TARGET", ErrTargetNotFound, net, n.Label, srcName, srcName)
		}
		net = networkName(inv, net)
		typ := n.Type
		if !nicTypes[typ] {
			warn("NIC %q of type %q cannot be created; restored as vmxnet3", n.Label, typ)
			typ = "vmxnet3"
		}
		nic := vsphere.NICSpec{Network: net, Type: typ, Disconnected: req.Rehearsal || req.isolated}
		if req.identity {
			nic.MAC = n.MAC
		}
		spec.NICs = append(spec.NICs, nic)
	}
	for src := range req.NetworkMap {
		if src == AnyNetwork {
			continue
		}
		used := false
		for _, n := range cfg.NICs {
			used = used || n.Network == src || networkName(inv, n.Network) == src
		}
		if !used {
			warn("--network-map %s: the VM had no NIC on %s", src, src)
		}
	}
	if err := e.vc.CheckVMSpec(ctx, spec); err != nil {
		if errors.Is(err, vsphere.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", ErrTargetNotFound, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	pl.spec = spec
	return pl, nil
}

// checkControllers refuses two disks at one controller unit, and SCSI unit
// 7 (the controller's own).
func checkControllers(spec vsphere.VMSpec) error {
	seen := map[[2]int32]bool{}
	for i, d := range spec.Disks {
		k := [2]int32{int32(d.Controller), d.Unit}
		if seen[k] {
			return fmt.Errorf("%w: two disks at unit %d of controller %d", ErrPointUnusable, d.Unit, d.Controller)
		}
		seen[k] = true
		c := spec.Controllers[d.Controller]
		if d.Unit < 0 || (c.Type != "sata" && c.Type != "nvme" && c.Type != "ide" && d.Unit == 7) {
			return fmt.Errorf("%w: disk %d at impossible unit %d", ErrPointUnusable, i, d.Unit)
		}
	}
	return nil
}

func placement(inv *vsphere.Inventory, req VMRequest, cfg *vmconfig.VMConfig, dc string) (pool, host string, err error) {
	n := 0
	for _, s := range []string{req.Host, req.Cluster, req.ResourcePool} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return "", "", fmt.Errorf("%w: give at most one of host, cluster and resource pool", ErrInvalidRequest)
	}
	inDC := func(p string) bool { return dc == "" || strings.HasPrefix(p, "/"+dc+"/") }
	match := func(p, name, want string) bool { return inDC(p) && (p == want || name == want) }
	switch {
	case req.Host != "":
		for _, h := range inv.Hosts {
			if match(h.Path, h.Name, req.Host) {
				return path.Dir(h.Path) + "/Resources", h.Path, nil
			}
		}
		return "", "", fmt.Errorf("%w: host %q", ErrTargetNotFound, req.Host)
	case req.Cluster != "":
		for _, c := range inv.Clusters {
			if match(c.Path, c.Name, req.Cluster) {
				return c.Path + "/Resources", "", nil
			}
		}
		return "", "", fmt.Errorf("%w: cluster %q", ErrTargetNotFound, req.Cluster)
	case req.ResourcePool != "":
		var hits []string
		for _, rp := range inv.ResourcePools {
			if match(rp.Path, rp.Name, req.ResourcePool) {
				hits = append(hits, rp.Path)
			}
		}
		switch len(hits) {
		case 0:
			return "", "", fmt.Errorf("%w: resource pool %q", ErrTargetNotFound, req.ResourcePool)
		case 1:
			return hits[0], "", nil
		}
		sort.Strings(hits)
		return "", "", fmt.Errorf("%w: resource pool %q is ambiguous (%s); give its path", ErrInvalidRequest, req.ResourcePool, strings.Join(hits, ", "))
	}
	// The original's pool when it still exists, else vCenter's default.
	for _, rp := range inv.ResourcePools {
		if cfg.ResourcePool != "" && rp.Path == cfg.ResourcePool && inDC(rp.Path) {
			return rp.Path, "", nil
		}
	}
	return "", "", nil
}

func hasDatacenter(inv *vsphere.Inventory, name string) bool {
	for _, d := range inv.Datacenters {
		if d.Name == name || d.Path == name {
			return true
		}
	}
	return false
}

func hasFolder(inv *vsphere.Inventory, p string) bool {
	for _, f := range inv.Folders {
		if f.Path == p {
			return true
		}
	}
	return false
}

func hasDatastore(inv *vsphere.Inventory, name string) bool {
	for _, d := range inv.Datastores {
		if d.Name == name {
			return true
		}
	}
	return false
}

func hasNetwork(inv *vsphere.Inventory, name string) bool {
	for _, n := range inv.Networks {
		if n.Name == name || n.MoRef == name {
			return true
		}
	}
	return false
}

// networkName turns a network's managed object id (how a distributed port
// group may be recorded) into its name; other values pass unchanged.
func networkName(inv *vsphere.Inventory, s string) string {
	for _, n := range inv.Networks {
		if n.MoRef == s {
			return n.Name
		}
	}
	return s
}

// datacenterOf is the datacenter of a datastore, from its inventory path
// ("/DC0/datastore/LocalDS_0" -> "DC0"); "" when unknown.
func datacenterOf(inv *vsphere.Inventory, ds string) string {
	for _, d := range inv.Datastores {
		if d.Name == ds {
			if parts := strings.SplitN(strings.TrimPrefix(d.Path, "/"), "/", 2); len(parts) == 2 {
				return parts[0]
			}
		}
	}
	return ""
}
