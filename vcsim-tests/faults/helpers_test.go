package faults

import (
	"context"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vsphere"
)

var testChunker = repository.ChunkerConfig{Algorithm: "cdc", Polynomial: repository.TestChunker.Polynomial,
	MinSize: 16 << 10, AvgSize: 64 << 10, MaxSize: 256 << 10}

const (
	pool = "/DC0/host/DC0_C0/Resources"
	ds0  = "LocalDS_0"
)

func startLab(t *testing.T, opts lab.Options) *lab.Lab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := lab.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

func labConfig(l *lab.Lab) vsphere.Config {
	return vsphere.Config{URL: l.URL().String(), Username: l.Username(), Password: l.Password(), Thumbprint: l.Thumbprint(),
		ApplianceID: "faults", Retry: vsphere.RetryPolicy{Attempts: 3, Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}}
}

func connect(t *testing.T, l *lab.Lab) *vsphere.Client {
	t.Helper()
	c, err := vsphere.Connect(context.Background(), labConfig(l))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func newRepo(t *testing.T) *repository.Repository {
	t.Helper()
	return repository.TestRepository(t, repository.WithChunker(testChunker))
}

func engineOptions() backup.EngineOptions {
	return backup.EngineOptions{Workers: 2, RemoveBackoff: 5 * time.Millisecond, RemoveTimeout: 30 * time.Second}
}

func newBackup(c *vsphere.Client, r *repository.Repository, mod ...func(*backup.EngineOptions)) *backup.Engine {
	o := engineOptions()
	for _, m := range mod {
		m(&o)
	}
	return backup.NewEngine(backup.FromClient(c, vsphere.ReaderOptions{}), backup.RepoStore(r), o)
}

var fixedNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newRestore(r *repository.Repository, c *vsphere.Client) *restore.Engine {
	return restore.New(r, c, restore.Options{Now: func() time.Time { return fixedNow }, CleanupTimeout: 30 * time.Second})
}

func randomData(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, l *lab.Lab, vm string, off int64, data []byte) {
	t.Helper()
	must(t, l.WriteDisk(vm, 0, off, data))
}

// diskImage is what the guest sees on disk 0 of vm.
func diskImage(t *testing.T, l *lab.Lab, vm string) []byte {
	t.Helper()
	info, err := l.Disk(vm, 0)
	must(t, err)
	b, err := l.ReadDisk(vm, 0, 0, int(info.Capacity))
	must(t, err)
	return b
}

// repoClean: the check finds nothing and no point is partial.
func repoClean(t *testing.T, r *repository.Repository) {
	t.Helper()
	rep, err := r.Check(context.Background(), repository.CheckOptions{}, nil)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if !rep.Clean() {
		t.Fatalf("repository check found problems: %v", rep.Problems)
	}
	for _, p := range points(t, r) {
		if p.Partial {
			t.Fatalf("point %s is partial", p.ID)
		}
	}
}

func points(t *testing.T, r *repository.Repository) []repository.Point {
	t.Helper()
	ps, err := r.List(context.Background())
	must(t, err)
	return ps
}

func noSnapshots(t *testing.T, l *lab.Lab, vm string) {
	t.Helper()
	names, err := l.Snapshots(vm)
	must(t, err)
	if len(names) != 0 {
		t.Fatalf("snapshots left on %s: %v", vm, names)
	}
}

func hasWarning(ws []string, sub string) bool {
	for _, w := range ws {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

func setCBT(t *testing.T, l *lab.Lab, vm string, on bool) {
	t.Helper()
	ctx := context.Background()
	ref, err := l.MoRef(vm)
	must(t, err)
	v := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: ref})
	task, err := v.Reconfigure(ctx, types.VirtualMachineConfigSpec{ChangeTrackingEnabled: types.NewBool(on)})
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("set CBT %v: %v", on, err)
	}
}

// vmNames is the sorted list of every VM name in the lab.
func vmNames(t *testing.T, c *vsphere.Client) []string {
	t.Helper()
	notes, err := c.VMNotes(context.Background())
	must(t, err)
	var out []string
	for _, n := range notes {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

// dsFiles lists every file under the lab's datastore directory.
func dsFiles(t *testing.T, l *lab.Lab) []string {
	t.Helper()
	dir, ok := l.DatastoreDir(ds0)
	if !ok {
		t.Fatalf("no datastore %s", ds0)
	}
	var out []string
	var walk func(string)
	walk = func(d string) {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			p := d + "/" + e.Name()
			if e.IsDir() {
				walk(p)
			} else {
				out = append(out, strings.TrimPrefix(p, dir))
			}
		}
	}
	walk(dir)
	sort.Strings(out)
	return out
}

// failOnce arms vcsim's fault injector: the next call of method (by anyone)
// fails with a SystemError ("Network connection failed"), the fault clients
// treat as transient; skip calls pass first.
func failOnce(l *lab.Lab, method string, skip int) {
	l.Service().AddFaultRule(simulatorRule{method, skip}.rule())
}

type simulatorRule struct {
	method string
	skip   int
}

func (s simulatorRule) rule() *simulator.FaultInjectionRule {
	return &simulator.FaultInjectionRule{MethodName: s.method, ObjectType: "*", ObjectName: "*", Probability: 1,
		MaxCount: 1, SkipCount: s.skip, Enabled: true, FaultType: simulator.FaultTypeNetworkFailure}
}

// noLeases: no NFC lease (export or import) is left open in vCenter.
func noLeases(t *testing.T, l *lab.Lab) {
	t.Helper()
	if n := l.OpenLeases(); n != 0 {
		t.Errorf("%d NFC leases left open", n)
	}
}
