package lab

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	_ "github.com/vmware/govmomi/vapi/simulator" // vAPI (tags) endpoints
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Options size and configure a lab. Zero values take the defaults noted.
type Options struct {
	// Model sizes (see simulator.Model); zero keeps the VPX default:
	// 1 datacenter, 1 cluster of 3 hosts, 1 standalone host, 1 datastore,
	// 2 VMs per resource pool (4 VMs).
	Datacenters     int
	Clusters        int
	HostsPerCluster int
	StandaloneHosts int
	// StandaloneHostsNone forces zero standalone hosts (0 means default).
	StandaloneHostsNone bool
	Datastores          int
	Pools               int // child resource pools per cluster
	VMsPerPool          int
	Portgroups          int
	Folders             int

	// DiskCapacity is every VM's disk size in bytes (default 8 MiB). The flat
	// files are sparse.
	DiskCapacity int64

	// Username and Password the lab accepts (default "vmvault" / "lab-secret").
	Username, Password string

	// CBTPageSize is the most one QueryChangedDiskAreas answer covers
	// (default 1 MiB), so callers must page. CBTBlockSize is the tracking
	// granularity (default 64 KiB).
	CBTPageSize, CBTBlockSize int64

	// ExtraVMs adds that many powered-off VMs ("LAB_VM0000"…) to the first
	// cluster, created in parallel (see CreateVMs): the way to a 1,000-VM lab.
	ExtraVMs int

	// MaxRangeBytes, when set, makes the datastore file service answer a
	// Range request with at most this many bytes (a 206 for a shorter range
	// than asked), as some proxies do.
	MaxRangeBytes int64

	// ToolsNotRunning starts every VM with VMware Tools not running
	// (default: running, as on a healthy estate).
	ToolsNotRunning bool
}

func (o *Options) defaults() {
	if o.DiskCapacity <= 0 {
		o.DiskCapacity = 8 << 20
	}
	if o.Username == "" {
		o.Username = "vmvault"
	}
	if o.Password == "" {
		o.Password = "lab-secret"
	}
	if o.CBTPageSize <= 0 {
		o.CBTPageSize = 1 << 20
	}
	if o.CBTBlockSize <= 0 {
		o.CBTBlockSize = 64 << 10
	}
}

// Lab is a running vCenter simulator with vmvault's extensions.
type Lab struct {
	opts   Options
	model  *simulator.Model
	server *simulator.Server
	url    *url.URL
	lctx   *simulator.Context // the lab's own lock owner for simulator objects
	admin  *govmomi.Client
	adminK string
	dsDirs map[string]string // datastore name -> local directory

	mu        sync.Mutex
	disks     map[string]*disk    // flat path -> state
	vms       map[string]*vmState // VM moref -> state
	faults    []*ReadFault
	stalled   int64                         // GETs held by a Stall fault (StalledReads)
	leases    map[string]map[string]nfcDisk // export lease -> file name -> disk
	nfcGets   int64
	nfcPuts   int64
	imports   map[string]*simulator.HttpNfcLease
	folderGet int64
	// writeFaults and folderPut: datastore PUT faults (faults.go).
	writeFaults []*WriteFault
	folderPut   int64
	allLeases   []leaseRef // every NFC lease created (OpenLeases)
	// NFS datastores (nas.go).
	nfsAddr  string
	nasRoot  string
	nas      map[string]*nasMount
	nasBoot  map[string]int64
	nasTotal int64
	nasSeq   atomic.Int64
	// nasGuest is what a guest booted from an NFS datastore shows (SetNFSGuest).
	nasGuest *NFSGuest
	// lockRunning and lockedRefused: LockRunningExtents (hotadd.go).
	lockRunning   bool
	lockedRefused int64
	closed        chan struct{}
	closeOnce     sync.Once
}

type vmState struct {
	snapshots    int
	failQuiesce  []quiesceFault
	requests     []SnapshotRequest // every snapshot request (quiesce.go)
	failSnapshot []types.BaseMethodFault
	lostReplies  int // snapshots made whose reply is a fault (LoseSnapshotReply)
}

// Start builds the model, starts the TLS server and logs in an admin client
// (used by the lab itself, e.g. for tags).
func Start(ctx context.Context, opts Options) (*Lab, error) {
	opts.defaults()
	m := simulator.VPX()
	if opts.Datacenters > 0 {
		m.Datacenter = opts.Datacenters
	}
	if opts.Clusters > 0 {
		m.Cluster = opts.Clusters
	}
	if opts.HostsPerCluster > 0 {
		m.ClusterHost = opts.HostsPerCluster
	}
	if opts.StandaloneHosts > 0 {
		m.Host = opts.StandaloneHosts
	}
	if opts.StandaloneHostsNone {
		m.Host = 0
	}
	if opts.Datastores > 0 {
		m.Datastore = opts.Datastores
	}
	if opts.Pools > 0 {
		m.Pool = opts.Pools
	}
	if opts.VMsPerPool > 0 {
		m.Machine = opts.VMsPerPool
	}
	if opts.Portgroups > 0 {
		m.Portgroup = opts.Portgroups
	}
	if opts.Folders > 0 {
		m.Folder = opts.Folders
	}
	if err := m.Create(); err != nil {
		return nil, fmt.Errorf("lab: create model: %w", err)
	}
	l := &Lab{
		opts: opts, model: m,
		lctx:   &simulator.Context{Context: context.Background(), Map: m.Map()},
		dsDirs: map[string]string{},
		disks:  map[string]*disk{},
		vms:    map[string]*vmState{},
		closed: make(chan struct{}),
	}
	for _, e := range m.Map().All("Datastore") {
		ds := e.(*simulator.Datastore)
		l.dsDirs[ds.Name] = ds.Summary.Url
	}
	if err := l.prepareVMs(); err != nil {
		m.Remove()
		return nil, err
	}
	m.Map().Handler = l.handler

	m.Service.TLS = new(tls.Config)
	m.Service.RegisterEndpoints = true
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(opts.Username, opts.Password)}
	mux := http.NewServeMux()
	// Method patterns are more specific than vcsim's "/folder/", so GETs come
	// here first (fault injection); PUTs too (upload faults, faults.go).
	mux.HandleFunc("GET /folder/", l.serveFolderGet)
	mux.HandleFunc("PUT /folder/", l.serveFolderPut)
	mux.HandleFunc("GET /nfc/", l.serveNFCGet)
	mux.HandleFunc("PUT /nfc/", l.serveNFCPut)
	mux.HandleFunc("POST /nfc/", l.serveNFCPut)
	m.Service.ServeMux = mux
	l.server = m.Service.NewServer()
	u := *l.server.URL
	u.User = nil
	l.url = &u

	cu := u
	cu.User = url.UserPassword(opts.Username, opts.Password)
	c, err := govmomi.NewClient(ctx, &cu, true)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("lab: admin login: %w", err)
	}
	l.admin = c
	us, err := session.NewManager(c.Client).UserSession(ctx)
	if err != nil || us == nil {
		l.Close()
		return nil, fmt.Errorf("lab: admin session: %v", err)
	}
	l.adminK = us.Key
	if opts.ExtraVMs > 0 {
		if err := l.CreateVMs(ctx, opts.ExtraVMs, "LAB_VM"); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// prepareVMs sizes every disk and its sparse flat file and sets Tools state,
// before the server accepts requests (no locking needed yet).
func (l *Lab) prepareVMs() error {
	for _, e := range l.model.Map().All("VirtualMachine") {
		vm := e.(*simulator.VirtualMachine)
		for _, d := range object.VirtualDeviceList(vm.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil)) {
			vd := d.(*types.VirtualDisk)
			vd.CapacityInBytes = l.opts.DiskCapacity
			vd.CapacityInKB = l.opts.DiskCapacity / 1024
			flat, err := l.flatPath(vd)
			if err != nil {
				return err
			}
			if err := os.Truncate(flat, l.opts.DiskCapacity); err != nil {
				return fmt.Errorf("lab: size %s: %w", flat, err)
			}
		}
		if !l.opts.ToolsNotRunning {
			vm.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
			vm.Guest.ToolsStatus = types.VirtualMachineToolsStatusToolsOk
			vm.Guest.GuestState = "running"
		}
	}
	return nil
}

// Close stops the server and removes the datastore directories.
func (l *Lab) Close() {
	l.closeOnce.Do(func() {
		close(l.closed)
		if l.admin != nil {
			_ = l.admin.Logout(context.Background())
		}
		if l.server != nil {
			l.server.Close()
		}
		l.model.Remove()
		l.closeNAS()
	})
}

// URL is the SDK URL ("https://127.0.0.1:port/sdk"), without credentials.
func (l *Lab) URL() *url.URL { u := *l.url; return &u }

// Username and Password are the credentials the lab accepts.
func (l *Lab) Username() string { return l.opts.Username }

// Password is the lab's password.
func (l *Lab) Password() string { return l.opts.Password }

// Thumbprint is the SHA-256 thumbprint of the lab's self-signed certificate.
func (l *Lab) Thumbprint() string { return l.server.CertificateInfo().ThumbprintSHA256 }

// CAFile writes the lab's certificate to a PEM file and returns its path.
func (l *Lab) CAFile() (string, error) { return l.server.CertificateFile() }

// Service is the simulator service (fault rules, delays).
func (l *Lab) Service() *simulator.Service { return l.model.Service }

// Model is the simulator model.
func (l *Lab) Model() *simulator.Model { return l.model }

// Admin is a client logged in to the lab, for test set-up.
func (l *Lab) Admin() *govmomi.Client { return l.admin }

// Options are the options the lab runs with, defaults applied.
func (l *Lab) Options() Options { return l.opts }

// DatastoreDir is the local directory behind a datastore ("LocalDS_0").
func (l *Lab) DatastoreDir(name string) (string, bool) { d, ok := l.dsDirs[name]; return d, ok }

// VMNames lists the VMs, sorted.
func (l *Lab) VMNames() []string {
	var out []string
	m := l.model.Map()
	for _, e := range m.All("VirtualMachine") {
		v := e.(*simulator.VirtualMachine)
		m.WithLock(l.lctx, v, func() { out = append(out, v.Name) })
	}
	sort.Strings(out)
	return out
}

// MoRef returns a VM's managed object id ("vm-42").
func (l *Lab) MoRef(vm string) (string, error) {
	v, err := l.findVM(vm)
	if err != nil {
		return "", err
	}
	return v.Self.Value, nil
}

func (l *Lab) findVM(name string) (*simulator.VirtualMachine, error) {
	m := l.model.Map()
	if v, ok := m.Get(types.ManagedObjectReference{Type: "VirtualMachine", Value: name}).(*simulator.VirtualMachine); ok {
		return v, nil
	}
	var hit *simulator.VirtualMachine
	for _, e := range m.All("VirtualMachine") {
		v := e.(*simulator.VirtualMachine)
		var vn string
		// vcsim writes VM fields under the VM's lock (creation, renames).
		m.WithLock(l.lctx, v, func() { vn = v.Name })
		if vn == name {
			if hit != nil {
				return nil, fmt.Errorf("lab: VM name %q is ambiguous", name)
			}
			hit = v
		}
	}
	if hit == nil {
		return nil, fmt.Errorf("lab: no VM %q", name)
	}
	return hit, nil
}

// withVM runs f with the VM locked the way vcsim locks it.
func (l *Lab) withVM(name string, f func(vm *simulator.VirtualMachine) error) error {
	vm, err := l.findVM(name)
	if err != nil {
		return err
	}
	var ferr error
	l.model.Map().WithLock(l.lctx, vm, func() { ferr = f(vm) })
	return ferr
}

func (l *Lab) state(moref string) *vmState {
	s := l.vms[moref]
	if s == nil {
		s = &vmState{}
		l.vms[moref] = s
	}
	return s
}

// SetToolsRunning sets a VM's VMware Tools running status.
func (l *Lab) SetToolsRunning(vm string, running bool) error {
	return l.withVM(vm, func(v *simulator.VirtualMachine) error {
		st, ts := types.VirtualMachineToolsRunningStatusGuestToolsNotRunning, types.VirtualMachineToolsStatusToolsNotRunning
		if running {
			st, ts = types.VirtualMachineToolsRunningStatusGuestToolsRunning, types.VirtualMachineToolsStatusToolsOk
		}
		l.model.Map().Update(l.lctx, v, []types.PropertyChange{
			{Name: "guest.toolsRunningStatus", Val: string(st)},
			{Name: "guest.toolsStatus", Val: ts},
		})
		return nil
	})
}

// SetConsolidationNeeded sets runtime.consolidationNeeded, as ESXi does
// when a snapshot removal left delta disks behind (a locked file, no space).
func (l *Lab) SetConsolidationNeeded(vm string, needed bool) error {
	return l.withVM(vm, func(v *simulator.VirtualMachine) error {
		l.model.Map().Update(l.lctx, v, []types.PropertyChange{{Name: "runtime.consolidationNeeded", Val: needed}})
		return nil
	})
}

// SetGuestFamily sets guest.guestFamily ("windowsGuest", "linuxGuest").
func (l *Lab) SetGuestFamily(vm, family string) error {
	return l.withVM(vm, func(v *simulator.VirtualMachine) error {
		l.model.Map().Update(l.lctx, v, []types.PropertyChange{{Name: "guest.guestFamily", Val: family}})
		return nil
	})
}

// FailNextQuiesce makes the next n quiesced snapshots of vm fail with
// ApplicationQuiesceFault (as a task error, like ESXi).
func (l *Lab) FailNextQuiesce(vm string, n int) error {
	v, err := l.findVM(vm)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(v.Self.Value)
	for range n {
		st.failQuiesce = append(st.failQuiesce, quiesceFault{msg: DefaultQuiesceFaultMessage})
	}
	return nil
}

// FailNextSnapshot makes the next snapshot task of vm fail with fault (for
// example &types.FileFault{} or &types.TaskInProgress{}).
func (l *Lab) FailNextSnapshot(vm string, fault types.BaseMethodFault) error {
	v, err := l.findVM(vm)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(v.Self.Value)
	s.failSnapshot = append(s.failSnapshot, fault)
	return nil
}

// FailMethod injects a SOAP method fault with vcsim's fault injector: the
// next count calls of method (e.g. "RetrievePropertiesEx") fail with fault
// (nil: a SystemError, which clients treat as transient).
func (l *Lab) FailMethod(method string, fault types.BaseMethodFault, count int) {
	rule := &simulator.FaultInjectionRule{
		MethodName: method, ObjectType: "*", ObjectName: "*", Probability: 1, MaxCount: count, Enabled: true,
		FaultType: simulator.FaultTypeNetworkFailure,
	}
	if fault != nil {
		rule.FaultType, rule.Fault = simulator.FaultTypeCustom, fault
	}
	l.model.Service.AddFaultRule(rule)
}

// ClearMethodFaults removes all injected method faults.
func (l *Lab) ClearMethodFaults() { l.model.Service.ClearFaultRules() }

// ExpireSessions ends every client session opened so far (except the lab's
// own), as vCenter's idle timeout does: the next call with the old cookie
// fails with NotAuthenticated and a new Login works.
func (l *Lab) ExpireSessions(ctx context.Context) error {
	var sm mo.SessionManager
	smRef := *l.admin.Client.ServiceContent.SessionManager
	if err := property.DefaultCollector(l.admin.Client).RetrieveOne(ctx, smRef, []string{"sessionList"}, &sm); err != nil {
		return fmt.Errorf("lab: list sessions: %w", err)
	}
	for _, us := range sm.SessionList {
		if us.Key == l.adminK {
			continue
		}
		_, err := methods.TerminateSession(ctx, l.admin.Client, &types.TerminateSession{This: smRef, SessionId: []string{us.Key}})
		if err != nil && !fault.Is(err, &types.NotFound{}) {
			return fmt.Errorf("lab: expire session: %w", err)
		}
	}
	return nil
}

// TagVMs attaches tag (created in category when missing) to the VMs.
func (l *Lab) TagVMs(ctx context.Context, category, tag string, vms ...string) error {
	rc := rest.NewClient(l.admin.Client)
	if err := rc.Login(ctx, url.UserPassword(l.opts.Username, l.opts.Password)); err != nil {
		return fmt.Errorf("lab: vAPI login: %w", err)
	}
	defer rc.Logout(context.WithoutCancel(ctx))
	m := tags.NewManager(rc)
	var catID string
	if c, err := m.GetCategory(ctx, category); err == nil {
		catID = c.ID
	} else {
		id, err := m.CreateCategory(ctx, &tags.Category{Name: category, Cardinality: "MULTIPLE", AssociableTypes: []string{"VirtualMachine"}})
		if err != nil {
			return fmt.Errorf("lab: create category %s: %w", category, err)
		}
		catID = id
	}
	var tagID string
	if t, err := m.GetTagForCategory(ctx, tag, catID); err == nil {
		tagID = t.ID
	} else {
		id, err := m.CreateTag(ctx, &tags.Tag{Name: tag, CategoryID: catID})
		if err != nil {
			return fmt.Errorf("lab: create tag %s: %w", tag, err)
		}
		tagID = id
	}
	for _, name := range vms {
		v, err := l.findVM(name)
		if err != nil {
			return err
		}
		if err := m.AttachTag(ctx, tagID, v.Self); err != nil {
			return fmt.Errorf("lab: attach %s to %s: %w", tag, name, err)
		}
	}
	return nil
}

// Snapshots lists the names of a VM's snapshots (depth first).
func (l *Lab) Snapshots(vm string) ([]string, error) {
	var out []string
	err := l.withVM(vm, func(v *simulator.VirtualMachine) error {
		var walk func([]types.VirtualMachineSnapshotTree)
		walk = func(ts []types.VirtualMachineSnapshotTree) {
			for _, t := range ts {
				out = append(out, t.Name)
				walk(t.ChildSnapshotList)
			}
		}
		if v.Snapshot != nil {
			walk(v.Snapshot.RootSnapshotList)
		}
		return nil
	})
	return out, err
}

// flatPath maps a disk's backing to the local flat extent file.
func (l *Lab) flatPath(vd *types.VirtualDisk) (string, error) {
	fb, ok := vd.Backing.(types.BaseVirtualDeviceFileBackingInfo)
	if !ok {
		return "", fmt.Errorf("lab: disk %d has no file backing", vd.Key)
	}
	return l.flatOf(fb.GetVirtualDeviceFileBackingInfo().FileName)
}

func (l *Lab) flatOf(fileName string) (string, error) {
	var dp object.DatastorePath
	if !dp.FromString(fileName) {
		return "", fmt.Errorf("lab: bad datastore path %q", fileName)
	}
	dir, ok := l.dsDirs[dp.Datastore]
	if !ok {
		return "", fmt.Errorf("lab: unknown datastore %q", dp.Datastore)
	}
	return filepath.Join(dir, strings.TrimSuffix(dp.Path, ".vmdk")+"-flat.vmdk"), nil
}

// newEpoch is the UUID part of a change id, formatted like ESXi's.
func newEpoch() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var sb strings.Builder
	for i, x := range b {
		switch {
		case i == 8:
			sb.WriteByte('-')
		case i > 0:
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%02x", x)
	}
	return sb.String()
}
