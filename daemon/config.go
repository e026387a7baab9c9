package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/vmvault/vmvault/service/capacity"
	"io"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/notify"
)

// Config is the daemon's YAML configuration (appliance serve --config).
// Secrets are never values in it: passwords and passphrases come from files
// or environment variables it names.
type Config struct {
	Listen       string            `json:"listen"`    // host:port; default 127.0.0.1:8443
	TLS          TLSConfig         `json:"tls"`       // default: self-signed, generated on first start
	StateDir     string            `json:"state_dir"` // required: state.db, tls/
	TimeZone     string            `json:"time_zone"` // IANA name; default UTC
	LogLevel     string            `json:"log_level"` // debug, info, warn, error; default info
	Admin        AdminConfig       `json:"admin"`
	VCenter      *VCenterConfig    `json:"vcenter"` // absent: no inventory, no vCenter logins, no scheduler
	Repositories []RepoConfig      `json:"repositories"`
	Limits       LimitsConfig      `json:"limits"`
	Sessions     SessionsConfig    `json:"sessions"`
	API          APIConfig         `json:"api"`
	Maintenance  MaintenanceConfig `json:"maintenance"`
	SMTP         *SMTPConfig       `json:"smtp"` // absent: no email
	Approvals    ApprovalsConfig   `json:"approvals"`
	Instant      *InstantConfig    `json:"instant"` // absent: no instant recovery

	// OnReady, set in code (appliance demo), is called with the listening
	// address once the daemon accepts connections; it must not block.
	OnReady func(addr string) `json:"-"`
}

// MaintenanceConfig enables the scheduler's repository maintenance (retention,
// reclaim, quick and full checks) inside a weekly window, e.g.
// {window: {days: {saturday: ["01:00-07:00"]}}}; the window's location
// defaults to time_zone. Without a window no maintenance runs by itself.
type MaintenanceConfig struct {
	Window *policy.Window `json:"window"`
	// FullCheckDays is how often a full (read every blob) check runs; default 7.
	FullCheckDays int `json:"full_check_days"`
}

// ApprovalsConfig delays administrators' destructive actions (deleting a
// restore point, shortening a job's retention; package approval), e.g.
// {delay: 24h}: such an action waits that long unless a second
// administrator approves it, and any administrator can cancel it meanwhile.
// Absent or 0: they act at once.
type ApprovalsConfig struct {
	Delay string `json:"delay"` // Go duration, 0 to 720h
}

// delay is the validated delay (0 when absent).
func (a ApprovalsConfig) delay() time.Duration {
	d, _ := time.ParseDuration(a.Delay)
	return d
}

// TLSConfig is the API listener's certificate (tls section).
type TLSConfig struct {
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	// Disable serves plain HTTP; allowed only on a loopback address (behind
	// a local reverse proxy, or for the demo).
	Disable bool `json:"disable"`
}

// AdminConfig is the local administrator (admin section).
type AdminConfig struct {
	User string `json:"user"` // default "admin"
	// PasswordFile sets the administrator's password at first start; without
	// it (and without $VMVAULT_ADMIN_PASSWORD) one is generated and printed once.
	PasswordFile string `json:"password_file"`
}

// VCenterConfig is the daemon's vCenter connection and the roles of the
// vCenter users who log in to the API (vcenter section).
type VCenterConfig struct {
	URL          string `json:"url"`
	Username     string `json:"username"`
	PasswordFile string `json:"password_file"`
	PasswordEnv  string `json:"password_env"`
	Thumbprint   string `json:"thumbprint"`
	CAFile       string `json:"ca_file"`
	Insecure     bool   `json:"insecure"`
	// Role is the role of vCenter users whom no rule of Roles names;
	// "none" or absent (the default): they cannot log in. Validation turns
	// "none" into "".
	Role string `json:"role"`
	// Roles map vCenter users and groups to roles, e.g.
	// [{user: "VSPHERE.LOCAL\\alice", role: operator}, {group: BackupAdmins, role: administrator}].
	Roles []VCenterRoleRule `json:"roles"`
	// HotAdd: "auto" (absent) reads disks through HotAdd when the
	// appliance runs as a VM of this vCenter (found by ApplianceVM, else by
	// its BIOS UUID); "off" never attaches disks to it.
	HotAdd string `json:"hotadd"`
	// ApplianceVM is the appliance's own VM (name, inventory path or
	// moref), when the BIOS UUID cannot find it.
	ApplianceVM string `json:"appliance_vm"`
}

// VCenterRoleRule gives a role to one vCenter user or the members of one
// vCenter SSO group: DOMAIN\name or name@domain; a name without a
// domain matches it in every identity source. A rule naming the user wins
// over its groups; among groups the highest role wins.
type VCenterRoleRule struct {
	User  string `json:"user"`
	Group string `json:"group"`
	Role  string `json:"role"`
}

// roleNone is vcenter.role's "nobody unmapped logs in".
const roleNone = "none"

// authRules returns the rules for auth.Config.VCenterRules (validated).
func (v *VCenterConfig) authRules() []auth.VCenterRule {
	out := make([]auth.VCenterRule, len(v.Roles))
	for i, r := range v.Roles {
		out[i] = auth.VCenterRule{User: r.User, Group: r.Group, Role: auth.Role(r.Role)}
	}
	return out
}

// authRole returns auth.Config.VCenterRole: "" for none.
func (v *VCenterConfig) authRole() auth.Role { return auth.Role(v.Role) }

// RepoConfig is one repository the daemon opens (repositories section).
type RepoConfig struct {
	Name           string `json:"name"`
	Path           string `json:"path"`
	PassphraseFile string `json:"passphrase_file"`
	PassphraseEnv  string `json:"passphrase_env"` // neither: the repository must be unencrypted
	// UploadLimit and DownloadLimit cap the bytes the appliance sends to
	// and reads from the repository's storage, in MB/s (10^6 bytes per
	// second; absent or 0: unlimited), whatever sends them (backups,
	// copies into it, checks, restores). LimitSchedule overrides them in
	// weekly windows (the first open one wins), e.g. business hours; a
	// window's location defaults to time_zone.
	UploadLimit   float64       `json:"upload_limit_mb_per_s"`
	DownloadLimit float64       `json:"download_limit_mb_per_s"`
	LimitSchedule []LimitWindow `json:"limit_schedule"`
}

// LimitWindow is a pair of bandwidth limits in force while Window is
// open (repositories[].limit_schedule), in MB/s; 0 is unlimited.
type LimitWindow struct {
	Window        policy.Window `json:"window"`
	UploadLimit   float64       `json:"upload_limit_mb_per_s"`
	DownloadLimit float64       `json:"download_limit_mb_per_s"`
}

// validateLimits checks a repository's bandwidth fields; f is its path.
func (r RepoConfig) validateLimits(f string, bad func(field, format string, args ...any)) {
	rate := func(field string, v float64) {
		if err := policy.ValidateMBps(v); err != nil {
			bad(field, "%v", err)
		}
	}
	rate(f+".upload_limit_mb_per_s", r.UploadLimit)
	rate(f+".download_limit_mb_per_s", r.DownloadLimit)
	for i, w := range r.LimitSchedule {
		g := fmt.Sprintf("%s.limit_schedule[%d]", f, i)
		if err := w.Window.Validate(); err != nil {
			bad(g+".window", "%v", err)
		}
		rate(g+".upload_limit_mb_per_s", w.UploadLimit)
		rate(g+".download_limit_mb_per_s", w.DownloadLimit)
	}
}

// LimitsConfig bounds the daemon's concurrent work (limits section).
type LimitsConfig struct {
	MaxConcurrentBackups int `json:"max_concurrent_backups"` // default 4
	MaxRunningTasks      int `json:"max_running_tasks"`      // API tasks at once; default 2
	// LowSpacePercent and LowSpaceGiB: a repository's volume with less free
	// space than either raises a low-space alert; defaults 10 and 10, a
	// negative value disables that test.
	LowSpacePercent float64 `json:"low_space_percent"`
	LowSpaceGiB     float64 `json:"low_space_gib"`
}

// lowSpace is the alert threshold of the limits section.
func (l LimitsConfig) lowSpace() capacity.Threshold {
	t := capacity.DefaultThreshold
	switch {
	case l.LowSpacePercent < 0:
		t.Percent = 0
	case l.LowSpacePercent > 0:
		t.Percent = l.LowSpacePercent
	}
	switch {
	case l.LowSpaceGiB < 0:
		t.MinBytes = 0
	case l.LowSpaceGiB > 0:
		t.MinBytes = int64(l.LowSpaceGiB * (1 << 30))
	}
	return t
}

// SessionsConfig is the lifetime of API login sessions (sessions section).
type SessionsConfig struct {
	TTL string `json:"ttl"` // Go duration; default 12h
}

// APIConfig concerns the HTTP API's clients (api section).
type APIConfig struct {
	TrustProxy bool `json:"trust_proxy"` // rate-limit logins by X-Forwarded-For
}

// SMTPConfig sends failure alerts and a daily report by email (package
// notify). The password comes from a file or the environment.
type SMTPConfig struct {
	Host         string   `json:"host"`
	Port         int      `json:"port"`    // default 587 (starttls), 465 (implicit), 25 (none)
	TLS          string   `json:"tls"`     // starttls (default, required), implicit, none (loopback hosts only)
	CAFile       string   `json:"ca_file"` // PEM CAs that sign the server's certificate; default the system's
	Username     string   `json:"username"`
	PasswordFile string   `json:"password_file"`
	PasswordEnv  string   `json:"password_env"`
	From         string   `json:"from"` // e.g. "vmvault <vmvault@example.com>"
	To           []string `json:"to"`
	// DailyReportAt is "HH:MM" in time_zone; default "07:00"; "off" disables it.
	DailyReportAt *string `json:"daily_report_at"`
	Alerts        *bool   `json:"alerts"` // failure alerts; default true
	// RepeatAfter is the quiet period of a failure streak (Go duration,
	// default 6h; "off" mails every failure): see notify.go.
	RepeatAfter *string `json:"repeat_after"`
}

// validate checks the smtp section; bad reports a field's problem.
func (s *SMTPConfig) validate(bad func(field, format string, args ...any)) {
	if s.Host == "" {
		bad("smtp.host", "required")
	} else if strings.ContainsAny(s.Host, " \t\r\n/:") && net.ParseIP(s.Host) == nil {
		bad("smtp.host", "%q is not a host name or address (the port goes in smtp.port)", s.Host)
	}
	switch notify.TLSMode(s.TLS) {
	case "":
		s.TLS = string(notify.TLSStartTLS)
	case notify.TLSStartTLS, notify.TLSImplicit:
	case notify.TLSNone:
		if s.Host != "" && !notify.IsLoopbackHost(s.Host) {
			bad("smtp.tls", "none only for a loopback host (a local relay), not %q: use starttls or implicit", s.Host)
		}
	default:
		bad("smtp.tls", "%q: starttls, implicit or none", s.TLS)
	}
	if s.Port < 0 || s.Port > 65535 {
		bad("smtp.port", "%d is not a TCP port", s.Port)
	}
	if s.PasswordFile != "" && s.PasswordEnv != "" {
		bad("smtp", "give at most one of password_file and password_env")
	}
	if s.Username != "" && s.PasswordFile == "" && s.PasswordEnv == "" {
		bad("smtp", "username needs password_file or password_env")
	}
	if s.Username == "" && (s.PasswordFile != "" || s.PasswordEnv != "") {
		bad("smtp.username", "required with a password")
	}
	if strings.ContainsAny(s.Username, "\r\n\x00") {
		bad("smtp.username", "must not contain line breaks")
	}
	if s.From == "" {
		bad("smtp.from", "required")
	} else if _, err := mail.ParseAddress(s.From); err != nil || strings.ContainsAny(s.From, "\r\n") {
		bad("smtp.from", "%q is not an email address", s.From)
	}
	if len(s.To) == 0 {
		bad("smtp.to", "at least one recipient")
	}
	for i, t := range s.To {
		if _, err := mail.ParseAddress(t); err != nil || strings.ContainsAny(t, "\r\n") {
			bad(fmt.Sprintf("smtp.to[%d]", i), "%q is not an email address", t)
		}
	}
	if s.DailyReportAt == nil {
		d := "07:00"
		s.DailyReportAt = &d
	}
	if at := *s.DailyReportAt; at != "off" {
		if _, err := notify.ParseTimeOfDay(at); err != nil {
			bad("smtp.daily_report_at", "%v, or off", err)
		}
	}
	if s.Alerts == nil {
		on := true
		s.Alerts = &on
	}
	s.validateRepeatAfter(bad)
}

const maxConfigBytes = 1 << 20

// LoadConfig reads and validates a configuration file; relative paths in
// it are made relative to the file's directory.
func LoadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("config %s: larger than %d bytes", path, maxConfigBytes)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	// Relative paths are relative to the configuration file.
	base := filepath.Dir(path)
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	abs(&cfg.StateDir)
	abs(&cfg.TLS.CertFile)
	abs(&cfg.TLS.KeyFile)
	abs(&cfg.Admin.PasswordFile)
	if cfg.VCenter != nil {
		abs(&cfg.VCenter.PasswordFile)
		abs(&cfg.VCenter.CAFile)
	}
	for i := range cfg.Repositories {
		// A remote location (s3:…) is not a path; one that does not parse
		// is left as written for validate to name.
		if loc, err := repository.ParseLocation(cfg.Repositories[i].Path); err == nil && loc.Local != "" {
			abs(&cfg.Repositories[i].Path)
		}
		abs(&cfg.Repositories[i].PassphraseFile)
	}
	if cfg.SMTP != nil {
		abs(&cfg.SMTP.PasswordFile)
		abs(&cfg.SMTP.CAFile)
	}
	return cfg, nil
}

// ParseConfig decodes YAML strictly and validates it. YAML is turned into
// JSON first so that unknown fields and wrong types are reported with the
// field's path (yaml.v3's type errors do not name the field).
func ParseConfig(b []byte) (*Config, error) {
	var raw any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	if raw == nil {
		return nil, errors.New("empty configuration")
	}
	top, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("the configuration must be a mapping of field names")
	}
	// A maintenance window without a location is in the appliance's time zone.
	if m, ok := top["maintenance"].(map[string]any); ok {
		if w, ok := m["window"].(map[string]any); ok {
			if _, has := w["location"]; !has {
				tz, _ := top["time_zone"].(string)
				if tz == "" {
					tz = "UTC"
				}
				w["location"] = tz
			}
		}
	}
	// So are the windows of bandwidth limits; a window that does not
	// parse is named here (the decoder's error would not say which).
	if rs, ok := top["repositories"].([]any); ok {
		for i, r := range rs {
			rm, _ := r.(map[string]any)
			ls, _ := rm["limit_schedule"].([]any)
			for k, l := range ls {
				lm, _ := l.(map[string]any)
				w, ok := lm["window"].(map[string]any)
				if !ok {
					continue
				}
				if _, has := w["location"]; !has {
					tz, _ := top["time_zone"].(string)
					if tz == "" {
						tz = "UTC"
					}
					w["location"] = tz
				}
				var pw policy.Window
				if b, err := json.Marshal(w); err == nil {
					if err := json.Unmarshal(b, &pw); err != nil {
						return nil, fmt.Errorf("repositories[%d].limit_schedule[%d].window: %w", i, k, err)
					}
				}
			}
		}
	}
	j, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("configuration keys must be strings: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, fmt.Errorf("%s: wrong type: got %s, want %s", ute.Field, ute.Value, ute.Type)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, fmt.Errorf("unknown field %s", f)
		}
		if strings.Contains(err.Error(), "window") {
			return nil, fmt.Errorf("maintenance.window: %w", err)
		}
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Validate checks a configuration built in code (LoadConfig and
// ParseConfig validate theirs) and sets its defaults.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8443"
	}
	c.Instant.validate(bad)
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		bad("listen", "want host:port (%v)", err)
	} else if port == "" {
		bad("listen", "missing port")
	}
	if c.TLS.Disable {
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			bad("tls.disable", "plain HTTP only on a loopback address, not %q", host)
		}
		if c.TLS.CertFile != "" || c.TLS.KeyFile != "" {
			bad("tls.disable", "contradicts tls.cert_file/tls.key_file")
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls", "give both cert_file and key_file, or neither (a self-signed certificate is generated)")
	}
	if c.StateDir == "" {
		bad("state_dir", "required")
	}
	if c.TimeZone == "" {
		c.TimeZone = "UTC"
	}
	if _, err := time.LoadLocation(c.TimeZone); err != nil {
		bad("time_zone", "unknown time zone %q", c.TimeZone)
	}
	switch c.LogLevel {
	case "":
		c.LogLevel = "info"
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "%q: debug, info, warn or error", c.LogLevel)
	}
	if c.Admin.User == "" {
		c.Admin.User = "admin"
	}
	if v := c.VCenter; v != nil {
		if v.URL == "" {
			bad("vcenter.url", "required")
		}
		if v.Username == "" {
			bad("vcenter.username", "required")
		}
		if (v.PasswordFile == "") == (v.PasswordEnv == "") {
			bad("vcenter", "give exactly one of password_file and password_env")
		}
		// Older versions gave every vCenter user administrator when role was
		// absent; now only the users and groups mapped below log in.
		// "" is none after validation: auth.Config.VCenterRole "" gives no role.
		if v.Role == roleNone {
			v.Role = ""
		}
		switch v.HotAdd {
		case "", "auto", "off":
		default:
			bad("vcenter.hotadd", "%q: want auto or off", v.HotAdd)
		}
		if _, err := auth.ParseRole(v.Role); err != nil && v.Role != "" {
			bad("vcenter.role", "%v, or none", err)
		}
		seenRule := map[string]bool{}
		for i, r := range v.Roles {
			f := fmt.Sprintf("vcenter.roles[%d]", i)
			if (r.User == "") == (r.Group == "") {
				bad(f, "name exactly one of user and group")
				continue
			}
			if _, err := auth.ParseRole(r.Role); err != nil {
				bad(f+".role", "%v", err)
			}
			kind, name := "user", r.User
			if r.Group != "" {
				kind, name = "group", r.Group
			}
			if len(name) > 256 || strings.ContainsAny(name, "\r\n\x00") || strings.TrimSpace(name) != name {
				bad(f+"."+kind, "%q is not a vCenter %s name", name, kind)
			}
			key := kind + " " + strings.ToLower(name)
			if seenRule[key] {
				bad(f+"."+kind, "%s %q is mapped twice", kind, name)
			}
			seenRule[key] = true
		}
	}
	if len(c.Repositories) == 0 {
		bad("repositories", "at least one repository")
	}
	seen := map[string]bool{}
	for i, r := range c.Repositories {
		f := fmt.Sprintf("repositories[%d]", i)
		switch {
		case r.Name == "":
			bad(f+".name", "required")
		case len(r.Name) > 64 || strings.ContainsAny(r.Name, "/\\ \t\n\x00"):
			bad(f+".name", "at most 64 characters without spaces or slashes")
		case seen[r.Name]:
			bad(f+".name", "duplicate repository %q", r.Name)
		}
		seen[r.Name] = true
		if r.Path == "" {
			bad(f+".path", "required")
		} else if _, err := repository.ParseLocation(r.Path); err != nil {
			bad(f+".path", "%v", err)
		}
		if r.PassphraseFile != "" && r.PassphraseEnv != "" {
			bad(f, "give at most one of passphrase_file and passphrase_env")
		}
		r.validateLimits(f, bad)
	}
	if c.Limits.MaxConcurrentBackups < 0 || c.Limits.MaxConcurrentBackups > 64 {
		bad("limits.max_concurrent_backups", "from 0 (default 4) to 64")
	}
	if c.Limits.MaxRunningTasks < 0 || c.Limits.MaxRunningTasks > 64 {
		bad("limits.max_running_tasks", "from 0 (default 2) to 64")
	}
	if c.Limits.LowSpacePercent > 99 {
		bad("limits.low_space_percent", "from 0 (default 10) to 99, or negative to disable")
	}
	if c.Limits.LowSpaceGiB > 1<<20 {
		bad("limits.low_space_gib", "at most %d (a PiB), or negative to disable", 1<<20)
	}
	if c.Sessions.TTL != "" {
		d, err := time.ParseDuration(c.Sessions.TTL)
		if err != nil || d < time.Minute || d > 30*24*time.Hour {
			bad("sessions.ttl", "a duration from 1m to 720h, e.g. 12h")
		}
	}
	if w := c.Maintenance.Window; w != nil {
		if err := w.Validate(); err != nil {
			bad("maintenance.window", "%v", err)
		}
		if w.IsEmpty() {
			bad("maintenance.window", "has no open time; leave it out to disable maintenance")
		}
	}
	if c.Maintenance.FullCheckDays < 0 || c.Maintenance.FullCheckDays > 365 {
		bad("maintenance.full_check_days", "from 0 (default 7) to 365")
	}
	if c.SMTP != nil {
		c.SMTP.validate(bad)
	}
	if c.Approvals.Delay != "" {
		if d, err := time.ParseDuration(c.Approvals.Delay); err != nil || d < 0 || d > 30*24*time.Hour {
			bad("approvals.delay", "a duration from 0 (act at once) to 720h, e.g. 24h")
		}
	}
	return errors.Join(errs...)
}

// readSecret reads a secret from a file (trailing newline dropped) or an
// environment variable read with getenv; "" when neither is named.
func readSecret(getenv func(string) string, file, envName, what string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", what, err)
		}
		s := strings.TrimRight(string(b), "\r\n")
		if s == "" {
			return "", fmt.Errorf("%s file %s is empty", what, file)
		}
		return s, nil
	}
	if envName != "" {
		s := getenv(envName)
		if s == "" {
			return "", fmt.Errorf("%s: environment variable %s is empty or unset", what, envName)
		}
		return s, nil
	}
	return "", nil
}
