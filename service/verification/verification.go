package verification

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/instantvm"
	"github.com/vmvault/vmvault/service/verify"
	"github.com/vmvault/vmvault/vsphere"
)

// Modes.
const (
	ModeWalk = "walk"
	ModeBoot = "boot"
	ModeBoth = "both"
)

// Verdicts.
const (
	Passed = "passed"
	Failed = "failed"
)

// Defaults of Config.
const (
	DefaultTimeout      = 10 * time.Minute
	DefaultProbeTimeout = 2 * time.Minute
	DefaultPoll         = 5 * time.Second
	DefaultMaxBoots     = 2
	DefaultKeepPerPoint = 10
	// teardownTimeout bounds the Stop that always follows a boot; it runs
	// on a context of its own so that a cancelled caller still tears down.
	teardownTimeout = 5 * time.Minute
	// attemptTimeout bounds one probe attempt (a dial, an HTTP request).
	attemptTimeout = 10 * time.Second
)

// Sentinel errors callers branch on.
var (
	// ErrInvalid: the request is wrong (mode, ports, URL).
	ErrInvalid = errors.New("invalid verification request")
	// ErrBootUnavailable: boot mode needs instant recovery (the daemon's
	// instant section) and a vCenter; walk mode works without.
	ErrBootUnavailable = errors.New("boot verification needs instant recovery (the instant section) and a vCenter")
	// ErrTeardown: the verification ran (its result is recorded) but
	// tearing the VM down failed: something may be left in vCenter.
	ErrTeardown = errors.New("verification VM teardown failed")
)

// Booter runs instant recoveries (*instantvm.Manager).
type Booter interface {
	Start(ctx context.Context, req instantvm.StartRequest, progress func(phase string)) (instantvm.Record, error)
	Stop(ctx context.Context, id string) (instantvm.Record, error)
}

// Guest reads a VM's guest state (*vsphere.Client).
type Guest interface {
	GuestStatus(ctx context.Context, vm vsphere.VMRef) (vsphere.GuestStatus, error)
}

// Walker is the no-boot check (*verify.Service).
type Walker interface {
	VerifyPoint(ctx context.Context, point string, opts verify.Options) (verify.Report, error)
}

// Points finds restore points (service/repos.Set).
type Points interface {
	Locate(ctx context.Context, id string) (string, repository.Point, error)
}

// Dialer opens the probes' connections (*net.Dialer).
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

var (
	_ Booter = (*instantvm.Manager)(nil)
	_ Guest  = (*vsphere.Client)(nil)
	_ Walker = (*verify.Service)(nil)
)

// Config configures a Manager.
type Config struct {
	// Dir keeps the results (required).
	Dir    string
	Points Points
	Walker Walker
	// Boot and Guest make boot mode available; nil: ErrBootUnavailable.
	Boot  Booter
	Guest Guest
	// Dialer for probes; default a *net.Dialer.
	Dialer Dialer
	Clock  clock.Clock
	// Poll is how often the guest is asked and a failed probe retried.
	Poll time.Duration
	// Timeout (heartbeat) and ProbeTimeout are a request's defaults.
	Timeout, ProbeTimeout time.Duration
	// MaxBoots bounds boot verifications at once (each runs a VM).
	MaxBoots int
	// KeepPerPoint is how many results are kept per point.
	KeepPerPoint int
	// NoSync skips fsync of result files (tests).
	NoSync bool
}

// Request asks for one verification.
type Request struct {
	Point string
	Mode  string // walk (default), boot or both
	// Network puts every NIC on this (isolated) port group; "" leaves
	// every NIC disconnected.
	Network string
	// Where the VM runs (instantvm.StartRequest's fields).
	Datacenter, Host, Folder, Datastore string
	// Ports must accept a TCP connection at the guest's IP address.
	Ports []int
	// URL must answer 2xx; its host is replaced by the guest's IP
	// address, its port kept ("http://guest:8080/health").
	URL string
	// Timeout for the heartbeat, ProbeTimeout for the probes once the
	// heartbeat is green; zero: the Manager's defaults.
	Timeout, ProbeTimeout time.Duration
	// ReadData makes the walk read every file's bytes too.
	ReadData bool
	By       string
}

// Result is one verification as recorded.
type Result struct {
	Version    int            `json:"version"`
	ID         string         `json:"id"`
	Point      string         `json:"point"`
	Repository string         `json:"repository"`
	VM         string         `json:"vm"`
	Mode       string         `json:"mode"`
	Result     string         `json:"result"` // passed | failed
	Reason     string         `json:"reason"`
	Started    time.Time      `json:"started"`
	Finished   time.Time      `json:"finished"`
	Seconds    float64        `json:"seconds"`
	By         string         `json:"by,omitempty"`
	Boot       *Boot          `json:"boot,omitempty"`
	Walk       *verify.Report `json:"walk,omitempty"`
}

// Passed says whether the point passed.
func (r Result) Passed() bool { return r.Result == Passed }

// Boot is what a boot verification saw. The *Seconds timings count from
// the start of the instant recovery; zero when the step was not reached.
type Boot struct {
	Session          string  `json:"session"` // the instant recovery session
	VMName           string  `json:"vmName"`
	Network          string  `json:"network,omitempty"` // "" = every NIC disconnected
	Passed           bool    `json:"passed"`
	Reason           string  `json:"reason"`
	PoweredOnSeconds float64 `json:"poweredOnSeconds"`
	HeartbeatSeconds float64 `json:"heartbeatSeconds"`
	ProbesSeconds    float64 `json:"probesSeconds"`
	GuestIP          string  `json:"guestIp,omitempty"`
	Probes           []Probe `json:"probes,omitempty"`
	// TeardownError says why the VM could not be torn down (it may still
	// be in vCenter); "" when it was.
	TeardownError string `json:"teardownError,omitempty"`
}

// Probe is one probe's outcome.
type Probe struct {
	Kind     string `json:"kind"`   // tcp | http
	Target   string `json:"target"` // ip:port or the URL asked
	Passed   bool   `json:"passed"`
	Status   int    `json:"status,omitempty"` // HTTP status of the last answer
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts"`
}

// Manager runs verifications and keeps their results.
type Manager struct {
	cfg   Config
	clk   clock.Clock
	store *store
	boots chan struct{}
}

// New returns a Manager over the results kept in cfg.Dir.
func New(cfg Config) (*Manager, error) {
	if cfg.Dir == "" || cfg.Points == nil {
		return nil, fmt.Errorf("%w: a result directory and Points are required", ErrInvalid)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Dialer == nil {
		cfg.Dialer = &net.Dialer{}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.MaxBoots <= 0 {
		cfg.MaxBoots = DefaultMaxBoots
	}
	if cfg.KeepPerPoint <= 0 {
		cfg.KeepPerPoint = DefaultKeepPerPoint
	}
	st, err := openStore(cfg.Dir, cfg.KeepPerPoint, cfg.NoSync)
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, clk: cfg.Clock, store: st, boots: make(chan struct{}, cfg.MaxBoots)}, nil
}

// CanBoot says whether boot mode is available.
func (m *Manager) CanBoot() bool { return m.cfg.Boot != nil && m.cfg.Guest != nil }

// Latest returns the newest result of a point (full id).
func (m *Manager) Latest(point string) (Result, bool) { return m.store.latestOf(point) }

// History returns a point's kept results, newest first.
func (m *Manager) History(point string) ([]Result, error) { return m.store.history(point) }

// Prune drops the results of points keep says are gone.
func (m *Manager) Prune(keep func(point string) bool) error { return m.store.prune(keep) }

func newID() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// Normalize fills a request's defaults and checks it; the API calls it
// before it starts a task so that a bad request is refused at once.
func (m *Manager) Normalize(req Request) (Request, error) {
	if req.Mode == "" {
		// Booting is asked for, never assumed: it runs a VM in vCenter.
		req.Mode = ModeWalk
	}
	switch req.Mode {
	case ModeWalk, ModeBoot, ModeBoth:
	default:
		return req, fmt.Errorf("%w: mode %q: want walk, boot or both", ErrInvalid, req.Mode)
	}
	if req.Point == "" {
		return req, fmt.Errorf("%w: no restore point", ErrInvalid)
	}
	booting := req.Mode != ModeWalk
	if booting && !m.CanBoot() {
		return req, ErrBootUnavailable
	}
	if !booting && (len(req.Ports) > 0 || req.URL != "" || req.Network != "") {
		return req, fmt.Errorf("%w: ports, url and network probe a booted VM: use mode boot or both", ErrInvalid)
	}
	seen := map[int]bool{}
	for _, p := range req.Ports {
		if p < 1 || p > 65535 {
			return req, fmt.Errorf("%w: port %d: want 1-65535", ErrInvalid, p)
		}
		if seen[p] {
			return req, fmt.Errorf("%w: port %d listed twice", ErrInvalid, p)
		}
		seen[p] = true
	}
	if req.URL != "" {
		if _, err := probeURL(req.URL, "192.0.2.1"); err != nil {
			return req, err
		}
	}
	if req.Timeout < 0 || req.ProbeTimeout < 0 {
		return req, fmt.Errorf("%w: negative timeout", ErrInvalid)
	}
	if req.Timeout == 0 {
		req.Timeout = m.cfg.Timeout
	}
	if req.ProbeTimeout == 0 {
		req.ProbeTimeout = m.cfg.ProbeTimeout
	}
	return req, nil
}

// probeURL is raw with its host replaced by ip.
func probeURL(raw, ip string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("%w: url %q: want http(s)://ANY-HOST[:PORT]/PATH (the host is replaced by the guest's address)", ErrInvalid, raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%w: url %q: bad port", ErrInvalid, raw)
		}
		u.Host = net.JoinHostPort(ip, p)
	} else {
		u.Host = ip
		if strings.Contains(ip, ":") {
			u.Host = "[" + ip + "]"
		}
	}
	return u.String(), nil
}

// Verify runs one verification and records its result. A point that
// fails is a result with Result "failed" and a nil error; an error means
// the verification could not run (nothing recorded: a bad request, an
// unknown point, a cancelled context) or, with ErrTeardown, that it ran
// and was recorded but left something in vCenter. progress, when set,
// gets each phase.
func (m *Manager) Verify(ctx context.Context, req Request, progress func(phase string)) (Result, error) {
	req, err := m.Normalize(req)
	if err != nil {
		return Result{}, err
	}
	report := func(p string) {
		if progress != nil {
			progress(p)
		}
	}
	repoName, p, err := m.cfg.Points.Locate(ctx, req.Point)
	if err != nil {
		return Result{}, err
	}
	start := m.clk.Now()
	res := Result{Version: 1, ID: newID(), Point: p.ID, Repository: repoName, VM: p.VM.Name, Mode: req.Mode,
		Started: start.UTC(), By: req.By}
	var reasons []string
	if req.Mode != ModeBoot {
		report("walk")
		if m.cfg.Walker == nil {
			return Result{}, fmt.Errorf("%w: no file-system walker configured", ErrInvalid)
		}
		rep, err := m.cfg.Walker.VerifyPoint(ctx, p.ID, verify.Options{ReadData: req.ReadData, Clock: m.clk})
		switch {
		case ctx.Err() != nil:
			return Result{}, fmt.Errorf("verify %s: %w", p.ID, ctx.Err())
		case err != nil:
			// The point could not be opened: as much a failed point as
			// a damaged file system.
			reasons = append(reasons, "walk: "+err.Error())
		case !rep.Passed:
			res.Walk = &rep
			reasons = append(reasons, "walk: "+rep.Reason)
		default:
			res.Walk = &rep
		}
	}
	var teardown error
	if req.Mode != ModeWalk {
		select {
		case m.boots <- struct{}{}:
		case <-ctx.Done():
			return Result{}, fmt.Errorf("verify %s: waiting for a boot slot: %w", p.ID, ctx.Err())
		}
		b, err := m.boot(ctx, p, req, report)
		<-m.boots
		if b.TeardownError != "" {
			teardown = fmt.Errorf("%w: %s (check vCenter for VM %q)", ErrTeardown, b.TeardownError, b.VMName)
		}
		if err != nil {
			return Result{}, errors.Join(err, teardown)
		}
		res.Boot = &b
		if !b.Passed {
			reasons = append(reasons, b.Reason)
		}
	}
	res.Finished = m.clk.Now().UTC()
	res.Seconds = res.Finished.Sub(res.Started).Seconds()
	res.Result, res.Reason = Passed, passedReason(res)
	if len(reasons) > 0 {
		res.Result, res.Reason = Failed, strings.Join(reasons, "; ")
	}
	report("record")
	if err := m.store.save(res); err != nil {
		return res, errors.Join(err, teardown)
	}
	return res, teardown
}

func passedReason(r Result) string {
	var parts []string
	if r.Walk != nil {
		parts = append(parts, r.Walk.Reason)
	}
	if b := r.Boot; b != nil {
		s := fmt.Sprintf("booted: heartbeat green %.0fs after the start", b.HeartbeatSeconds)
		if n := len(b.Probes); n > 0 {
			s += fmt.Sprintf(", %d probe(s) answered", n)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// boot runs the boot check. Its error is for a verification that could
// not be judged (the caller's context ended); what the point failed is in
// Boot.Reason. The VM is always torn down.
func (m *Manager) boot(ctx context.Context, p repository.Point, req Request, report func(string)) (b Boot, err error) {
	b.Network = req.Network
	b.VMName = fmt.Sprintf("%s-verify-%s", p.VM.Name, newID()[:6])
	sr := instantvm.StartRequest{Point: p.ID, Name: b.VMName, Datacenter: req.Datacenter, Host: req.Host, Folder: req.Folder,
		Datastore: req.Datastore, Isolated: req.Network == "", By: req.By}
	if req.Network != "" {
		sr.NetworkMap = map[string]string{instantvm.AnyNetwork: req.Network}
	}
	start := m.clk.Now()
	since := func() float64 { return m.clk.Since(start).Seconds() }
	report("instant recovery")
	rec, err := m.cfg.Boot.Start(ctx, sr, report)
	b.Session = rec.ID
	if err != nil {
		// Start undid what it did.
		if ctx.Err() != nil {
			return b, fmt.Errorf("verify %s: %w", p.ID, ctx.Err())
		}
		b.Reason = "instant recovery failed: " + err.Error()
		return b, nil
	}
	defer func() {
		report("teardown")
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if _, serr := m.cfg.Boot.Stop(tctx, rec.ID); serr != nil {
			b.TeardownError = serr.Error()
		}
	}()
	b.PoweredOnSeconds = since()

	report("heartbeat")
	st, reason, err := m.waitAlive(ctx, rec.VM, req.Timeout)
	if err != nil {
		return b, fmt.Errorf("verify %s: %w", p.ID, err)
	}
	if reason != "" {
		b.Reason = reason
		return b, nil
	}
	b.HeartbeatSeconds = since()

	if len(req.Ports) > 0 || req.URL != "" {
		report("probes")
		reason, err := m.probe(ctx, rec.VM, st, req, &b)
		if err != nil {
			return b, fmt.Errorf("verify %s: %w", p.ID, err)
		}
		if reason != "" {
			b.Reason = reason
			return b, nil
		}
		b.ProbesSeconds = since()
	}
	b.Passed = true
	return b, nil
}

// wait waits one poll interval; it says false when the deadline passed
// first (checked before the poll, so that a deadline and a poll due at
// once end the wait).
func (m *Manager) wait(ctx context.Context, deadline clock.Timer) (bool, error) {
	poll := m.clk.NewTimer(m.cfg.Poll)
	defer poll.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-deadline.C():
		return false, nil
	case <-poll.C():
	}
	select {
	case <-deadline.C():
		return false, nil
	default:
		return true, nil
	}
}

// waitAlive polls the guest until it is powered on with a green
// heartbeat; the reason says why not when timeout passed first.
func (m *Manager) waitAlive(ctx context.Context, vm vsphere.VMRef, timeout time.Duration) (vsphere.GuestStatus, string, error) {
	deadline := m.clk.NewTimer(timeout)
	defer deadline.Stop()
	var last vsphere.GuestStatus
	var lastErr error
	for {
		st, err := m.cfg.Guest.GuestStatus(ctx, vm)
		if err == nil {
			last, lastErr = st, nil
			if st.Alive() {
				return st, "", nil
			}
		} else {
			lastErr = err
		}
		ok, err := m.wait(ctx, deadline)
		if err != nil {
			return last, "", err
		}
		if !ok {
			return last, fmt.Sprintf("no heartbeat within %s (%s)", timeout, describe(last, lastErr)), nil
		}
	}
}

func describe(st vsphere.GuestStatus, err error) string {
	if err != nil {
		return "last status read failed: " + err.Error()
	}
	hb := st.Heartbeat
	if hb == "" {
		hb = "not reported"
	}
	tools := st.ToolsRunningStatus
	if tools == "" {
		tools = "not reported"
	}
	return fmt.Sprintf("power %s, Tools %s, heartbeat %s", st.PowerState, tools, hb)
}

// probe runs the TCP and HTTP probes at the guest's address, each retried
// until req.ProbeTimeout after the heartbeat went green.
func (m *Manager) probe(ctx context.Context, vm vsphere.VMRef, st vsphere.GuestStatus, req Request, b *Boot) (string, error) {
	deadline := m.clk.NewTimer(req.ProbeTimeout)
	defer deadline.Stop()
	ip := guestIP(st)
	for ip == "" {
		ok, err := m.wait(ctx, deadline)
		if err != nil {
			return "", err
		}
		if !ok {
			return fmt.Sprintf("the guest reported no IP address within %s (probes need one)", req.ProbeTimeout), nil
		}
		if s, err := m.cfg.Guest.GuestStatus(ctx, vm); err == nil {
			ip = guestIP(s)
		}
	}
	b.GuestIP = ip
	try := func(pr *Probe, attempt func(context.Context) error) (bool, error) {
		for {
			pr.Attempts++
			actx, cancel := context.WithTimeout(ctx, attemptTimeout)
			err := attempt(actx)
			cancel()
			if err == nil {
				pr.Passed, pr.Error = true, ""
				return true, nil
			}
			pr.Error = err.Error()
			ok, werr := m.wait(ctx, deadline)
			if werr != nil {
				return false, werr
			}
			if !ok {
				return false, nil
			}
		}
	}
	for _, port := range req.Ports {
		addr := net.JoinHostPort(ip, strconv.Itoa(port))
		b.Probes = append(b.Probes, Probe{Kind: "tcp", Target: addr})
		pr := &b.Probes[len(b.Probes)-1]
		ok, err := try(pr, func(ctx context.Context) error {
			c, err := m.cfg.Dialer.DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		})
		if err != nil {
			return "", err
		}
		if !ok {
			return fmt.Sprintf("TCP port %d at %s not open within %s: %s", port, ip, req.ProbeTimeout, pr.Error), nil
		}
	}
	if req.URL != "" {
		target, err := probeURL(req.URL, ip)
		if err != nil {
			return err.Error(), nil
		}
		b.Probes = append(b.Probes, Probe{Kind: "http", Target: target})
		pr := &b.Probes[len(b.Probes)-1]
		client := &http.Client{
			Transport: &http.Transport{DialContext: m.cfg.Dialer.DialContext, DisableKeepAlives: true,
				// A guest's certificate is its own (self-signed, for a
				// name that is not its isolated address): the probe proves
				// the service answers, not who it is.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		ok, err := try(pr, func(ctx context.Context) error {
			hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(hreq)
			if err != nil {
				return err
			}
			resp.Body.Close()
			pr.Status = resp.StatusCode
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				return fmt.Errorf("answered %s", resp.Status)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		if !ok {
			return fmt.Sprintf("URL %s did not answer 2xx within %s: %s", target, req.ProbeTimeout, pr.Error), nil
		}
	}
	return "", nil
}

// guestIP is the address probes use: Tools' primary address, else the
// first IPv4 address of any NIC, else the first address.
func guestIP(st vsphere.GuestStatus) string {
	if st.IPAddress != "" {
		return st.IPAddress
	}
	for _, ip := range st.IPs {
		if a := net.ParseIP(ip); a != nil && a.To4() != nil && !a.IsLinkLocalUnicast() {
			return ip
		}
	}
	if len(st.IPs) > 0 {
		return st.IPs[0]
	}
	return ""
}

// CheckURL reports whether raw is a probe URL a Request accepts (the
// verification jobs' validation shares it).
func CheckURL(raw string) error {
	_, err := probeURL(raw, "192.0.2.1")
	return err
}
