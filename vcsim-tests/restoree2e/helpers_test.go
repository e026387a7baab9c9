package restoree2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

const (
	pool = "/DC0/host/DC0_C0/Resources"
	ds0  = "LocalDS_0"
)

// labConfig: this suite has always allowed two attempts per call.
func labConfig(l *lab.Lab) vsphere.Config {
	return labtest.Config(l, "restoree2e", func(c *vsphere.Config) { c.Retry.Attempts = 2 })
}

func connectCfg(t testing.TB, cfg vsphere.Config) *vsphere.Client {
	t.Helper()
	return labtest.Connect(t, cfg)
}

func connect(t testing.TB, l *lab.Lab) *vsphere.Client {
	t.Helper()
	return connectCfg(t, labConfig(l))
}

// backUp makes a restore point of vm with the backup engine.
func backUp(t testing.TB, c *vsphere.Client, r *repository.Repository, vm string) string {
	t.Helper()
	e := backup.NewEngine(backup.FromClient(c, vsphere.ReaderOptions{}), backup.RepoStore(r),
		backup.EngineOptions{Workers: 2, RemoveBackoff: 5 * time.Millisecond, RemoveTimeout: 30 * time.Second})
	res, err := e.BackupVM(context.Background(), backup.Request{VM: vm, Quiesce: backup.QuiescePrefer})
	if err != nil || res.RestorePoint == "" {
		t.Fatalf("back up %s: %v (warnings %q)", vm, err, res.Warnings)
	}
	return res.RestorePoint
}

var fixedNow = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)

func newEngine(r restore.Points, c *vsphere.Client) *restore.Engine {
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

// fill gives every disk of vm distinct content with holes, through the lab.
func fill(t testing.TB, l *lab.Lab, vm string, seed uint64) [][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	var out [][]byte
	for i := 0; ; i++ {
		info, err := l.Disk(vm, i)
		if err != nil {
			break
		}
		img := make([]byte, info.Capacity)
		// Data, a hole, more data, a compressible run, a hole at the end.
		n := len(img)
		copy(img[0:n/4], randomData(rng, n/4))
		copy(img[n/2:n/2+n/8], randomData(rng, n/8))
		copy(img[n/2+n/8:3*n/4], bytes.Repeat([]byte("vmvault "), n/64))
		if err := l.WriteDiskFrom(vm, i, bytes.NewReader(img)); err != nil {
			t.Fatalf("fill %s disk %d: %v", vm, i, err)
		}
		out = append(out, img)
	}
	return out
}

// diskByKey reads the whole content of the VM disk with this key straight
// from the lab datastore (the flat file, zero-padded to capacity).
func diskByKey(t testing.TB, l *lab.Lab, vm string, key int32) []byte {
	t.Helper()
	for i := 0; ; i++ {
		info, err := l.Disk(vm, i)
		if err != nil {
			t.Fatalf("VM %s has no disk with key %d", vm, key)
		}
		if info.Key != key {
			continue
		}
		b, err := os.ReadFile(info.FlatPath)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) > info.Capacity {
			t.Fatalf("flat file of %s disk %d has %d bytes > capacity %d", vm, key, len(b), info.Capacity)
		}
		return append(b, make([]byte, info.Capacity-int64(len(b)))...)
	}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// vmNames is the sorted list of every VM name in the lab.
func vmNames(t testing.TB, c *vsphere.Client) []string {
	t.Helper()
	notes, err := c.VMNotes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range notes {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

// dsFiles lists every file under the lab's datastore directories.
func dsFiles(t testing.TB, l *lab.Lab, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		dir, ok := l.DatastoreDir(n)
		if !ok {
			t.Fatalf("no datastore %s", n)
		}
		_ = walk(dir, func(p string) { out = append(out, strings.TrimPrefix(p, dir)) })
	}
	sort.Strings(out)
	return out
}

func walk(dir string, fn func(string)) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := dir + "/" + e.Name()
		if e.IsDir() {
			_ = walk(p, fn)
		} else {
			fn(p)
		}
	}
	return nil
}

// failingProxy fronts the lab: datastore PUTs fail after failAfter bytes
// (when armed); everything else passes through. It gives the restore a
// real upload failure midway.
type failingProxy struct {
	srv       *httptest.Server
	failAfter atomic.Int64 // <= 0: pass
	failed    atomic.Int64
}

func newFailingProxy(t testing.TB, l *lab.Lab) *failingProxy {
	t.Helper()
	target := l.URL()
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	fp := &failingProxy{}
	fp.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := fp.failAfter.Load(); n > 0 && r.Method == http.MethodPut && (strings.HasPrefix(r.URL.Path, "/folder/") || strings.HasPrefix(r.URL.Path, "/nfc/")) {
			_, _ = io.CopyN(io.Discard, r.Body, n)
			fp.failed.Add(1)
			http.Error(w, "injected upload failure", http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(fp.srv.Close)
	return fp
}

func (fp *failingProxy) config(l *lab.Lab) vsphere.Config {
	cfg := labConfig(l)
	cfg.URL, cfg.Thumbprint, cfg.Insecure = fp.srv.URL, "", true
	return cfg
}

// sourceSpec is a VM with three disks on two controllers (SCSI units 0 and
// 1, SATA unit 2) and two NICs of different types on two networks.
func sourceSpec(name string) vsphere.VMSpec {
	return vsphere.VMSpec{Name: name, Datastore: ds0, ResourcePool: pool, NumCPU: 4, CoresPerSocket: 2, MemoryMB: 512,
		GuestID: "otherLinux64Guest", Firmware: "efi", Annotation: "restore source",
		ExtraConfig: map[string]string{"disk.EnableUUID": "TRUE"},
		Controllers: []vsphere.ControllerSpec{{Type: "pvscsi", Bus: 0}, {Type: "sata", Bus: 0}},
		Disks: []vsphere.DiskSpec{
			{CapacityBytes: 4 << 20, Thin: true, Controller: 0, Unit: 0},
			{CapacityBytes: 3 << 20, Thin: false, Controller: 0, Unit: 1},
			{CapacityBytes: 2 << 20, Thin: true, Controller: 1, Unit: 2},
		},
		NICs: []vsphere.NICSpec{{Network: "VM Network", Type: "vmxnet3"}, {Network: "DC0_DVPG0", Type: "e1000e"}},
	}
}

// makeSource creates the source VM, fills its disks and sizes its flat
// files to their capacity.
func makeSource(t testing.TB, l *lab.Lab, c *vsphere.Client, name string, seed uint64) (vsphere.VM, [][]byte) {
	t.Helper()
	vm, err := c.CreateVM(context.Background(), sourceSpec(name))
	if err != nil {
		t.Fatalf("create source VM: %v", err)
	}
	return vm, fill(t, l, name, seed)
}
