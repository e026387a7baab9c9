package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vsphere"
)

// fakeVSphere is an in-memory vCenter without CBT: VMs with disk bytes,
// snapshots that freeze nothing (tests do not write during a backup), and
// hooks for faults. It counts what the engine did.
type fakeVSphere struct {
	mu          sync.Mutex
	vms         map[string]*fakeVM
	snaps       map[string]string // snapshot moref -> VM name
	nextSnap    int
	removeFails int // RemoveSnapshot fails this many times
	removeCalls int
	removeCtx   []error // ctx.Err() seen by each RemoveSnapshot
	panicRead   bool
	readDelay   time.Duration
	// waitPeak > 0 holds each read (up to 5 s) until that many disks have
	// been read at once, so a test of parallelism does not depend on the
	// scheduler happening to overlap two reads on a loaded machine.
	waitPeak int32
	// notQuiesced makes quiesced snapshots come back not quiesced (as
	// vSphere could report them).
	notQuiesced bool
	active      atomic.Int32 // disks being read now
	peak        atomic.Int32
	perDS       map[string]*atomic.Int32
	peakDS      atomic.Int32
}

type fakeVM struct {
	vm    vsphere.VM
	disks map[int32][]byte
}

func newFake() *fakeVSphere {
	return &fakeVSphere{vms: map[string]*fakeVM{}, snaps: map[string]string{}, perDS: map[string]*atomic.Int32{}}
}

func (f *fakeVSphere) addVM(name string, ds string, sizes ...int) *fakeVM {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := &fakeVM{vm: vsphere.VM{VMRef: vsphere.VMRef{MoRef: "vm-" + name, Name: name, InstanceUUID: "uuid-" + name},
		NumCPU: 2, MemoryMB: 512, GuestID: "otherGuest", CBTEnabled: true}, disks: map[int32][]byte{}}
	rng := rand.New(rand.NewPCG(uint64(len(f.vms)), 1))
	for i, s := range sizes {
		key := int32(2000 + i)
		b := make([]byte, s)
		for j := 0; j < s; j += 4096 {
			if rng.IntN(2) == 0 {
				for k := j; k < min(j+4096, s); k++ {
					b[k] = byte(rng.Uint32())
				}
			}
		}
		v.disks[key] = b
		v.vm.Disks = append(v.vm.Disks, vsphere.Disk{Key: key, Label: fmt.Sprintf("Hard disk %d", i+1), CapacityBytes: int64(s),
			ControllerKey: 1000, ControllerType: "scsi", Unit: int32(i), Datastore: ds, UUID: fmt.Sprintf("%s-%d", name, i)})
	}
	f.vms[name] = v
	return v
}

func (f *fakeVSphere) FindVM(ctx context.Context, id string) (vsphere.VM, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vms[id]
	if !ok {
		return vsphere.VM{}, fmt.Errorf("find %s: %w", id, vsphere.ErrNotFound)
	}
	return v.vm, nil
}

func (f *fakeVSphere) CreateSnapshot(ctx context.Context, vm vsphere.VMRef, opts vsphere.SnapshotOptions) (*vsphere.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextSnap++
	id := fmt.Sprintf("snapshot-%d", f.nextSnap)
	f.snaps[id] = vm.Name
	return &vsphere.Snapshot{MoRef: id, VM: vm, Name: vsphere.SnapshotPrefix + opts.Name, Created: time.Now(), Disks: f.vms[vm.Name].vm.Disks,
		Quiesced: opts.Quiesce && !f.notQuiesced}, nil
}

func (f *fakeVSphere) RemoveSnapshot(ctx context.Context, vm vsphere.VMRef, moref string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removeCalls++
	f.removeCtx = append(f.removeCtx, ctx.Err())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if f.removeFails > 0 {
		f.removeFails--
		return errors.New("injected removal failure")
	}
	delete(f.snaps, moref)
	return nil
}

func (f *fakeVSphere) RemoveStaleSnapshots(ctx context.Context, vm vsphere.VMRef, before time.Time) ([]vsphere.SnapshotEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []vsphere.SnapshotEntry
	for id, name := range f.snaps {
		if name == vm.Name {
			delete(f.snaps, id)
			out = append(out, vsphere.SnapshotEntry{MoRef: id, Ours: true})
		}
	}
	return out, nil
}

func (f *fakeVSphere) EnableCBT(ctx context.Context, vm vsphere.VMRef) error { return nil }

func (f *fakeVSphere) ChangedAreas(ctx context.Context, snap *vsphere.Snapshot, key int32, prev string) ([]vsphere.Extent, error) {
	return nil, vsphere.ErrCBTDisabled
}

func (f *fakeVSphere) OpenDisk(ctx context.Context, snap *vsphere.Snapshot, key int32) (DiskSource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.vms[snap.VM.Name]
	d, _ := snap.Disk(key)
	cnt := f.perDS[d.Datastore]
	if cnt == nil {
		cnt = new(atomic.Int32)
		f.perDS[d.Datastore] = cnt
	}
	return &fakeDisk{f: f, data: v.disks[key], ds: cnt}, nil
}

type fakeDisk struct {
	f    *fakeVSphere
	data []byte
	ds   *atomic.Int32
}

func (d *fakeDisk) Size() int64 { return int64(len(d.data)) }

func (d *fakeDisk) ReadAt(p []byte, off int64) (int, error) {
	if d.f.panicRead {
		panic("injected read panic")
	}
	n := d.f.active.Add(1)
	defer d.f.active.Add(-1)
	for p := d.f.peak.Load(); n > p && !d.f.peak.CompareAndSwap(p, n); p = d.f.peak.Load() {
	}
	m := d.ds.Add(1)
	defer d.ds.Add(-1)
	for p := d.f.peakDS.Load(); m > p && !d.f.peakDS.CompareAndSwap(p, m); p = d.f.peakDS.Load() {
	}
	if w := d.f.waitPeak; w > 0 {
		for deadline := time.Now().Add(5 * time.Second); d.f.peak.Load() < w && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(d.f.readDelay)
	if off >= int64(len(d.data)) {
		return 0, io.EOF
	}
	n2 := copy(p, d.data[off:])
	if n2 < len(p) {
		return n2, io.EOF
	}
	return n2, nil
}

func testEngine(t *testing.T, f *fakeVSphere, opts EngineOptions) (*Engine, *repository.Repository) {
	t.Helper()
	r := repository.TestRepository(t, repository.WithChunker(testChunker))
	if opts.RemoveBackoff == 0 {
		opts.RemoveBackoff = time.Millisecond
	}
	return NewEngine(f, RepoStore(r), opts), r
}

func readPoint(t *testing.T, r *repository.Repository, id string, disk int) []byte {
	t.Helper()
	dr, err := r.OpenDisk(context.Background(), id, disk)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	b := make([]byte, dr.Size())
	if _, err := dr.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

// TestEngineWholeDiskReads: without CBT every disk is read in full; the
// point holds every disk and the configuration blob.
func TestEngineWholeDiskReads(t *testing.T) {
	f := newFake()
	v := f.addVM("web", "ds1", 1<<20, 3<<20+4096)
	e, r := testEngine(t, f, EngineOptions{Workers: 2})
	var last VMProgress
	var phases []string
	res, err := e.BackupVM(context.Background(), Request{VM: "web", Progress: func(p VMProgress) {
		last = p
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(phases) != "[prepare snapshot disks commit done]" {
		t.Errorf("phases %v", phases)
	}
	if last.Size != 4<<20+4096 || last.Done != last.Size || last.BytesRead != res.BytesRead || len(last.Disks) != 2 ||
		last.Disks[1].Mode != ModeFull || last.Rate() <= 0 || last.ETA() != 0 || last.NewBytes != res.NewBytes {
		t.Errorf("final progress %+v (result read %d new %d)", last, res.BytesRead, res.NewBytes)
	}
	if res.Mode != ModeFull || len(res.Disks) != 2 || res.BytesRead != 4<<20+4096 || res.SnapshotLeft != "" {
		t.Fatalf("result %+v", res)
	}
	for i, d := range v.vm.Disks {
		if !bytes.Equal(readPoint(t, r, res.RestorePoint, i), v.disks[d.Key]) {
			t.Errorf("disk %d differs", i)
		}
	}
	p, err := r.Point(context.Background(), res.RestorePoint)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := r.LoadBlob(context.Background(), p.ConfigID)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := DecodeVMConfig(blob)
	if err != nil || cfg.Name != "web" || len(cfg.Disks) != 2 || cfg.Disks[1].Index != 1 || len(cfg.Controllers) != 1 {
		t.Errorf("config %+v, %v", cfg, err)
	}
	if p.Tags["disk.2001.uuid"] != "web-1" || p.Consistency != ConsistencyFilesystem {
		t.Errorf("tags %v consistency %q", p.Tags, p.Consistency)
	}
	if len(f.snaps) != 0 {
		t.Errorf("snapshots left: %v", f.snaps)
	}
}

// TestEngineSnapshotAlwaysRemoved: a panic in a disk read (on a pipeline
// goroutine), a cancelled backup and flaky removals all end with the
// snapshot removed through a context that is not cancelled, and nothing
// committed when the backup failed.
func TestEngineSnapshotAlwaysRemoved(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(*fakeVSphere)
		cancel      bool
		wantErr     error
		removeFails int
		wantLeft    bool
	}{
		{name: "panic in a read", setup: func(f *fakeVSphere) { f.panicRead = true }, wantErr: ErrPanic},
		{name: "cancelled", cancel: true, wantErr: context.Canceled},
		{name: "removal fails twice then works", removeFails: 2},
		{name: "removal keeps failing", removeFails: 100, wantLeft: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.addVM("db", "ds1", 2<<20)
			if tc.setup != nil {
				tc.setup(f)
			}
			f.removeFails = tc.removeFails
			e, r := testEngine(t, f, EngineOptions{Workers: 2, RemoveAttempts: 3})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := Request{VM: "db"}
			if tc.cancel {
				req.Progress = func(p VMProgress) {
					if p.Phase == "disks" {
						cancel()
					}
				}
			}
			res, err := e.BackupVM(ctx, req)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				if ps, _ := r.List(context.Background()); len(ps) != 0 || res.RestorePoint != "" {
					t.Fatal("a failed backup committed a point")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for i, ce := range f.removeCtx {
				if ce != nil {
					t.Errorf("removal %d ran with a dead context: %v", i, ce)
				}
			}
			wantCalls := min(tc.removeFails+1, 3)
			if f.removeCalls != wantCalls {
				t.Errorf("%d removal attempts, want %d", f.removeCalls, wantCalls)
			}
			if left := len(f.snaps) > 0; left != tc.wantLeft || (res.SnapshotLeft != "") != tc.wantLeft {
				t.Errorf("snapshot left %v (%q), want %v", left, res.SnapshotLeft, tc.wantLeft)
			}
		})
	}
}

// TestEngineBudgets: eight VMs of two disks each, eight at once: the shared
// disk budget and the per-datastore limit hold.
func TestEngineBudgets(t *testing.T) {
	f := newFake()
	f.readDelay = 2 * time.Millisecond
	f.waitPeak = 2
	var reqs []Request
	for i := range 8 {
		name := fmt.Sprintf("vm%d", i)
		f.addVM(name, fmt.Sprintf("ds%d", i%2), 1<<20, 1<<20)
		reqs = append(reqs, Request{VM: name})
	}
	e, _ := testEngine(t, f, EngineOptions{Workers: 1, MaxActiveDisks: 3, PerDatastore: 1})
	outs := e.BackupVMs(context.Background(), append(reqs, Request{VM: "missing"}), 8)
	for _, o := range outs[:8] {
		if o.Err != nil {
			t.Fatalf("%s: %v", o.Request.VM, o.Err)
		}
	}
	if !errors.Is(outs[8].Err, vsphere.ErrNotFound) {
		t.Errorf("missing VM: %v", outs[8].Err)
	}
	if p := f.peakDS.Load(); p > 1 {
		t.Errorf("%d disks read from one datastore at once, limit 1", p)
	}
	if p := f.peak.Load(); p > 2 || p < 2 {
		t.Errorf("peak concurrent disk reads %d, want 2 (two datastores, one each, budget 3)", p)
	}
}

// TestEngineOneRunPerVM: the same VM twice at once (by name and by id):
// one run is refused, so its sweep cannot remove the other's snapshot.
func TestEngineOneRunPerVM(t *testing.T) {
	f := newFake()
	f.readDelay = 200 * time.Millisecond
	f.addVM("app", "ds1", 1<<20)
	f.vms["vm-app"] = f.vms["app"]
	e, _ := testEngine(t, f, EngineOptions{Workers: 1})
	outs := e.BackupVMs(context.Background(), []Request{{VM: "app"}, {VM: "vm-app"}}, 2)
	ok, busy := 0, 0
	for _, o := range outs {
		switch {
		case o.Err == nil:
			ok++
		case errors.Is(o.Err, ErrBusy):
			busy++
		default:
			t.Fatalf("%s: %v", o.Request.VM, o.Err)
		}
	}
	if ok != 1 || busy != 1 {
		t.Errorf("%d succeeded, %d refused as busy; want 1 and 1", ok, busy)
	}
	if _, err := e.BackupVM(context.Background(), Request{}); err == nil {
		t.Error("empty VM accepted")
	}
}

func TestParseQuiesce(t *testing.T) {
	for in, want := range map[string]QuiesceMode{"": QuiescePrefer, "require": QuiesceRequire, "prefer": QuiescePrefer, "off": QuiesceOff} {
		if got, err := ParseQuiesce(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseQuiesce("always"); err == nil {
		t.Error("bad mode accepted")
	}
}

func TestParseLevelAndVSSType(t *testing.T) {
	for in, want := range map[string]QuiesceLevel{"": LevelApplication, "application": LevelApplication, "filesystem": LevelFilesystem} {
		if got, err := ParseLevel(in); err != nil || got != want {
			t.Errorf("level %q: %v %v", in, got, err)
		}
	}
	for in, want := range map[string]VSSType{"": VSSCopy, "copy": VSSCopy, "full": VSSFull} {
		if got, err := ParseVSSType(in); err != nil || got != want {
			t.Errorf("VSS type %q: %v %v", in, got, err)
		}
	}
	for _, bad := range []string{"app", "crash", "Application"} {
		if _, err := ParseLevel(bad); err == nil {
			t.Errorf("level %q accepted", bad)
		}
	}
	for _, bad := range []string{"FULL", "incremental", "5"} {
		if _, err := ParseVSSType(bad); err == nil {
			t.Errorf("VSS type %q accepted", bad)
		}
	}
	// BackupVM refuses them before touching vSphere.
	f := newFake()
	f.addVM("web", "ds1", 4096)
	e, _ := testEngine(t, f, EngineOptions{Workers: 1})
	for _, req := range []Request{{VM: "web", Level: "deep"}, {VM: "web", VSSType: "log"}} {
		if _, err := e.BackupVM(context.Background(), req); err == nil {
			t.Errorf("request %+v accepted", req)
		}
		if f.nextSnap != 0 {
			t.Fatalf("a snapshot was taken for a bad request")
		}
	}
}

// A snapshot vSphere made but calls not quiesced: under prefer a
// crash-consistent point that says so; under require a failure, with the
// snapshot removed.
func TestEngineSnapshotNotQuiesced(t *testing.T) {
	f := newFake()
	f.addVM("web", "ds1", 8192)
	f.notQuiesced = true
	e, r := testEngine(t, f, EngineOptions{Workers: 1})
	res, err := e.BackupVM(context.Background(), Request{VM: "web", Quiesce: QuiescePrefer, Level: LevelFilesystem})
	if err != nil {
		t.Fatal(err)
	}
	if res.Consistency != ConsistencyCrash || res.Quiesce.Reason != ReasonNotQuiesced || res.Quiesce.Requested != "filesystem" || len(res.Warnings) == 0 {
		t.Errorf("prefer: consistency %q report %+v warnings %q", res.Consistency, res.Quiesce, res.Warnings)
	}
	p, err := r.Point(context.Background(), res.RestorePoint)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tags["quiesce.reason"] != ReasonNotQuiesced || p.Tags["quiesce.requested"] != "filesystem" || p.Tags["quiesce.spec"] != "" {
		t.Errorf("tags %v", p.Tags)
	}
	before := len(f.snaps)
	_, err = e.BackupVM(context.Background(), Request{VM: "web", Quiesce: QuiesceRequire})
	if !errors.Is(err, ErrQuiesce) {
		t.Fatalf("require: %v, want ErrQuiesce", err)
	}
	if len(f.snaps) != before {
		t.Errorf("require left the snapshot: %v", f.snaps)
	}
}
