package verifye2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/instant"
	"github.com/vmvault/vmvault/service/instantvm"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/service/verify"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

const (
	host = "/DC0/host/DC0_H0/DC0_H0"
	ds0  = "LocalDS_0"
)

type env struct {
	l   *lab.Lab
	c   *vsphere.Client
	r   *repository.Repository
	pt  string
	m   *verification.Manager
	dir string
}

// diskImage is a GPT disk whose one partition holds an ext4 file system
// of a small tree; damage, when set, changes the file system first.
func diskImage(t *testing.T, damage func(t *testing.T, img string)) string {
	t.Helper()
	guestfstest.Need(t, false, "mkfs.ext4", "sgdisk", "dd")
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true})
	img := filepath.Join(t.TempDir(), "ext4.img")
	guestfstest.Ext4(t, img, src, 12, "-b", "4096")
	if damage != nil {
		damage(t, img)
	}
	disk := filepath.Join(t.TempDir(), "disk.img")
	guestfstest.GPT(t, disk, 16, guestfstest.Part{SizeMiB: 14, Type: "8300", Image: img})
	return disk
}

func setup(t *testing.T, damage func(t *testing.T, img string)) *env {
	t.Helper()
	disk := diskImage(t, damage)
	ctx := context.Background()
	l := labtest.Start(t, lab.Options{})
	c := labtest.Connect(t, labtest.Config(l, "verifye2e"))
	r := labtest.Repo(t)
	fi, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := c.CreateVM(ctx, vsphere.VMSpec{Name: "web01", Datastore: ds0, Host: host, ResourcePool: "/DC0/host/DC0_H0/Resources",
		NumCPU: 1, MemoryMB: 256, GuestID: "otherLinux64Guest",
		Disks: []vsphere.DiskSpec{{CapacityBytes: fi.Size(), Thin: true}},
		NICs:  []vsphere.NICSpec{{Network: "VM Network"}}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := l.WriteDiskFrom(vm.Name, 0, f); err != nil {
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
	rs := repos.New(map[string]*repository.Repository{"main": r})
	ivm, err := instantvm.New(instantvm.Config{Dir: t.TempDir(), Advertise: "127.0.0.1", NoSync: true}, c, rs, srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ivm.Close() })
	walker, err := verify.New(rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A short poll: the lab's guest is up as soon as the power-on ends.
	m, err := verification.New(verification.Config{Dir: dir, Points: rs, Walker: walker, Boot: ivm, Guest: c,
		Poll: 20 * time.Millisecond, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return &env{l: l, c: c, r: r, pt: res.RestorePoint, m: m, dir: dir}
}

// tornDown checks that nothing of a boot verification is left: no VM,
// no NFS datastore, no hold on the point.
func (e *env) tornDown(t *testing.T, res verification.Result) {
	t.Helper()
	if res.Boot == nil || res.Boot.VMName == "" || res.Boot.Session == "" {
		t.Fatalf("no boot in %+v", res)
	}
	if res.Boot.TeardownError != "" {
		t.Errorf("teardown: %s", res.Boot.TeardownError)
	}
	if refs, err := e.c.VMsNamed(context.Background(), res.Boot.VMName); err != nil || len(refs) != 0 {
		t.Errorf("VM %s left registered: %v %v", res.Boot.VMName, refs, err)
	}
	if n := e.l.NASDatastores(); len(n) != 0 {
		t.Errorf("NFS datastores left mounted: %v", n)
	}
	if _, ok := e.r.InUse(e.pt); ok {
		t.Error("the point is still held")
	}
}

// recorded checks the result is the point's latest, also for a manager
// that reads the directory afresh (an appliance restart).
func (e *env) recorded(t *testing.T, res verification.Result) {
	t.Helper()
	m2, err := verification.New(verification.Config{Dir: e.dir, Points: repos.New(map[string]*repository.Repository{"main": e.r})})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*verification.Manager{e.m, m2} {
		l, ok := m.Latest(e.pt)
		if !ok || l.ID != res.ID || l.Result != res.Result || l.Reason != res.Reason || l.Mode != res.Mode {
			t.Errorf("latest of %s: %+v (%v), want %s %s", e.pt[:12], l, ok, res.Result, res.Reason)
		}
	}
}

// TestBootVerificationPasses: walk and boot; the heartbeat goes green
// (Tools running in the lab's guest), the TCP port and the URL answer at
// the guest's address, everything is torn down and the pass recorded.
func TestBootVerificationPasses(t *testing.T) {
	e := setup(t, nil)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer web.Close()
	ip, port, _ := net.SplitHostPort(web.Listener.Addr().String())
	e.l.SetNFSGuest(&lab.NFSGuest{ToolsRunning: true, IP: ip})
	p, _ := strconv.Atoi(port)
	var phases []string
	res, err := e.m.Verify(context.Background(), verification.Request{Point: e.pt[:12], Mode: verification.ModeBoth, Host: host, Datastore: ds0,
		Ports: []int{p}, URL: "http://guest:" + port + "/health", Timeout: 30 * time.Second, ProbeTimeout: 10 * time.Second},
		func(ph string) { phases = append(phases, ph) })
	if err != nil {
		t.Fatalf("verify: %v (phases %v)", err, phases)
	}
	if !res.Passed() || res.Point != e.pt || res.Walk == nil || !res.Walk.Passed || !res.Boot.Passed {
		t.Fatalf("result %s: %s (%+v)", res.Result, res.Reason, res.Boot)
	}
	b := res.Boot
	if b.GuestIP != ip || len(b.Probes) != 2 || !b.Probes[0].Passed || !b.Probes[1].Passed || b.Probes[1].Status != http.StatusOK {
		t.Errorf("probes %+v", b.Probes)
	}
	if !(b.PoweredOnSeconds > 0 && b.PoweredOnSeconds <= b.HeartbeatSeconds && b.HeartbeatSeconds <= b.ProbesSeconds && b.ProbesSeconds <= res.Seconds) {
		t.Errorf("timings: powered on %v, heartbeat %v, probes %v, total %v", b.PoweredOnSeconds, b.HeartbeatSeconds, b.ProbesSeconds, res.Seconds)
	}
	if strings.Join(phases, ",") == "" || phases[len(phases)-1] != "record" {
		t.Errorf("phases %v", phases)
	}
	e.tornDown(t, res)
	e.recorded(t, res)
}

// TestBootVerificationNoHeartbeat: Tools never start: failed "no
// heartbeat within T", and still torn down.
func TestBootVerificationNoHeartbeat(t *testing.T) {
	e := setup(t, nil)
	e.l.SetNFSGuest(&lab.NFSGuest{ToolsRunning: false})
	res, err := e.m.Verify(context.Background(), verification.Request{Point: e.pt, Mode: verification.ModeBoot, Host: host, Datastore: ds0,
		Timeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "no heartbeat within 300ms (power poweredOn, Tools guestToolsNotRunning, heartbeat gray)"
	if res.Passed() || res.Reason != want || res.Boot.PoweredOnSeconds == 0 || res.Boot.HeartbeatSeconds != 0 {
		t.Fatalf("result %s: %q (boot %+v), want %q", res.Result, res.Reason, res.Boot, want)
	}
	e.tornDown(t, res)
	e.recorded(t, res)
}

// TestBootVerificationClosedPort: the guest is up but a probed port is
// closed: failed with the port and the refusal, torn down.
func TestBootVerificationClosedPort(t *testing.T) {
	e := setup(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close() // nothing listens there now
	p, _ := strconv.Atoi(port)
	e.l.SetNFSGuest(&lab.NFSGuest{ToolsRunning: true, IP: "127.0.0.1"})
	res, err := e.m.Verify(context.Background(), verification.Request{Point: e.pt, Mode: verification.ModeBoot, Host: host, Datastore: ds0,
		Network: "VM Network", Ports: []int{p}, Timeout: 30 * time.Second, ProbeTimeout: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "TCP port " + port + " at 127.0.0.1 not open within 200ms: "
	if res.Passed() || !strings.HasPrefix(res.Reason, want) || !strings.Contains(res.Reason, "connection refused") {
		t.Fatalf("result %s: %q, want %q…connection refused", res.Result, res.Reason, want)
	}
	if pr := res.Boot.Probes; len(pr) != 1 || pr[0].Passed || pr[0].Attempts < 2 {
		t.Errorf("probes %+v (a closed port is retried until the deadline)", pr)
	}
	if res.Boot.Network != "VM Network" || res.Boot.HeartbeatSeconds == 0 {
		t.Errorf("boot %+v", res.Boot)
	}
	e.tornDown(t, res)
	e.recorded(t, res)
}

// TestWalkVerificationDamaged: a directory block of the guest's ext4 is
// overwritten: the walk (no VM) fails naming the volume and the path.
func TestWalkVerificationDamaged(t *testing.T) {
	guestfstest.Need(t, false, "debugfs")
	e := setup(t, func(t *testing.T, img string) {
		out, err := exec.Command("debugfs", "-R", "blocks /etc", img).Output()
		if err != nil {
			t.Fatalf("debugfs: %v", err)
		}
		blk, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(img, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte(strings.Repeat("\xff", 4096)), blk*4096); err != nil {
			t.Fatal(err)
		}
	})
	res, err := e.m.Verify(context.Background(), verification.Request{Point: e.pt, Mode: verification.ModeWalk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed() || !strings.HasPrefix(res.Reason, "walk: ") || !strings.Contains(res.Reason, "d0p1 (ext4)") || !strings.Contains(res.Reason, "/etc") {
		t.Fatalf("result %s: %q", res.Result, res.Reason)
	}
	if res.Boot != nil || res.Walk == nil || res.Walk.Passed {
		t.Errorf("walk-only result %+v", res)
	}
	if n := e.l.NASDatastores(); len(n) != 0 {
		t.Errorf("a walk mounted %v", n)
	}
	e.recorded(t, res)
}
