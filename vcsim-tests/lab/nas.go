package lab

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
)

// NFS datastores (instant recovery). vcsim's CreateNasDatastore wants a
// local directory and never talks NFS; the lab's mounts the export for
// real with an NFS v3 client (go-nfs-client) at the address SetNFSServer
// gave, and leaves vcsim a directory of empty sparse stand-ins of the
// export's files (so that vcsim's stat of an existing disk succeeds).
// Every byte the lab's "ESXi" reads goes through NFS: power-on reads the
// start of each disk on an NFS datastore (the boot sector and the file
// system behind it), and a Storage vMotion copies every byte of such a
// disk through the export into the target datastore. RemoveDatastore,
// which vcsim lacks, refuses while a VM still has a disk there.

// BootReadBytes is what a lab power-on reads of each disk on an NFS
// datastore.
const BootReadBytes = 1 << 20

type nasMount struct {
	name   string
	dir    string
	client *rpc.Client
	target *nfsc.Target
	mu     sync.Mutex // go-nfs-client's Target is not safe for concurrent use
}

// SetNFSServer sets the address ("127.0.0.1:port") at which the lab's
// hosts reach NFS servers: a CreateNasDatastore whose remote host is that
// address's host mounts there (the lab has no portmapper on port 111).
func (l *Lab) SetNFSServer(addr string) {
	l.mu.Lock()
	l.nfsAddr = addr
	l.mu.Unlock()
}

// NASReads returns the bytes the lab read through NFS: per VM moref at
// power-on, and in total (power-ons and moves).
func (l *Lab) NASReads(moref string) (atPowerOn, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nasBoot[moref], l.nasTotal
}

// NASDatastores lists the NFS datastores the lab has mounted.
func (l *Lab) NASDatastores() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for n := range l.nas {
		out = append(out, n)
	}
	return out
}

func (l *Lab) mountNAS(spec types.HostNasVolumeSpec) (*nasMount, error) {
	name := spec.LocalPath
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return nil, fmt.Errorf("bad datastore name %q", name)
	}
	l.mu.Lock()
	addr := l.nfsAddr
	if l.nasRoot == "" {
		d, err := os.MkdirTemp("", "lab-nas-")
		if err != nil {
			l.mu.Unlock()
			return nil, err
		}
		l.nasRoot = d
	}
	root := l.nasRoot
	_, dup := l.nas[name]
	l.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("datastore %s is mounted already", name)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != spec.RemoteHost {
		return nil, fmt.Errorf("NFS server %s is not reachable from the lab's hosts (SetNFSServer %q)", spec.RemoteHost, addr)
	}
	p, _ := strconv.Atoi(port)
	c, err := nfsc.DialServiceAtPort(host, p)
	if err != nil {
		return nil, fmt.Errorf("NFS mount %s:%s: %w", spec.RemoteHost, spec.RemotePath, err)
	}
	m := &nfsc.Mount{Client: c}
	target, err := m.Mount(spec.RemotePath, rpc.NewAuthUnix("esxi-lab", 0, 0).Auth())
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("NFS mount %s:%s: %w", spec.RemoteHost, spec.RemotePath, err)
	}
	n := &nasMount{name: name, dir: filepath.Join(root, name), client: c, target: target}
	ents, err := target.ReadDirPlus("/")
	if err == nil {
		err = os.MkdirAll(n.dir, 0o700)
	}
	for _, e := range ents {
		if err != nil {
			break
		}
		if e.Name() == "." || e.Name() == ".." || e.IsDir() {
			continue
		}
		var f *os.File
		if f, err = os.Create(filepath.Join(n.dir, e.Name())); err == nil {
			err = f.Truncate(e.Size())
			f.Close()
		}
	}
	if err != nil {
		n.close()
		return nil, fmt.Errorf("NFS mount %s:%s: list: %w", spec.RemoteHost, spec.RemotePath, err)
	}
	l.mu.Lock()
	if l.nas == nil {
		l.nas = map[string]*nasMount{}
	}
	l.nas[name] = n
	l.mu.Unlock()
	return n, nil
}

func (n *nasMount) close() {
	n.client.Close()
	os.RemoveAll(n.dir)
}

// read reads a file of the export through NFS (ReadAt in 1 MiB requests).
func (n *nasMount) read(name string, off, size int64, w io.Writer) (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := n.target.Open(name)
	if err != nil {
		return 0, fmt.Errorf("open %s on %s: %w", name, n.name, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var done int64
	for done < size {
		k := min(int64(len(buf)), size-done)
		got, err := f.ReadAt(buf[:k], off+done)
		if got > 0 {
			if _, werr := w.Write(buf[:got]); werr != nil {
				return done, werr
			}
			done += int64(got)
		}
		if err != nil {
			if errors.Is(err, io.EOF) && done >= size {
				break
			}
			if errors.Is(err, io.EOF) {
				return done, nil
			}
			return done, fmt.Errorf("read %s on %s at %d: %w", name, n.name, off+done, err)
		}
		if got == 0 {
			break
		}
	}
	return done, nil
}

func (n *nasMount) size(name string) (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fi, _, err := n.target.Lookup(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (l *Lab) nasOf(ds string) *nasMount {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nas[ds]
}

func (l *Lab) closeNAS() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.nas {
		n.close()
	}
	l.nas = nil
	if l.nasRoot != "" {
		os.RemoveAll(l.nasRoot)
	}
}

// flatOf is the extent of a monolithicFlat descriptor "x.vmdk": "x-flat.vmdk".
func flatOf(desc string) string { return strings.TrimSuffix(desc, ".vmdk") + "-flat.vmdk" }

// labDSS wraps a host's datastore system.
type labDSS struct {
	*simulator.HostDatastoreSystem
	lab *Lab
}

func (w *labDSS) CreateNasDatastore(ctx *simulator.Context, req *types.CreateNasDatastore) soap.HasFault {
	body := &methods.CreateNasDatastoreBody{}
	n, err := w.lab.mountNAS(req.Spec)
	if err != nil {
		body.Fault_ = simulator.Fault(err.Error(), &types.PlatformConfigFault{Text: err.Error()})
		return body
	}
	spec := req.Spec
	spec.LocalPath = n.dir
	res := w.HostDatastoreSystem.CreateNasDatastore(ctx, &types.CreateNasDatastore{This: req.This, Spec: spec})
	if res.Fault() != nil {
		w.lab.mu.Lock()
		delete(w.lab.nas, n.name)
		w.lab.mu.Unlock()
		n.close()
	}
	return res
}

// RemoveDatastore is missing from vcsim. Like ESXi, it refuses while a VM
// has a disk or its files there.
func (w *labDSS) RemoveDatastore(ctx *simulator.Context, req *types.RemoveDatastore) soap.HasFault {
	body := &methods.RemoveDatastoreBody{}
	ds, ok := ctx.Map.Get(req.Datastore).(*simulator.Datastore)
	if !ok {
		body.Fault_ = simulator.Fault("", &types.ManagedObjectNotFound{Obj: req.Datastore})
		return body
	}
	prefix := "[" + ds.Name + "]"
	for _, ref := range ctx.Map.All("VirtualMachine") {
		vm, ok := ctx.Map.Get(ref.Reference()).(*simulator.VirtualMachine)
		if !ok || vm.Config == nil {
			continue
		}
		inUse := strings.HasPrefix(vm.Config.Files.VmPathName, prefix)
		for _, d := range vm.Config.Hardware.Device {
			if vd, ok := d.(*types.VirtualDisk); ok {
				if b, ok := vd.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok && strings.HasPrefix(b.GetVirtualDeviceFileBackingInfo().FileName, prefix) {
					inUse = true
				}
			}
		}
		if inUse {
			body.Fault_ = simulator.Fault(fmt.Sprintf("datastore %s is in use by VM %s", ds.Name, vm.Name), &types.ResourceInUse{Type: "Datastore", Name: ds.Name})
			return body
		}
	}
	// vcsim keeps a moved VM in the source datastore's vm list (its
	// RelocateVM removes the target's entry instead), and detached or moved
	// disks in the VMs' file layouts: nothing above uses the datastore, so
	// both are stale; left, vcsim's next reconfigure of such a VM would
	// look the gone datastore up and panic.
	ds.Vm = nil
	for _, ref := range ctx.Map.All("VirtualMachine") {
		vm, ok := ctx.Map.Get(ref.Reference()).(*simulator.VirtualMachine)
		if !ok {
			continue
		}
		ctx.WithLock(vm, func() {
			if vm.LayoutEx != nil {
				var keep []types.VirtualMachineFileLayoutExFileInfo
				for _, f := range vm.LayoutEx.File {
					if !strings.HasPrefix(f.Name, prefix) {
						keep = append(keep, f)
					}
				}
				vm.LayoutEx.File = keep
			}
			var dss []types.ManagedObjectReference
			for _, d := range vm.Datastore {
				if d != ds.Self {
					dss = append(dss, d)
				}
			}
			vm.Datastore = dss
		})
	}
	tref := ds.DestroyTask(ctx, &types.Destroy_Task{This: ds.Self}).(*methods.Destroy_TaskBody).Res.Returnval
	if t, ok := ctx.Map.Get(tref).(*simulator.Task); ok {
		t.Wait()
		if t.Info.Error != nil {
			body.Fault_ = simulator.Fault(t.Info.Error.LocalizedMessage, t.Info.Error.Fault)
			return body
		}
	}
	var keep []types.ManagedObjectReference
	for _, r := range w.HostDatastoreSystem.Datastore {
		if r != ds.Self {
			keep = append(keep, r)
		}
	}
	w.HostDatastoreSystem.Datastore = keep
	w.lab.mu.Lock()
	n := w.lab.nas[ds.Name]
	delete(w.lab.nas, ds.Name)
	w.lab.mu.Unlock()
	if n != nil {
		n.close()
	}
	body.Res = &types.RemoveDatastoreResponse{}
	return body
}

// nasDisks lists a VM's disks on the lab's NFS datastores.
func (l *Lab) nasDisks(vm *simulator.VirtualMachine) (out []nasDisk) {
	for _, d := range vm.Config.Hardware.Device {
		vd, ok := d.(*types.VirtualDisk)
		if !ok {
			continue
		}
		b, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		if !ok {
			continue
		}
		var p object.DatastorePath
		if !p.FromString(b.FileName) {
			continue
		}
		if n := l.nasOf(p.Datastore); n != nil {
			out = append(out, nasDisk{disk: vd, backing: b, mount: n, file: p.Path})
		}
	}
	return out
}

type nasDisk struct {
	disk    *types.VirtualDisk
	backing *types.VirtualDiskFlatVer2BackingInfo
	mount   *nasMount
	file    string
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// NFSGuest is how the guest of a VM powered on from an NFS datastore
// behaves once it booted, as the lab shows it (SetNFSGuest).
type NFSGuest struct {
	// ToolsRunning: VMware Tools start, so the heartbeat turns green;
	// otherwise Tools stay not running and the heartbeat gray.
	ToolsRunning bool
	// IP is the guest.ipAddress Tools report (with ToolsRunning); tests
	// that probe services give the address of a local listener.
	IP string
}

// SetNFSGuest sets what the guest of every VM powered on from an NFS
// datastore shows from its power-on on (instant recovery's VMs, which
// vcsim creates with Tools not running); nil: vcsim's defaults (Tools not
// running, no heartbeat, no address).
func (l *Lab) SetNFSGuest(g *NFSGuest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g == nil {
		l.nasGuest = nil
		return
	}
	c := *g
	l.nasGuest = &c
}

// bootGuest gives a VM's guest the state SetNFSGuest asked for.
func (l *Lab) bootGuest(ctx *simulator.Context, vm *simulator.VirtualMachine) {
	l.mu.Lock()
	g := l.nasGuest
	l.mu.Unlock()
	if g == nil {
		return
	}
	st, ts, hb, ip := types.VirtualMachineToolsRunningStatusGuestToolsNotRunning, types.VirtualMachineToolsStatusToolsNotRunning, types.ManagedEntityStatusGray, ""
	if g.ToolsRunning {
		st, ts, hb, ip = types.VirtualMachineToolsRunningStatusGuestToolsRunning, types.VirtualMachineToolsStatusToolsOk, types.ManagedEntityStatusGreen, g.IP
	}
	ctx.Update(vm, []types.PropertyChange{
		{Name: "guest.toolsRunningStatus", Val: string(st)},
		{Name: "guest.toolsStatus", Val: ts},
		{Name: "guest.ipAddress", Val: ip},
		{Name: "guestHeartbeatStatus", Val: hb},
		{Name: "summary.quickStats.guestHeartbeatStatus", Val: hb},
	})
}

// PowerOnVMTask reads the start of every disk the VM has on an NFS
// datastore through NFS first, as a booting guest would; an unreadable
// disk fails the power-on as ESXi does ("cannot open the disk").
func (w *labVM) PowerOnVMTask(ctx *simulator.Context, req *types.PowerOnVM_Task) soap.HasFault {
	for _, d := range w.lab.nasDisks(w.VirtualMachine) {
		var cw countWriter
		_, err := d.mount.read(flatOf(d.file), 0, BootReadBytes, &cw)
		w.lab.mu.Lock()
		if w.lab.nasBoot == nil {
			w.lab.nasBoot = map[string]int64{}
		}
		w.lab.nasBoot[w.Self.Value] += cw.n
		w.lab.nasTotal += cw.n
		w.lab.mu.Unlock()
		if err != nil || cw.n == 0 {
			msg := fmt.Sprintf("Cannot open the disk '%s': %v", d.backing.FileName, err)
			return &methods.PowerOnVM_TaskBody{Res: &types.PowerOnVM_TaskResponse{
				Returnval: failedTask(ctx, w.VirtualMachine, "powerOn", &types.FileNotFound{FileFault: types.FileFault{File: d.backing.FileName, VimFault: types.VimFault{MethodFault: types.MethodFault{FaultMessage: []types.LocalizableMessage{{Message: msg}}}}}})}}
		}
	}
	if len(w.lab.nasDisks(w.VirtualMachine)) > 0 && w.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		// Before the power-on task runs (it updates the VM in its own
		// goroutine): the guest "boots" as the power-on completes.
		w.lab.bootGuest(ctx, w.VirtualMachine)
	}
	return w.VirtualMachine.PowerOnVMTask(ctx, req)
}

// RelocateVMTask copies every disk the VM has on an NFS datastore through
// NFS into the target datastore (vcsim moves nothing) and points the disk
// there, then lets vcsim move the rest.
func (w *labVM) RelocateVMTask(ctx *simulator.Context, req *types.RelocateVM_Task) soap.HasFault {
	fail := func(f types.BaseMethodFault) soap.HasFault {
		return &methods.RelocateVM_TaskBody{Res: &types.RelocateVM_TaskResponse{Returnval: failedTask(ctx, w.VirtualMachine, "relocateVm", f)}}
	}
	// Where each disk goes: its locator's datastore, else the spec's.
	targetOf := func(key int32) *types.ManagedObjectReference {
		for _, l := range req.Spec.Disk {
			if l.DiskId == key {
				ref := l.Datastore
				return &ref
			}
		}
		return req.Spec.Datastore
	}
	moved := false
	disks := w.lab.nasDisks(w.VirtualMachine)
	for _, d := range disks {
		target := targetOf(d.disk.Key)
		if target == nil {
			continue
		}
		tds, ok := ctx.Map.Get(*target).(*simulator.Datastore)
		if !ok {
			return fail(&types.ManagedObjectNotFound{Obj: *target})
		}
		dir, ok := w.lab.DatastoreDir(tds.Name)
		if !ok {
			dir = tds.Info.GetDatastoreInfo().Url
		}
		vmDir := filepath.Join(dir, w.Name+"-moved-"+strconv.FormatInt(w.lab.nasSeq.Add(1), 10))
		if err := os.MkdirAll(vmDir, 0o755); err != nil {
			return fail(&types.CannotCreateFile{FileFault: types.FileFault{File: vmDir}})
		}
		flat := flatOf(d.file)
		size, err := d.mount.size(flat)
		if err == nil {
			var f *os.File
			if f, err = os.Create(filepath.Join(vmDir, filepath.Base(flat))); err == nil {
				var got int64
				got, err = d.mount.read(flat, 0, size, f)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				w.lab.mu.Lock()
				w.lab.nasTotal += got
				w.lab.mu.Unlock()
				if err == nil && got != size {
					err = fmt.Errorf("copied %d of %d bytes", got, size)
				}
			}
		}
		if err == nil {
			var desc strings.Builder
			if _, err = d.mount.read(d.file, 0, 64<<10, &desc); err == nil {
				err = os.WriteFile(filepath.Join(vmDir, filepath.Base(d.file)), []byte(desc.String()), 0o644)
			}
		}
		if err != nil {
			return fail(&types.FileFault{File: d.backing.FileName, VimFault: types.VimFault{MethodFault: types.MethodFault{FaultMessage: []types.LocalizableMessage{{Message: err.Error()}}}}})
		}
		d.backing.FileName = fmt.Sprintf("[%s] %s/%s", tds.Name, filepath.Base(vmDir), filepath.Base(d.file))
		ref := tds.Self
		d.backing.Datastore = &ref
		moved = true
	}
	if moved {
		// vcsim's relocation leaves LayoutEx listing the files it had on
		// the NFS datastores (its TODO); once they are unmounted, the next
		// reconfigure of the VM (enabling CBT to back it up, say) would look
		// the datastore up and crash vcsim.
		from := map[string]bool{}
		for _, d := range disks {
			from[d.mount.name] = true
		}
		var files []types.VirtualMachineFileLayoutExFileInfo
		for _, f := range w.LayoutEx.File {
			var p object.DatastorePath
			if p.FromString(f.Name) && from[p.Datastore] && !stillUsed(w.VirtualMachine, f.Name) {
				continue
			}
			files = append(files, f)
		}
		w.LayoutEx.File = files
		ctx.Update(w.VirtualMachine, []types.PropertyChange{{Name: "config.hardware.device", Val: w.Config.Hardware.Device}})
	}
	if req.Spec.Datastore == nil && len(req.Spec.Disk) > 0 {
		// Disks only: vcsim's relocate needs nothing more (it moves no files).
		return &methods.RelocateVM_TaskBody{Res: &types.RelocateVM_TaskResponse{Returnval: simulator.CreateTask(w.VirtualMachine, "relocateVm",
			func(*simulator.Task) (types.AnyType, types.BaseMethodFault) { return nil, nil }).Run(ctx)}}
	}
	return w.VirtualMachine.RelocateVMTask(ctx, req)
}

// stillUsed says whether a disk of the VM still has its backing (or its
// flat extent) at the datastore path name.
func stillUsed(vm *simulator.VirtualMachine, name string) bool {
	for _, d := range vm.Config.Hardware.Device {
		if vd, ok := d.(*types.VirtualDisk); ok {
			if b, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
				if b.FileName == name || flatOf(b.FileName) == name {
					return true
				}
			}
		}
	}
	return false
}

// DestroyTask and UnregisterVM drop the lab's wrapper from the caller's
// session registry once the VM is gone: vcsim's property collector looks
// there first, and a stale wrapper would keep answering for a VM vCenter
// no longer has.
func (w *labVM) DestroyTask(ctx *simulator.Context, req *types.Destroy_Task) soap.HasFault {
	res := w.VirtualMachine.DestroyTask(ctx, req)
	if body, ok := res.(*methods.Destroy_TaskBody); ok && body.Res != nil {
		if t, ok := ctx.Map.Get(body.Res.Returnval).(*simulator.Task); ok {
			t.Wait()
			if t.Info.Error == nil && ctx.Session != nil {
				ctx.Session.Registry.Remove(ctx, w.Self)
			}
		}
	}
	return res
}

func (w *labVM) UnregisterVM(ctx *simulator.Context, req *types.UnregisterVM) soap.HasFault {
	res := w.VirtualMachine.UnregisterVM(ctx, req)
	if res.Fault() == nil && ctx.Session != nil {
		ctx.Session.Registry.Remove(ctx, w.Self)
	}
	return res
}
