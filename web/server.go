package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/console"
)

// Config wires a Server. Auth, Tasks, Jobs, Points and Repositories are
// required; the rest may be nil, and the routes that need them answer 501
// (Backups, Restores) or work without them (Inventory: VMs known only from
// restore points; Scheduler: run now is unavailable; Events: empty).
type Config struct {
	Clock        clock.Clock
	Logger       *slog.Logger
	Auth         *auth.Manager
	Tasks        *task.Registry
	Jobs         JobStore
	Scheduler    Scheduler
	Inventory    policy.Inventory
	Points       Points
	Repositories Repositories
	// KnownRepository validates a job's repository; default: Repositories lists it.
	KnownRepository func(name string) bool
	Events          EventLog
	VMStates        VMStates
	Backups         Backups
	Restores        Restores
	// Instant runs instant recoveries (nil: 501 on those routes).
	Instant InstantRecoveries
	// Prober tests a VM's transports (nil: 501).
	Prober TransportProber
	// Verifier verifies restore points (nil: 501).
	Verifier Verifier
	Settings SettingsStore
	// Appliance edits the vCenter, SMTP and maintenance sections; nil: 501.
	Appliance ApplianceSettings
	// AddRepository creates or opens repositories at runtime; nil: 501.
	AddRepository RepositoryAdder
	// RemoveRepository detaches repositories at runtime; nil: 501.
	RemoveRepository RepositoryRemover
	// Mailer sends test mails; nil: SMTP is not configured (409 smtp_not_configured).
	Mailer Mailer
	// Topology serves GET /inventory and /restore-targets; nil: no vCenter (503).
	Topology Topology
	// Tags serves GET /tags; nil: no vCenter (503).
	Tags TagSource
	// Runs serves GET /jobs/{id}/runs; default: Jobs when it implements RunLog.
	Runs RunLog
	// VCenter tests vCenter connections; nil: 501.
	VCenter VCenterTester
	// Files serves file-level restore (browse, download, search); nil: 501.
	// Downloads are recorded through Events when it has AddEvent.
	Files FileService
	// Approvals holds destructive actions (delete a point, shorten a
	// retention, remove a repository) for a delay; nil or a zero delay: they act at once.
	Approvals Approvals
	// CopyJobs serves /copy-jobs and the dashboard's offsite copies; nil: 501.
	CopyJobs CopyJobs
	// VerificationJobs serves /verification-jobs; nil: 501.
	VerificationJobs VerificationJobs
	// DefaultSettings are returned before any PUT /settings.
	DefaultSettings Settings
	// Metrics registry; nil makes a private one.
	Metrics *prometheus.Registry
	// TrustProxy makes the login rate limit use X-Forwarded-For's first hop.
	TrustProxy bool
	// StreamKeepAlive is how often an idle SSE stream gets a comment; default 15s.
	StreamKeepAlive time.Duration
}

// Server is the HTTP API.
type Server struct {
	cfg       Config
	engine    *gin.Engine
	routes    []route
	metrics   *metrics
	hub       *eventHub
	keepAlive time.Duration
	done      chan struct{} // closed by Close: streams end
	closeOnce sync.Once
	scopeInv  scopeInvCache // the inventory scopes are judged on
}

// handler is the one handler signature. A handler returns the response body
// (wrap it with withStatus for a status other than 200) or an error for the
// adapter to map; a handler that streams writes itself and returns (nil, nil).
type handler func(c *gin.Context) (any, error)

type statusBody struct {
	status int
	body   any
}

func withStatus(status int, body any) any { return statusBody{status, body} }

// route is one line of the route table: who may call it and what runs.
type route struct {
	method, path string
	role         auth.Role // "" = public
	scope        scopeClass
	h            handler
}

// Route describes a registered API route (for tests and documentation).
type Route struct {
	Method, Path string
	Role         auth.Role // "" = no authentication
	// Scope says how the route honours a scoped principal: "point-id",
	// "repository-id", "task-id" (404 outside the scope), "filtered" (lists
	// leave out what it does not allow), "body" (points, VMs or a repository
	// named in the body answer as unknown ones), "not-applicable".
	Scope string
}

const (
	sessionCookie = "vmvault_session"
	csrfCookie    = "vmvault_csrf"
	csrfHeader    = "X-CSRF-Token"
	principalKey  = "vmvault.principal"
)

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	if cfg.Auth == nil || cfg.Tasks == nil || cfg.Jobs == nil || cfg.Points == nil || cfg.Repositories == nil {
		return nil, errors.New("web config: Auth, Tasks, Jobs, Points and Repositories are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultSettings.TimeZone == "" {
		cfg.DefaultSettings.TimeZone = "UTC"
	}
	if cfg.DefaultSettings.EventRetentionDays == 0 {
		cfg.DefaultSettings.EventRetentionDays = 90
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.Runs == nil {
		cfg.Runs, _ = cfg.Jobs.(RunLog)
	}
	if cfg.StreamKeepAlive <= 0 {
		cfg.StreamKeepAlive = sseKeepAlive
	}
	s := &Server{cfg: cfg, hub: newEventHub(), keepAlive: cfg.StreamKeepAlive, done: make(chan struct{})}
	s.metrics = newMetrics(s, cfg.Metrics)
	for _, sc := range []string{auth.LockoutAddress, auth.LockoutUserAddress, auth.LockoutUser} {
		s.metrics.lockouts.WithLabelValues(sc) // present at 0 before the first lockout
	}
	cfg.Auth.OnLockout(s.observeLockout)
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.Use(securityHeaders, s.recover)
	cons := console.New()
	e.NoRoute(func(c *gin.Context) {
		if isConsolePath(c.Request) {
			cons.ServeHTTP(c.Writer, c.Request)
			return
		}
		s.writeError(c, &apiError{status: http.StatusNotFound, code: "not_found", msg: "no such route"})
	})
	e.NoMethod(func(c *gin.Context) {
		s.writeError(c, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", msg: "method not allowed"})
	})
	s.routes = s.table()
	for _, rt := range s.routes {
		e.Handle(rt.method, rt.path, s.adapt(rt))
	}
	s.engine = e
	return s, nil
}

// isConsolePath reports whether r is for the web console: a GET or HEAD
// outside the API and the metrics (unknown paths there stay JSON 404s).
func isConsolePath(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return p != "/api" && !strings.HasPrefix(p, "/api/") && p != "/metrics" && p != "/healthz"
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

// Routes returns the route table.
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.routes))
	for i, r := range s.routes {
		out[i] = Route{Method: r.method, Path: r.path, Role: r.role, Scope: r.scope.String()}
	}
	return out
}

// ObserveEvent feeds the metrics and the /stream clients from the
// scheduler's events (wire it to policy.Config.OnEvent). It never blocks.
func (s *Server) ObserveEvent(e policy.Event) {
	s.metrics.observe(e)
	s.hub.publish(e)
}

// ConsoleCSP is the Content-Security-Policy of every response: the console
// uses no inline script or style and talks only to its own origin.
const ConsoleCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"

// HSTS is the Strict-Transport-Security header of every answer over TLS:
// a browser that once reached the console over HTTPS refuses plain HTTP
// to it for a year.
const HSTS = "max-age=31536000"

// securityHeaders sets the browser hardening headers on every response,
// API, console files and errors alike. HSTS goes only on answers over TLS:
// browsers ignore it over plain HTTP, and plain HTTP is allowed only on a
// loopback address, behind a reverse proxy that sets its own.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", ConsoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if c.Request.TLS != nil {
		h.Set("Strict-Transport-Security", HSTS)
	}
	c.Next()
}

// ObserveBackup adds one successful VM backup's figures to the metrics.
func (s *Server) ObserveBackup(read, newBytes, stored int64, d time.Duration) {
	s.metrics.bytes.WithLabelValues("read").Add(float64(read))
	s.metrics.bytes.WithLabelValues("new").Add(float64(newBytes))
	s.metrics.bytes.WithLabelValues("stored").Add(float64(stored))
	s.metrics.durations.Observe(d.Seconds())
}

func (s *Server) recover(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p) // a stream cut on purpose: net/http closes the connection
			}
			s.cfg.Logger.Error("handler panic", "path", c.FullPath(), "panic", p)
			s.writeError(c, errors.New("panic"))
			c.Abort()
		}
	}()
	c.Next()
}

// adapt is the one adapter: authentication, role, CSRF, the scope of
// routes naming a point, repository or task in their path (scope.go), the
// handler, JSON encoding and error mapping.
func (s *Server) adapt(rt route) gin.HandlerFunc {
	return func(c *gin.Context) {
		// API answers are per user and may hold secrets (a new token): never cached.
		c.Header("Cache-Control", "no-store")
		a := s.startAudit(c, rt)
		if rt.role != "" {
			p, err := s.authenticate(c)
			if err != nil {
				s.finishAudit(c, a, err)
				s.writeError(c, err)
				return
			}
			if !p.Role.Allows(rt.role) {
				c.Set(principalKey, p)
				err := forbidden(rt.role, p.Role, "")
				s.finishAudit(c, a, err)
				s.writeError(c, err)
				return
			}
			c.Set(principalKey, p)
			if err := s.enforceScope(c, rt, p); err != nil {
				s.finishAudit(c, a, err)
				s.writeError(c, err)
				return
			}
		}
		body, err := rt.h(c)
		s.finishAudit(c, a, err)
		if err != nil {
			s.writeError(c, err)
			return
		}
		if c.Writer.Written() {
			return
		}
		status := http.StatusOK
		if sb, ok := body.(statusBody); ok {
			status, body = sb.status, sb.body
		}
		if body == nil {
			c.Status(status)
			if status != http.StatusNoContent {
				c.Writer.WriteHeaderNow()
			}
			return
		}
		c.JSON(status, body)
	}
}

// authenticate accepts a bearer token, or a session cookie plus, on every
// method that changes something, the CSRF header matching the session.
func (s *Server) authenticate(c *gin.Context) (auth.Principal, error) {
	if h := c.GetHeader("Authorization"); h != "" {
		secret, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return auth.Principal{}, auth.ErrUnauthenticated
		}
		return s.cfg.Auth.AuthenticateToken(c.Request.Context(), strings.TrimSpace(secret))
	}
	id, err := c.Cookie(sessionCookie)
	if err != nil || id == "" {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	p, err := s.cfg.Auth.Session(id)
	if err != nil {
		return auth.Principal{}, err
	}
	switch c.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		got := c.GetHeader(csrfHeader)
		if got == "" || !constantEqual(got, p.CSRF) {
			return auth.Principal{}, &apiError{status: http.StatusForbidden, code: "csrf", msg: "missing or wrong " + csrfHeader + " header"}
		}
	}
	return p, nil
}

func principal(c *gin.Context) auth.Principal {
	v, _ := c.Get(principalKey)
	p, _ := v.(auth.Principal)
	return p
}

func (s *Server) writeError(c *gin.Context, err error) {
	status, det, hdr := mapError(err)
	if status >= 500 && status != http.StatusNotImplemented {
		s.cfg.Logger.Error("request failed", "method", c.Request.Method, "path", c.FullPath(), "status", status, "err", err)
	}
	for k, v := range hdr {
		c.Header(k, v)
	}
	c.AbortWithStatusJSON(status, ErrorBody{Error: det})
}

// clientIP is the peer address (or the proxy's X-Forwarded-For when trusted).
func (s *Server) clientIP(c *gin.Context) string {
	if s.cfg.TrustProxy {
		if xff := c.GetHeader("X-Forwarded-For"); xff != "" {
			return strings.TrimSpace(strings.Split(xff, ",")[0])
		}
	}
	host, _, err := net.SplitHostPort(c.Request.RemoteAddr)
	if err != nil {
		return c.Request.RemoteAddr
	}
	return host
}

func (s *Server) now() time.Time { return s.cfg.Clock.Now() }

func (s *Server) location(ctx context.Context) *time.Location {
	st, err := s.settings(ctx)
	if err == nil {
		if loc, err := time.LoadLocation(st.TimeZone); err == nil {
			return loc
		}
	}
	return time.UTC
}

func (s *Server) healthz(c *gin.Context) (any, error) {
	return gin.H{"status": "ok", "time": s.now().UTC()}, nil
}
