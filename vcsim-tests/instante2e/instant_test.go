package instante2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/instant"
	"github.com/vmvault/vmvault/service/instantvm"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

const (
	host = "/DC0/host/DC0_H0/DC0_H0"
	ds0  = "LocalDS_0"
)

type env struct {
	l    *lab.Lab
	c    *vsphere.Client
	r    *repository.Repository
	rs   *repos.Set
	srv  *instant.Server
	dir  string
	img  []byte
	pt   string
	name string
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	l := labtest.Start(t, lab.Options{})
	c := labtest.Connect(t, labtest.Config(l, "instante2e"))
	r := labtest.Repo(t)
	name := "web01"
	vm, err := c.CreateVM(ctx, vsphere.VMSpec{Name: name, Datastore: ds0, Host: host, ResourcePool: "/DC0/host/DC0_H0/Resources",
		NumCPU: 2, MemoryMB: 256, GuestID: "otherLinux64Guest",
		Disks: []vsphere.DiskSpec{{CapacityBytes: 6 << 20, Thin: true}},
		NICs:  []vsphere.NICSpec{{Network: "VM Network"}}})
	if err != nil {
		t.Fatal(err)
	}
	img := make([]byte, 6<<20)
	rng := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 2<<20; i++ {
		img[i] = byte(rng.Uint32())
	}
	img[510], img[511] = 0x55, 0xaa // a boot sector's signature
	if err := l.WriteDiskFrom(vm.Name, 0, bytes.NewReader(img)); err != nil {
		t.Fatal(err)
	}
	e := backup.NewEngine(backup.FromClient(c, vsphere.ReaderOptions{}), backup.RepoStore(r),
		backup.EngineOptions{Workers: 2, RemoveBackoff: 5 * time.Millisecond, RemoveTimeout: 30 * time.Second})
	res, err := e.BackupVM(ctx, backup.Request{VM: vm.Name, Quiesce: backup.QuiescePrefer})
	if err != nil {
		t.Fatal(err)
	}
	srv := instant.NewServer(instant.ServerOptions{Listen: "127.0.0.1:0"})
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if err := srv.Start(sctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	l.SetNFSServer(srv.Addr())
	return &env{l: l, c: c, r: r, rs: repos.New(map[string]*repository.Repository{"main": r}), srv: srv, dir: t.TempDir(),
		img: img, pt: res.RestorePoint, name: name}
}

func (e *env) manager(t *testing.T) *instantvm.Manager {
	t.Helper()
	m, err := instantvm.New(instantvm.Config{Dir: e.dir, Advertise: "127.0.0.1", NoSync: true}, e.c, e.rs, e.srv)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(context.Background()); err != nil {
		t.Fatalf("resume: %v", err)
	}
	return m
}

func diskFiles(t *testing.T, e *env, moref string) []string {
	t.Helper()
	v, err := e.c.VM(context.Background(), vsphere.VMRef{MoRef: moref})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range v.Disks {
		out = append(out, d.FileName)
	}
	return out
}

// TestInstantRecoveryMigrate: start → running (the VM's disks are the
// export's, its boot sector read through NFS) → migrate (every byte
// through the export into production storage) → done (unmounted, export
// gone, the point deletable again and unchanged).
func TestInstantRecoveryMigrate(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := e.manager(t)
	var phases []string
	rec, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt[:12], Host: host, Datastore: ds0}, func(p string) { phases = append(phases, p) })
	if err != nil {
		t.Fatalf("start: %v (phases %v)", err, phases)
	}
	if rec.State != instantvm.StateRunning || rec.VM.Name != e.name+"-instant" || rec.VM.MoRef == "" {
		t.Fatalf("record %+v", rec)
	}
	files := diskFiles(t, e, rec.VM.MoRef)
	if len(files) != 1 || !strings.HasPrefix(files[0], "["+rec.NFS+"] ") {
		t.Fatalf("disks %v, want on %s", files, rec.NFS)
	}
	boot, _ := e.l.NASReads(rec.VM.MoRef)
	if boot != lab.BootReadBytes {
		t.Fatalf("power-on read %d bytes through NFS, want %d", boot, lab.BootReadBytes)
	}
	// Held: the point cannot be deleted while the VM runs from it.
	if err := e.r.Delete(ctx, e.pt); !errors.Is(err, repository.ErrPointLocked) {
		t.Fatalf("delete of a point in use: %v", err)
	}
	if got := m.List(); len(got) != 1 || got[0].ID != rec.ID {
		t.Fatalf("list %+v", got)
	}

	_, before := e.l.NASReads(rec.VM.MoRef)
	done, err := m.Migrate(ctx, rec.ID, ds0, nil)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if done.State != instantvm.StateDone {
		t.Fatalf("after migrate: %+v", done)
	}
	_, after := e.l.NASReads(rec.VM.MoRef)
	if after-before < int64(len(e.img)) {
		t.Fatalf("the move read %d bytes through NFS, want the whole %d-byte disk", after-before, len(e.img))
	}
	files = diskFiles(t, e, rec.VM.MoRef)
	if len(files) != 1 || !strings.HasPrefix(files[0], "["+ds0+"] ") {
		t.Fatalf("disks after the move %v", files)
	}
	// The moved disk holds the point's bytes.
	dir, _ := e.l.DatastoreDir(ds0)
	rel := strings.TrimPrefix(files[0], "["+ds0+"] ")
	got, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(rel, ".vmdk")+"-flat.vmdk"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, e.img) {
		t.Fatal("the moved disk differs from the backed-up one")
	}
	if n := e.l.NASDatastores(); len(n) != 0 {
		t.Fatalf("NFS datastores left mounted: %v", n)
	}
	if _, ok := e.r.InUse(e.pt); ok {
		t.Fatal("the point is still held after the session ended")
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dir, rec.ID)); len(ents) != 1 {
		t.Fatalf("session directory keeps more than its record: %v", ents)
	}
	// In production now, it backs up like any VM (CBT enabled by a
	// reconfigure, a snapshot), the NFS datastore it ran from gone.
	be := backup.NewEngine(backup.FromClient(e.c, vsphere.ReaderOptions{}), backup.RepoStore(e.r),
		backup.EngineOptions{Workers: 2, RemoveBackoff: 5 * time.Millisecond, RemoveTimeout: 30 * time.Second})
	if _, err := be.BackupVM(ctx, backup.Request{VM: rec.VM.Name, Quiesce: backup.QuiescePrefer}); err != nil {
		t.Fatalf("backup of the migrated VM: %v", err)
	}
}

// TestInstantRecoveryStopAcrossRestart: a running session survives an
// appliance restart (the same export path: the host's mount keeps
// working), then stop unregisters the VM, unmounts and drops the overlay.
func TestInstantRecoveryStopAcrossRestart(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := e.manager(t)
	rec, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, Datastore: ds0, Name: "web01-test", Isolated: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.c.VM(ctx, rec.VM)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range v.NICs {
		if n.Connected {
			t.Fatalf("isolated VM has a connected NIC: %+v", n)
		}
	}
	// "Restart": the manager goes, the NFS server stays up (a new process
	// would listen on the same configured port).
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := e.manager(t)
	got, err := m2.Get(rec.ID)
	if err != nil || got.State != instantvm.StateRunning || got.Export != rec.Export {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
	if err := e.r.Delete(ctx, e.pt); !errors.Is(err, repository.ErrPointLocked) {
		t.Fatalf("delete after restart: %v", err)
	}
	st, err := m2.Stop(ctx, rec.ID)
	if err != nil || st.State != instantvm.StateStopped {
		t.Fatalf("stop: %+v, %v", st, err)
	}
	if refs, _ := e.c.VMsNamed(ctx, "web01-test"); len(refs) != 0 {
		t.Fatalf("VM left registered: %v", refs)
	}
	if n := e.l.NASDatastores(); len(n) != 0 {
		t.Fatalf("NFS datastores left mounted: %v", n)
	}
	if _, err := m2.Stop(ctx, rec.ID); !errors.Is(err, instantvm.ErrState) {
		t.Fatalf("second stop: %v", err)
	}
	if err := e.r.Delete(ctx, e.pt); err != nil {
		t.Fatalf("delete after stop: %v", err)
	}
}

// TestInstantRecoveryFailureUndoes: a vCenter call failing at each step
// of a start leaves nothing registered or mounted, the point not held,
// and the session failed with the reason.
func TestInstantRecoveryFailureUndoes(t *testing.T) {
	for _, method := range []string{"CreateNasDatastore", "CreateVM_Task", "PowerOnVM_Task"} {
		t.Run(method, func(t *testing.T) {
			e := setup(t)
			ctx := context.Background()
			m := e.manager(t)
			e.l.FailMethod(method, &types.GenericVmConfigFault{Reason: "injected"}, 1)
			rec, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, Datastore: ds0}, nil)
			if err == nil {
				t.Fatal("start succeeded with a failing " + method)
			}
			if rec.State != instantvm.StateFailed || rec.Error == "" {
				t.Fatalf("record %+v", rec)
			}
			if refs, _ := e.c.VMsNamed(ctx, e.name+"-instant"); len(refs) != 0 {
				t.Fatalf("VM left registered: %v", refs)
			}
			if n := e.l.NASDatastores(); len(n) != 0 {
				t.Fatalf("NFS datastores left mounted: %v", n)
			}
			if _, ok := e.r.InUse(e.pt); ok {
				t.Fatal("point still held")
			}
			// The failed session is listed with its error, and a new start works.
			if got, err := m.Get(rec.ID); err != nil || got.State != instantvm.StateFailed {
				t.Fatalf("get: %+v %v", got, err)
			}
			ok, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, Datastore: ds0}, nil)
			if err != nil || ok.State != instantvm.StateRunning {
				t.Fatalf("start after the failure: %+v %v", ok, err)
			}
			if _, err := m.Stop(ctx, ok.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestInstantRecoveryKilledWhileStarting: an appliance killed between
// creating the VM and recording it (the record still says starting, with
// no VM) undoes the start when it comes back: the VM, found by its name
// and its disks on the session's datastore, is unregistered, the datastore
// unmounted, the point released.
func TestInstantRecoveryKilledWhileStarting(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := e.manager(t)
	rec, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, Datastore: ds0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Close() // the process dies; its exports with it
	path := filepath.Join(e.dir, rec.ID, "record.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	raw["state"], raw["vm"] = instantvm.StateStarting, map[string]any{}
	b, _ = json.Marshal(raw)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	m2 := e.manager(t) // Resume undoes the interrupted start
	got, err := m2.Get(rec.ID)
	if err != nil || got.State != instantvm.StateStopped {
		t.Fatalf("after resume: %+v %v", got, err)
	}
	if refs, _ := e.c.VMsNamed(ctx, e.name+"-instant"); len(refs) != 0 {
		t.Fatalf("VM left registered: %v", refs)
	}
	if n := e.l.NASDatastores(); len(n) != 0 {
		t.Fatalf("NFS datastores left mounted: %v", n)
	}
	if _, ok := e.r.InUse(e.pt); ok {
		t.Fatal("point still held")
	}
}

// TestInstantRecoveryOriginalIdentity: with the original gone, the
// recovered VM takes its name, BIOS UUID, instance UUID and MACs; with the
// original running, the request is refused and nothing is left.
func TestInstantRecoveryOriginalIdentity(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := e.manager(t)
	src, err := e.c.FindVM(ctx, e.name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.PowerOn(ctx, src.VMRef); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, Datastore: ds0, Original: true}, nil); err == nil || !strings.Contains(err.Error(), "power it off") {
		t.Fatalf("start with the original running: %v", err)
	}
	if n := e.l.NASDatastores(); len(n) != 0 {
		t.Fatalf("left mounted after the refusal: %v", n)
	}
	if err := e.c.DestroyVM(ctx, src.VMRef); err != nil {
		t.Fatal(err)
	}
	rec, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, Datastore: ds0, Original: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.c.VM(ctx, rec.VM)
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != e.name || v.InstanceUUID != src.InstanceUUID || v.BIOSUUID != src.BIOSUUID {
		t.Fatalf("identity: name %q uuid %q instance %q, want %q %q %q", v.Name, v.BIOSUUID, v.InstanceUUID, e.name, src.BIOSUUID, src.InstanceUUID)
	}
	if len(v.NICs) != 1 || len(src.NICs) != 1 || v.NICs[0].MAC != src.NICs[0].MAC {
		t.Fatalf("MACs %+v, want %+v", v.NICs, src.NICs)
	}
	if _, err := m.Stop(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
}

// TestInstantOverlayAlerts: a guest writing into its overlay past 80% of
// the limit raises one alert, filling it raises one more, and a write past
// the limit fails without touching the point.
func TestInstantOverlayAlerts(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m, err := instantvm.New(instantvm.Config{Dir: e.dir, Advertise: "127.0.0.1", NoSync: true, OverlayLimit: 1 << 20}, e.c, e.rs, e.srv)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := m.Start(ctx, instantvm.StartRequest{Point: e.pt, Host: host, Datastore: ds0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx, rec.ID)
	_, port, _ := net.SplitHostPort(e.srv.Addr())
	p, _ := strconv.Atoi(port)
	cl, err := nfsc.DialServiceAtPort("127.0.0.1", p)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v, err := (&nfsc.Mount{Client: cl}).Mount(rec.Export, rpc.NewAuthUnix("guest", 0, 0).Auth())
	if err != nil {
		t.Fatal(err)
	}
	f, err := v.OpenFile(e.name+"-flat.vmdk", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.OverlayAlerts(); len(got) != 0 {
		t.Fatalf("alerts before any write: %+v", got)
	}
	if _, err := f.Write(make([]byte, 900<<10)); err != nil {
		t.Fatal(err)
	}
	if got := m.OverlayAlerts(); len(got) != 1 || got[0].Full || got[0].Record.ID != rec.ID {
		t.Fatalf("after 900 KiB: %+v", got)
	}
	if got := m.OverlayAlerts(); len(got) != 0 {
		t.Fatalf("alerted twice: %+v", got)
	}
	f.Write(make([]byte, 124<<10))
	if got := m.OverlayAlerts(); len(got) != 1 || !got[0].Full {
		t.Fatalf("when full: %+v", got)
	}
	if _, err := f.Write(make([]byte, 64<<10)); err == nil {
		t.Fatal("a write past the overlay's limit succeeded")
	}
	f.Close()
	if rep, err := e.r.Check(ctx, repository.CheckOptions{ReadData: true}, nil); err != nil || !rep.Clean() {
		t.Fatalf("check --read-data after the writes: %+v %v", rep, err)
	}
}
