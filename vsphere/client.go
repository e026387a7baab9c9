package vsphere

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Config says how to reach and authenticate to a vCenter (or ESXi host).
type Config struct {
	// URL is "https://vcenter.example.com" or ".../sdk"; "/sdk" is added
	// when the path is empty. User info in the URL is ignored.
	URL      string
	Username string
	// Password comes from a file or the environment, never a command line.
	Password string
	// Thumbprint pins the server certificate (SHA-256 or SHA-1, hex pairs
	// separated by colons, as vSphere shows it). Used when the certificate
	// does not chain to a trusted CA.
	Thumbprint string
	// CAFile is a PEM bundle of CAs to trust in addition to the system pool.
	CAFile string
	// Insecure skips certificate verification. Only when explicitly asked.
	Insecure bool
	// ApplianceID goes into the description marker of vmvault's snapshots so
	// that two appliances on one vCenter never remove each other's.
	ApplianceID string
	// KeepAlive is the idle interval after which a no-op call keeps the
	// session alive (default 5 min; negative disables).
	KeepAlive time.Duration
	// Retry is the one retry policy for transient faults (zero: DefaultRetry).
	Retry RetryPolicy
}

// RetryPolicy is the single place that decides how transient failures are
// retried: SOAP calls that are safe to repeat and datastore range reads.
type RetryPolicy struct {
	Attempts int           // total tries including the first
	Base     time.Duration // first backoff
	Max      time.Duration // backoff cap
}

// DefaultRetry: 5 tries, 200 ms doubling to 5 s, with jitter.
var DefaultRetry = RetryPolicy{Attempts: 5, Base: 200 * time.Millisecond, Max: 5 * time.Second}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = DefaultRetry.Attempts
	}
	if p.Base <= 0 {
		p.Base = DefaultRetry.Base
	}
	if p.Max <= 0 {
		p.Max = DefaultRetry.Max
	}
	return p
}

// backoff sleeps before try number attempt (1-based retry count).
func (p RetryPolicy) backoff(ctx context.Context, attempt int) error {
	d := p.Base << min(attempt-1, 16)
	if d > p.Max || d <= 0 {
		d = p.Max
	}
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stats counts what the client sent, for tests and diagnostics.
type Stats struct {
	SOAPCalls   int64 // SOAP requests put on the wire (each retry counts)
	Retries     int64 // SOAP and HTTP retries
	Relogins    int64 // transparent re-logins after an expired session
	RangeGets   int64 // datastore range GETs (each retry counts)
	BytesRead   int64 // payload bytes received by range reads
	BytesPushed int64 // payload bytes uploaded
}

// Client is one authenticated connection to a vCenter. It is safe for
// concurrent use.
type Client struct {
	cfg   Config
	url   *url.URL
	sc    *soap.Client
	vim   *vim25.Client
	retry RetryPolicy

	loginMu  sync.Mutex
	loginGen atomic.Int64
	lastUse  atomic.Int64 // unix nanos of the last SOAP call

	soapCalls, retries, relogins atomic.Int64
	rangeGets, bytesRead, pushed atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

// Connect dials, verifies the server certificate (CA, CAFile, thumbprint pin,
// or nothing when Insecure), logs in and starts the keep-alive.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	u, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Username == "" || cfg.Password == "" {
		return nil, fmt.Errorf("connect %s: username and password are required", u.Host)
	}
	if cfg.ApplianceID == "" {
		cfg.ApplianceID = "vmvault"
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = 5 * time.Minute
	}
	sc := soap.NewClient(u, cfg.Insecure)
	if cfg.Thumbprint != "" {
		pinTLS(sc, u.Host, cfg.Thumbprint)
	}
	if cfg.CAFile != "" {
		if err := sc.SetRootCAs(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("connect %s: CA file %s: %w", u.Host, cfg.CAFile, err)
		}
	}
	// Parallel range reads want more than the default 2 idle connections.
	sc.DefaultTransport().MaxIdleConnsPerHost = 32

	c := &Client{cfg: cfg, url: u, sc: sc, retry: cfg.Retry.withDefaults(), stop: make(chan struct{})}
	c.lastUse.Store(time.Now().UnixNano())
	vc, err := vim25.NewClient(ctx, &roundTripper{c: c})
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", u.Host, err)
	}
	// vim25.NewClient only fills in the SOAP client when it is the round
	// tripper; the vAPI (tags) client needs it.
	vc.Client = sc
	c.vim = vc
	if err := c.login(ctx); err != nil {
		return nil, err
	}
	if cfg.KeepAlive > 0 {
		c.wg.Add(1)
		go c.keepAlive(cfg.KeepAlive)
	}
	return c, nil
}

// pinTLS makes the client accept exactly the pinned certificate (and the
// host thumbprints vSphere hands out, e.g. with NFC leases) in one handshake,
// instead of govmomi's verify-then-retry dance.
func pinTLS(sc *soap.Client, host, thumbprint string) {
	pin := normalizeThumbprint(thumbprint)
	sc.SetThumbprint(host, pin)
	tc := sc.DefaultTransport().TLSClientConfig
	tc.InsecureSkipVerify = true // replaced by VerifyConnection below
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("vCenter sent no certificate")
		}
		cert := cs.PeerCertificates[0]
		s256, s1 := soap.ThumbprintSHA256(cert), soap.ThumbprintSHA1(cert)
		if s256 == pin || s1 == pin || sc.KnownThumbprint(s256) || (s1 != "" && sc.KnownThumbprint(s1)) {
			return nil
		}
		return fmt.Errorf("certificate thumbprint does not match the pinned %s (server has %s)", pin, s256)
	}
}

// normalizeThumbprint accepts "ab:cd:…", "AB CD …" or "abcd…" and returns
// vSphere's "AB:CD:…" form.
func normalizeThumbprint(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	hex := strings.Map(func(r rune) rune {
		if r == ':' || r == ' ' || r == '-' {
			return -1
		}
		return r
	}, s)
	if len(hex)%2 != 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(hex); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(hex[i : i+2])
	}
	return b.String()
}

func parseURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("connect: vCenter URL is required")
	}
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("connect: bad vCenter URL: %w", err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("connect: bad vCenter URL %q: no host", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = vim25.Path
	}
	u.User = nil
	return u, nil
}

// Close stops the keep-alive and logs out.
func (c *Client) Close(ctx context.Context) error {
	select {
	case <-c.stop:
		return nil
	default:
		close(c.stop)
	}
	c.wg.Wait()
	_, err := methods.Logout(ctx, c.sc, &types.Logout{This: *c.vim.ServiceContent.SessionManager})
	c.sc.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	return nil
}

// Stats returns the counters since Connect.
func (c *Client) Stats() Stats {
	return Stats{
		SOAPCalls: c.soapCalls.Load(), Retries: c.retries.Load(), Relogins: c.relogins.Load(),
		RangeGets: c.rangeGets.Load(), BytesRead: c.bytesRead.Load(), BytesPushed: c.pushed.Load(),
	}
}

// Host is the vCenter host:port this client talks to.
func (c *Client) Host() string { return c.url.Host }

// About describes the server ("VMware vCenter Server 8.0.2 build-…").
func (c *Client) About() string { return c.vim.ServiceContent.About.FullName }

// login authenticates with the inner SOAP client so that it never recurses
// through the re-login round tripper.
func (c *Client) login(ctx context.Context) error {
	req := types.Login{This: *c.vim.ServiceContent.SessionManager, UserName: c.cfg.Username, Password: c.cfg.Password}
	op := fmt.Sprintf("login to %s as %s", c.url.Host, c.cfg.Username)
	// A transient fault is retried: a Login that failed made no session, so
	// repeating it is safe (a refused password is not transient).
	for attempt := 1; ; attempt++ {
		c.soapCalls.Add(1)
		_, err := methods.Login(ctx, c.sc, &req)
		if err == nil {
			c.loginGen.Add(1)
			return nil
		}
		if ctx.Err() != nil || !transient(err) || isFault(err, &types.InvalidLogin{}) {
			return mapFault(op, err)
		}
		if attempt >= c.retry.Attempts {
			return mapFault(op, fmt.Errorf("%w after %d attempts: %w", ErrTransient, attempt, err))
		}
		c.retries.Add(1)
		if berr := c.retry.backoff(ctx, attempt); berr != nil {
			return mapFault(op, err)
		}
	}
}

// sessionActive reports whether the SOAP session is still logged in, read
// without going through the re-login round tripper.
func (c *Client) sessionActive(ctx context.Context) bool {
	var sm mo.SessionManager
	pc := property.DefaultCollector(&vim25.Client{Client: c.sc, ServiceContent: c.vim.ServiceContent, RoundTripper: c.sc})
	c.soapCalls.Add(1)
	if err := pc.RetrieveOne(ctx, *c.vim.ServiceContent.SessionManager, []string{"currentSession"}, &sm); err != nil {
		return false
	}
	return sm.CurrentSession != nil
}

// relogin logs in again unless another goroutine already did since gen.
func (c *Client) relogin(ctx context.Context, gen int64) error {
	c.loginMu.Lock()
	defer c.loginMu.Unlock()
	if c.loginGen.Load() != gen {
		return nil
	}
	c.relogins.Add(1)
	// A server that still knows the old session refuses a second Login on
	// it (a 401 from the file service can come with a live SOAP session);
	// logging out first makes the login fresh either way.
	_, _ = methods.Logout(ctx, c.sc, &types.Logout{This: *c.vim.ServiceContent.SessionManager})
	return c.login(ctx)
}

func (c *Client) keepAlive(idle time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(idle / 2)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if time.Since(time.Unix(0, c.lastUse.Load())) < idle {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			// Errors are not fatal here: the next real call re-logs in.
			_, _ = methods.GetCurrentTime(ctx, c.vim)
			cancel()
		}
	}
}

// roundTripper is the only SOAP retry and re-login layer: an expired session
// is re-established once and the call repeated; transient faults are retried
// for calls that are safe to repeat.
type roundTripper struct{ c *Client }

// maxRelogins bounds the re-logins of one call: a server that refuses
// every session must not loop.
const maxRelogins = 3

func (rt *roundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	c := rt.c
	name := methodName(req)
	// A call may meet more than one re-login: another goroutine's (a file
	// read answered 401/403 logs out and in again) can invalidate the
	// session while this call is in flight, after this call re-logged once.
	relogins := 0
	for attempt := 1; ; attempt++ {
		gen := c.loginGen.Load()
		if attempt > 1 || relogins > 0 {
			// The decoder leaves the previous attempt's fault in res.
			resetBody(res)
		}
		c.soapCalls.Add(1)
		c.lastUse.Store(time.Now().UnixNano())
		err := c.sc.RoundTrip(ctx, req, res)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		if relogins < maxRelogins && name != "Login" && name != "Logout" && isFault(err, &types.NotAuthenticated{}) && gen > 0 {
			relogins++
			if lerr := c.relogin(ctx, gen); lerr != nil {
				return fmt.Errorf("%s: session expired and re-login failed: %w", name, lerr)
			}
			attempt--
			continue
		}
		if !idempotent[name] || !transient(err) {
			return err
		}
		if attempt >= c.retry.Attempts {
			return fmt.Errorf("%s: %w after %d attempts: %w", name, ErrTransient, attempt, err)
		}
		c.retries.Add(1)
		if berr := c.retry.backoff(ctx, attempt); berr != nil {
			return err
		}
	}
}

func resetBody(res soap.HasFault) {
	v := reflect.ValueOf(res)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().Set(reflect.Zero(v.Elem().Type()))
	}
}

// methodName is "RetrievePropertiesEx" for *methods.RetrievePropertiesExBody.
func methodName(req soap.HasFault) string {
	t := reflect.TypeOf(req)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.TrimSuffix(t.Name(), "Body")
}

// idempotent lists SOAP methods that may be repeated after a transient
// failure without side effects (reads, view and filter housekeeping).
var idempotent = map[string]bool{
	"RetrieveServiceContent": true, "RetrieveProperties": true, "RetrievePropertiesEx": true,
	"ContinueRetrievePropertiesEx": true, "WaitForUpdatesEx": true, "CurrentTime": true,
	"CreateContainerView": true, "DestroyView": true, "DestroyPropertyFilter": true, "CreateFilter": true,
	"QueryChangedDiskAreas": true, "FindByInventoryPath": true, "FindByUuid": true,
	"HttpNfcLeaseProgress": true, "SessionIsActive": true, "HasPrivilegeOnEntities": true,
}

// transient classifies an error as worth retrying: network trouble, server
// busy, or a vSphere fault that says "try again".
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var se *httpStatusError
	if errors.As(err, &se) {
		return se.code >= 500 || se.code == http.StatusTooManyRequests || se.code == http.StatusRequestTimeout
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, errShortBody) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if fault.IsTransientError(err) {
		return true
	}
	// An injected or proxied "SystemError" often arrives as a bare soap fault.
	if f := faultOf(err); f != nil {
		switch f.(type) {
		case *types.SystemErrorFault, *types.SystemError, *types.HostCommunication, *types.Timedout, *types.RequestCanceled:
			return true
		}
	}
	return false
}

// httpStatusError is a non-success HTTP status from the datastore service.
type httpStatusError struct {
	code   int
	status string
	url    string
	// detail is the start of the answer's body ("file locked"): ESXi says
	// there why it refused, and the transport fallback reason shows it.
	detail string
}

func (e *httpStatusError) Error() string {
	if e.detail != "" {
		return fmt.Sprintf("%s: %s (%s)", e.url, e.status, e.detail)
	}
	return fmt.Sprintf("%s: %s", e.url, e.status)
}

// bodyDetail reads the first line of an error answer's body, bounded.
func bodyDetail(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 256))
	s := strings.TrimSpace(string(b))
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if strings.HasPrefix(s, "<") {
		return "" // an HTML error page says nothing the status does not
	}
	return s
}

var errShortBody = errors.New("short response body")

// defaultCallTimeout bounds clean-up calls made with a detached context.
const defaultCallTimeout = 2 * time.Minute
