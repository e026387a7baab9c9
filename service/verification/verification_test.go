package verification

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/instantvm"
	"github.com/vmvault/vmvault/service/verify"
	"github.com/vmvault/vmvault/vsphere"
)

var t0 = time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)

const pointID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

type fakePoints struct{}

func (fakePoints) Locate(_ context.Context, id string) (string, repository.Point, error) {
	if !strings.HasPrefix(pointID, id) || id == "" {
		return "", repository.Point{}, fmt.Errorf("restore point %s: %w", id, repository.ErrNotFound)
	}
	return "main", repository.Point{ID: pointID, VM: repository.VMIdentity{Name: "web01"}}, nil
}

// fakeBoot is an instant recovery that takes bootTime of the fake clock.
type fakeBoot struct {
	clk      *clock.Fake
	bootTime time.Duration
	startErr error
	stopErr  error

	mu     sync.Mutex
	starts []instantvm.StartRequest
	stops  []string
}

func (f *fakeBoot) Start(_ context.Context, req instantvm.StartRequest, progress func(string)) (instantvm.Record, error) {
	f.mu.Lock()
	f.starts = append(f.starts, req)
	f.mu.Unlock()
	progress("power-on")
	f.clk.Advance(f.bootTime)
	if f.startErr != nil {
		return instantvm.Record{ID: "s1", State: instantvm.StateFailed}, f.startErr
	}
	return instantvm.Record{ID: "s1", State: instantvm.StateRunning, VM: vsphere.VMRef{MoRef: "vm-7", Name: req.Name}}, nil
}

func (f *fakeBoot) Stop(ctx context.Context, id string) (instantvm.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, id)
	if ctx.Err() != nil {
		return instantvm.Record{}, ctx.Err()
	}
	return instantvm.Record{ID: id, State: instantvm.StateStopped}, f.stopErr
}

func (f *fakeBoot) stopped() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stops...)
}

// fakeGuest answers statuses in turn, repeating the last.
type fakeGuest struct {
	mu    sync.Mutex
	seq   []vsphere.GuestStatus
	calls int
}

func (g *fakeGuest) GuestStatus(context.Context, vsphere.VMRef) (vsphere.GuestStatus, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := min(g.calls, len(g.seq)-1)
	g.calls++
	return g.seq[i], nil
}

var (
	booting = vsphere.GuestStatus{PowerState: "poweredOn", ToolsRunningStatus: "guestToolsNotRunning", Heartbeat: "gray"}
	alive   = vsphere.GuestStatus{PowerState: "poweredOn", ToolsRunningStatus: "guestToolsRunning", Heartbeat: "green", IPAddress: "10.0.0.5"}
)

// fakeDialer accepts the addresses open lists (or sends them to a real
// server) and refuses the rest.
type fakeDialer struct {
	open map[string]string // guest address -> "" (accept) or a real address to dial
}

func (d fakeDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	real, ok := d.open[addr]
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	if real == "" {
		a, b := net.Pipe()
		b.Close()
		return a, nil
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, real)
}

type fakeWalker struct{ rep verify.Report }

func (w fakeWalker) VerifyPoint(context.Context, string, verify.Options) (verify.Report, error) {
	return w.rep, nil
}

type env struct {
	clk   *clock.Fake
	boot  *fakeBoot
	guest *fakeGuest
	m     *Manager
	dir   string
}

func newEnv(t *testing.T, statuses ...vsphere.GuestStatus) *env {
	t.Helper()
	clk := clock.NewFake(t0)
	e := &env{clk: clk, boot: &fakeBoot{clk: clk, bootTime: 30 * time.Second}, guest: &fakeGuest{seq: statuses}, dir: t.TempDir()}
	e.m = e.manager(t, Config{Dialer: fakeDialer{open: map[string]string{"10.0.0.5:22": ""}}})
	return e
}

func (e *env) manager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	cfg.Dir, cfg.Points, cfg.Clock, cfg.NoSync = e.dir, fakePoints{}, e.clk, true
	if cfg.Boot == nil {
		cfg.Boot, cfg.Guest = e.boot, e.guest
	}
	if cfg.Walker == nil {
		cfg.Walker = fakeWalker{rep: verify.Report{Passed: true, Verdict: "passed", Reason: "1 volume walked"}}
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// run runs Verify and moves the fake clock one poll at a time whenever
// the verification waits (its deadline and its poll timer armed).
func (e *env) run(ctx context.Context, req Request) (Result, error) {
	type out struct {
		r   Result
		err error
	}
	done := make(chan struct{})
	var o out
	go func() {
		defer close(done)
		o.r, o.err = e.m.Verify(ctx, req, nil)
	}()
	for e.clk.BlockUntil(2, done) {
		e.clk.Advance(DefaultPoll)
	}
	<-done
	return o.r, o.err
}

// TestBootPasses: the heartbeat turns green on the third look; the
// timings count from the start, the VM is torn down once and the result
// is recorded as the point's latest.
func TestBootPasses(t *testing.T) {
	e := newEnv(t, booting, booting, alive)
	res, err := e.run(context.Background(), Request{Point: pointID[:10], Mode: ModeBoot, Ports: []int{22}, By: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	b := res.Boot
	if !res.Passed() || b == nil || !b.Passed {
		t.Fatalf("result %+v boot %+v", res, b)
	}
	if b.PoweredOnSeconds != 30 || b.HeartbeatSeconds != 40 || b.ProbesSeconds != 40 || res.Seconds != 40 {
		t.Errorf("timings: powered on %v, heartbeat %v, probes %v, total %v; want 30, 40, 40, 40",
			b.PoweredOnSeconds, b.HeartbeatSeconds, b.ProbesSeconds, res.Seconds)
	}
	if b.GuestIP != "10.0.0.5" || len(b.Probes) != 1 || !b.Probes[0].Passed || b.Probes[0].Target != "10.0.0.5:22" {
		t.Errorf("probes %+v", b.Probes)
	}
	if got := e.boot.stopped(); len(got) != 1 || got[0] != "s1" {
		t.Errorf("stops %v", got)
	}
	if st := e.boot.starts[0]; !st.Isolated || st.NetworkMap != nil || st.Point != pointID || !strings.HasPrefix(st.Name, "web01-verify-") || st.By != "ops" {
		t.Errorf("start request %+v", st)
	}
	latest, ok := e.m.Latest(pointID)
	if !ok || latest.ID != res.ID || latest.Result != Passed || latest.Point != pointID || latest.Repository != "main" {
		t.Errorf("latest %+v, %v", latest, ok)
	}
}

// TestBootFails covers the ways a boot fails: each has its reason, and
// the VM is torn down whenever one was started.
func TestBootFails(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []vsphere.GuestStatus
		req      Request
		startErr error
		reason   string
		stops    int
		probes   int
	}{
		{"no heartbeat", []vsphere.GuestStatus{booting}, Request{Timeout: time.Minute},
			nil, "no heartbeat within 1m0s (power poweredOn, Tools guestToolsNotRunning, heartbeat gray)", 1, 0},
		{"powered off", []vsphere.GuestStatus{{PowerState: "poweredOff", Heartbeat: "green"}}, Request{Timeout: 20 * time.Second},
			nil, "no heartbeat within 20s (power poweredOff", 1, 0},
		{"closed port", []vsphere.GuestStatus{alive}, Request{Ports: []int{22, 23}, ProbeTimeout: 30 * time.Second},
			nil, "TCP port 23 at 10.0.0.5 not open within 30s: dial tcp: connection refused", 1, 2},
		{"no address", []vsphere.GuestStatus{{PowerState: "poweredOn", Heartbeat: "green"}}, Request{Ports: []int{22}, ProbeTimeout: 30 * time.Second},
			nil, "the guest reported no IP address within 30s", 1, 0},
		{"start fails", []vsphere.GuestStatus{alive}, Request{}, errors.New("no room on LocalDS_0"),
			"instant recovery failed: no room on LocalDS_0", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.statuses...)
			e.boot.startErr = tc.startErr
			tc.req.Point, tc.req.Mode = pointID, ModeBoot
			res, err := e.run(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed() || res.Boot == nil || res.Boot.Passed || !strings.HasPrefix(res.Reason, tc.reason) || res.Boot.Reason != res.Reason {
				t.Fatalf("result %s: %q, want a failure starting %q", res.Result, res.Reason, tc.reason)
			}
			if n := len(e.boot.stopped()); n != tc.stops {
				t.Errorf("%d stops, want %d", n, tc.stops)
			}
			if n := len(res.Boot.Probes); n != tc.probes {
				t.Errorf("probes %+v, want %d", res.Boot.Probes, tc.probes)
			}
			if l, ok := e.m.Latest(pointID); !ok || l.Result != Failed || l.Reason != res.Reason {
				t.Errorf("latest %+v", l)
			}
		})
	}
}

// TestHeartbeatDeadlineExact: a heartbeat that turns green at the very
// deadline is too late (the deadline wins a tie), one poll before is not.
func TestHeartbeatDeadlineExact(t *testing.T) {
	for _, tc := range []struct {
		looks  int // statuses before green
		passed bool
	}{{2, true}, {3, false}} {
		seq := make([]vsphere.GuestStatus, tc.looks, tc.looks+1)
		for i := range seq {
			seq[i] = booting
		}
		e := newEnv(t, append(seq, alive)...)
		res, err := e.run(context.Background(), Request{Point: pointID, Mode: ModeBoot, Timeout: 3 * DefaultPoll})
		if err != nil {
			t.Fatal(err)
		}
		if res.Passed() != tc.passed {
			t.Errorf("green after %d looks: %s (%s)", tc.looks, res.Result, res.Reason)
		}
	}
}

// TestHTTPProbe: the URL's host becomes the guest's address; 2xx passes,
// anything else fails with the status, a redirect is not followed.
func TestHTTPProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusNoContent)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path   string
		passed bool
		reason string
	}{
		{"/ok", true, ""},
		{"/down", false, "URL http://10.0.0.5:8080/down did not answer 2xx within 10s: answered 503 Service Unavailable"},
		{"/moved", false, "answered 302 Found"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			e := newEnv(t, alive)
			e.m = e.manager(t, Config{Dialer: fakeDialer{open: map[string]string{"10.0.0.5:8080": srv.Listener.Addr().String()}}})
			res, err := e.run(context.Background(), Request{Point: pointID, Mode: ModeBoot, URL: "http://guest:8080" + tc.path, ProbeTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed() != tc.passed || !strings.Contains(res.Reason, tc.reason) {
				t.Fatalf("%s: %q", res.Result, res.Reason)
			}
			p := res.Boot.Probes
			if len(p) != 1 || p[0].Kind != "http" || p[0].Target != "http://10.0.0.5:8080"+tc.path || p[0].Attempts < 1 {
				t.Errorf("probes %+v", p)
			}
			if !tc.passed && p[0].Attempts != 2 {
				t.Errorf("a failing probe was tried %d times in 10s of 5s polls, want 2", p[0].Attempts)
			}
		})
	}
}

// TestCancelTearsDown: a caller that gives up mid-wait gets its context's
// error, the VM is still stopped (on a context of its own) and nothing is
// recorded.
func TestCancelTearsDown(t *testing.T) {
	e := newEnv(t, booting)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Verify(ctx, Request{Point: pointID, Mode: ModeBoot}, nil)
		done <- err
	}()
	e.clk.BlockUntil(2, nil) // waiting for the heartbeat
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify: %v", err)
	}
	if got := e.boot.stopped(); len(got) != 1 {
		t.Fatalf("stops %v", got)
	}
	if _, ok := e.m.Latest(pointID); ok {
		t.Fatal("a cancelled verification was recorded")
	}
}

// TestTeardownFailure: the verdict is recorded, the caller hears that
// something is left in vCenter.
func TestTeardownFailure(t *testing.T) {
	e := newEnv(t, alive)
	e.boot.stopErr = errors.New("unmount: datastore busy")
	res, err := e.run(context.Background(), Request{Point: pointID, Mode: ModeBoot})
	if !errors.Is(err, ErrTeardown) || !strings.Contains(err.Error(), "datastore busy") || !strings.Contains(err.Error(), res.Boot.VMName) {
		t.Fatalf("Verify: %v", err)
	}
	if !res.Passed() || res.Boot.TeardownError == "" {
		t.Fatalf("result %+v", res)
	}
	if l, ok := e.m.Latest(pointID); !ok || l.ID != res.ID {
		t.Fatal("not recorded")
	}
}

// TestModes: walk needs no VM; both fails when either check fails and
// names it; a port group maps every NIC there instead of disconnecting.
func TestModes(t *testing.T) {
	bad := verify.Report{Passed: false, Verdict: "failed", Reason: "d0p1 (ext4): /etc: readdir: bad record"}
	for _, tc := range []struct {
		name    string
		walk    verify.Report
		req     Request
		result  string
		reason  string
		starts  int
		network string
	}{
		{"walk passes", verify.Report{Passed: true, Reason: "1 volume walked"}, Request{Mode: ModeWalk}, Passed, "1 volume walked", 0, ""},
		{"walk fails", bad, Request{Mode: ModeWalk}, Failed, "walk: d0p1 (ext4): /etc: readdir: bad record", 0, ""},
		{"both, walk fails", bad, Request{Mode: ModeBoth, Network: "isolated-pg"}, Failed, "walk: d0p1 (ext4)", 1, "isolated-pg"},
		{"both pass", verify.Report{Passed: true, Reason: "1 volume walked"}, Request{Mode: ModeBoth}, Passed, "1 volume walked; booted: heartbeat green 0s after the start", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, alive)
			e.boot.bootTime = 0
			e.m = e.manager(t, Config{Walker: fakeWalker{rep: tc.walk}})
			tc.req.Point = pointID
			res, err := e.run(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Result != tc.result || !strings.HasPrefix(res.Reason, tc.reason) || res.Mode != tc.req.Mode {
				t.Fatalf("%s %s: %q", res.Mode, res.Result, res.Reason)
			}
			if (res.Walk == nil) != (tc.req.Mode == ModeBoot) || (res.Boot == nil) != (tc.req.Mode == ModeWalk) {
				t.Errorf("walk %v boot %v for mode %s", res.Walk != nil, res.Boot != nil, tc.req.Mode)
			}
			if len(e.boot.starts) != tc.starts {
				t.Fatalf("%d starts", len(e.boot.starts))
			}
			if tc.starts > 0 {
				st := e.boot.starts[0]
				want := map[string]string(nil)
				if tc.network != "" {
					want = map[string]string{instantvm.AnyNetwork: tc.network}
				}
				if st.Isolated != (tc.network == "") || fmt.Sprint(st.NetworkMap) != fmt.Sprint(want) {
					t.Errorf("start %+v", st)
				}
			}
		})
	}
}

// TestBadRequests are refused before anything runs or is recorded.
func TestBadRequests(t *testing.T) {
	e := newEnv(t, alive)
	walkOnly := e.manager(t, Config{Boot: nil, Guest: nil})
	walkOnly.cfg.Boot, walkOnly.cfg.Guest = nil, nil
	for _, tc := range []struct {
		name string
		m    *Manager
		req  Request
		want error
	}{
		{"mode", e.m, Request{Point: pointID, Mode: "reboot"}, ErrInvalid},
		{"port", e.m, Request{Point: pointID, Mode: ModeBoot, Ports: []int{70000}}, ErrInvalid},
		{"port twice", e.m, Request{Point: pointID, Mode: ModeBoot, Ports: []int{22, 22}}, ErrInvalid},
		{"url", e.m, Request{Point: pointID, Mode: ModeBoot, URL: "ftp://guest/"}, ErrInvalid},
		{"probes without boot", e.m, Request{Point: pointID, Mode: ModeWalk, Ports: []int{22}}, ErrInvalid},
		{"no point", e.m, Request{Mode: ModeWalk}, ErrInvalid},
		{"unknown point", e.m, Request{Point: "ffff", Mode: ModeWalk}, repository.ErrNotFound},
		{"boot unavailable", walkOnly, Request{Point: pointID, Mode: ModeBoth}, ErrBootUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.m.Verify(context.Background(), tc.req, nil); !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
	if len(e.boot.starts) != 0 {
		t.Errorf("a bad request started %d VMs", len(e.boot.starts))
	}
	if _, ok := e.m.Latest(pointID); ok {
		t.Error("a bad request was recorded")
	}
	// The default mode never boots.
	if r, _ := e.m.Normalize(Request{Point: pointID}); r.Mode != ModeWalk || r.Timeout != DefaultTimeout {
		t.Errorf("default request: %+v", r)
	}
}

// TestResultsKept: results survive a restart, the newest is the point's
// latest, only KeepPerPoint are kept, and Prune drops a deleted point's.
func TestResultsKept(t *testing.T) {
	e := newEnv(t, alive)
	e.m = e.manager(t, Config{KeepPerPoint: 3})
	var last Result
	for i := 0; i < 5; i++ {
		r, err := e.run(context.Background(), Request{Point: pointID, Mode: ModeWalk})
		if err != nil {
			t.Fatal(err)
		}
		last = r
		e.clk.Advance(time.Minute)
	}
	// A damaged file and a stray one do not hide the rest.
	if err := os.WriteFile(filepath.Join(e.dir, pointID, "00000000000000000001-x.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	m2 := e.manager(t, Config{KeepPerPoint: 3})
	l, ok := m2.Latest(pointID)
	if !ok || l.ID != last.ID || l.Result != Passed {
		t.Fatalf("latest after reopen %+v", l)
	}
	h, err := m2.History(pointID)
	if err != nil || len(h) != 3 || h[0].ID != last.ID || !h[0].Finished.After(h[1].Finished) {
		t.Fatalf("history %d results, %v", len(h), err)
	}
	if err := m2.Prune(func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, ok := m2.Latest(pointID); ok {
		t.Error("pruned point still has a result")
	}
	if _, err := os.Stat(filepath.Join(e.dir, pointID)); !os.IsNotExist(err) {
		t.Errorf("pruned results left: %v", err)
	}
}

// TestMaxBoots: a second boot waits for the first one's slot.
func TestMaxBoots(t *testing.T) {
	e := newEnv(t, booting)
	e.m = e.manager(t, Config{MaxBoots: 1})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.m.Verify(context.Background(), Request{Point: pointID, Mode: ModeBoot, Timeout: time.Minute}, nil)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	e.clk.BlockUntil(2, nil) // one verification waits for its heartbeat
	e.boot.mu.Lock()
	n := len(e.boot.starts)
	e.boot.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d boots at once with MaxBoots 1", n)
	}
	for e.clk.BlockUntil(2, done) {
		e.clk.Advance(DefaultPoll)
	}
	<-done
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(e.boot.starts) != 2 || len(e.boot.stopped()) != 2 {
		t.Fatalf("starts %d stops %d", len(e.boot.starts), len(e.boot.stopped()))
	}
}
