package backupe2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

const applianceID = "backupe2e"

func labConfig(l *lab.Lab) vsphere.Config { return labtest.Config(l, applianceID) }

func connect(t *testing.T, l *lab.Lab) *vsphere.Client {
	t.Helper()
	return labtest.Connect(t, labConfig(l))
}

func testEngineOptions() backup.EngineOptions {
	return backup.EngineOptions{Workers: 2, RemoveBackoff: 5 * time.Millisecond, RemoveTimeout: 30 * time.Second}
}

func newEngine(t *testing.T, c *vsphere.Client, r *repository.Repository, mod ...func(*backup.EngineOptions)) *backup.Engine {
	t.Helper()
	o := testEngineOptions()
	for _, m := range mod {
		m(&o)
	}
	return backup.NewEngine(backup.FromClient(c, vsphere.ReaderOptions{}), backup.RepoStore(r), o)
}

func run(t *testing.T, e *backup.Engine, vm string, mod ...func(*backup.Request)) backup.Result {
	t.Helper()
	req := backup.Request{VM: vm, Quiesce: backup.QuiescePrefer}
	for _, m := range mod {
		m(&req)
	}
	res, err := e.BackupVM(context.Background(), req)
	if err != nil {
		t.Fatalf("back up %s: %v (warnings %q)", vm, err, res.Warnings)
	}
	if res.RestorePoint == "" {
		t.Fatalf("back up %s: no restore point", vm)
	}
	return res
}

// diskImage is the full content of one disk of a lab VM (what the guest sees).
func diskImage(t *testing.T, l *lab.Lab, vm string, idx int) []byte {
	t.Helper()
	info, err := l.Disk(vm, idx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.ReadDisk(vm, idx, 0, int(info.Capacity))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sum(b []byte) [32]byte { return sha256.Sum256(b) }

// randomData fills n bytes from rng (incompressible, never deduplicated).
func randomData(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return b
}

// write puts data into the VM's disk through the lab (CBT records it).
func write(t *testing.T, l *lab.Lab, vm string, idx int, off int64, data []byte) {
	t.Helper()
	if err := l.WriteDisk(vm, idx, off, data); err != nil {
		t.Fatalf("write %d bytes at %d: %v", len(data), off, err)
	}
}

// checkRepo runs a full repository check.
func checkRepo(t *testing.T, r *repository.Repository) {
	t.Helper()
	rep, err := r.Check(context.Background(), repository.CheckOptions{}, nil)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if !rep.Clean() {
		t.Fatalf("repository check found problems: %v", rep.Problems)
	}
}

func noSnapshots(t *testing.T, l *lab.Lab, vm string) {
	t.Helper()
	names, err := l.Snapshots(vm)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Fatalf("snapshots left on %s: %v", vm, names)
	}
}

func points(t *testing.T, r *repository.Repository) []repository.Point {
	t.Helper()
	ps, err := r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func hasWarning(ws []string, sub string) bool {
	for _, w := range ws {
		if bytes.Contains([]byte(w), []byte(sub)) {
			return true
		}
	}
	return false
}

// cbtBlocks is the bytes CBT reports for writes: 64 KiB blocks (the lab's
// default granularity), counted once.
func cbtBlocks(writes map[int64]bool) int64 { return int64(len(writes)) * (64 << 10) }

func markBlocks(m map[int64]bool, off int64, n int) {
	for b := off / (64 << 10); b <= (off+int64(n)-1)/(64<<10); b++ {
		m[b] = true
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
