package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// Settings: /settings and the connection tests under it.

// Settings are the appliance-wide preferences the console edits.
type Settings = api.Settings

// Mailer sends the test mail of POST /settings/smtp/test; notify implements
// it and the daemon wires it. A nil Mailer means SMTP is not configured.
type Mailer interface {
	SendTest(ctx context.Context, to string) error
}

// SettingsStore keeps Settings; settings.Bolt implements it.
type SettingsStore interface {
	Settings(ctx context.Context) (Settings, bool, error) // false: never saved
	PutSettings(ctx context.Context, s Settings) error
}

// VCenterTest is the body of POST /settings/vcenter/test; VCenterTestResult
// is what a connection test found.
type (
	VCenterTest       = api.VCenterTest
	VCenterTestResult = api.VCenterTestResult
)

// VCenterTester tries a vCenter connection (log in, read the version, log
// out); service/topology implements it over vsphere.Connect. A refused or
// failed connection is a result with OK false, not an error; errors are
// for requests it cannot try (ErrConflict, ErrUnavailable).
type VCenterTester interface {
	TestVCenter(ctx context.Context, req VCenterTest) (VCenterTestResult, error)
}

func (s *Server) settings(ctx context.Context) (Settings, error) {
	if s.cfg.Settings == nil {
		return s.cfg.DefaultSettings, nil
	}
	st, ok, err := s.cfg.Settings.Settings(ctx)
	if err != nil {
		return Settings{}, err
	}
	if !ok {
		return s.cfg.DefaultSettings, nil
	}
	return st, nil
}

// ApplianceSettings edits the sections the configuration file seeds
// (vCenter connection, SMTP, maintenance window); the daemon implements it
// over settings.Bolt and applies what it can live. Values come in already
// validated by web; a service may still refuse fields (api.InvalidError).
type ApplianceSettings interface {
	// Sections returns each section's effective values and their source;
	// passwords are never returned (PasswordSet says whether one is stored).
	Sections(ctx context.Context) (api.VCenterSettings, api.SMTPSettings, api.MaintenanceSettings, error)
	SaveVCenter(ctx context.Context, v api.VCenterSettings) (api.SectionSaved, error)
	SaveSMTP(ctx context.Context, m api.SMTPSettings) (api.SectionSaved, error)
	SaveMaintenance(ctx context.Context, m api.MaintenanceSettings) (api.SectionSaved, error)
	// ResetSection forgets the console's values of a section: the
	// configuration file's apply again.
	ResetSection(ctx context.Context, section string) (api.SectionSaved, error)
	// TestSMTP sends one test mail to to through m (unsaved values; an
	// empty password is the stored one's).
	TestSMTP(ctx context.Context, m api.SMTPSettings, to string) error
}

// RepositoryAdder creates or opens a repository at runtime and keeps it
// for the next starts (POST /repositories); the daemon implements it.
// Refusals of a field's value are api.InvalidError.
type RepositoryAdder interface {
	AddRepository(ctx context.Context, req api.AddRepository) (api.RepositoryInfo, error)
}

// ErrSMTPNotConfigured is the Mailer's answer while no SMTP is configured (409).
var ErrSMTPNotConfigured = api.ErrSMTPNotConfigured

// Settings sections (PUT and DELETE /settings/{section}).
const (
	SectionVCenter     = "vcenter"
	SectionSMTP        = "smtp"
	SectionMaintenance = "maintenance"
)

func (s *Server) getSettings(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	st, err := s.settings(ctx)
	if err != nil {
		return nil, err
	}
	v := api.SettingsView{Settings: st,
		VCenter:     api.VCenterSettings{Source: api.SourceNone},
		SMTP:        api.SMTPSettings{TLS: "starttls", DailyReportAt: "07:00", Alerts: true, Source: api.SourceNone},
		Maintenance: api.MaintenanceSettings{Source: api.SourceNone}}
	if s.cfg.Appliance != nil {
		if v.VCenter, v.SMTP, v.Maintenance, err = s.cfg.Appliance.Sections(ctx); err != nil {
			return nil, err
		}
	}
	v.VCenter.Password, v.SMTP.Password = "", "" // never returned, whatever a service did
	if v.SMTP.To == nil {
		v.SMTP.To = []string{}
	}
	return v, nil
}

func (s *Server) putSettings(c *gin.Context) (any, error) {
	// The body may be GET /settings's document: its sections are read-only
	// here (each has its own PUT) and are ignored.
	var body struct {
		Settings
		VCenter     json.RawMessage `json:"vcenter"`
		SMTP        json.RawMessage `json:"smtp"`
		Maintenance json.RawMessage `json:"maintenance"`
	}
	if err := decodeStrict(c, &body); err != nil {
		return nil, err
	}
	st := body.Settings
	if _, err := time.LoadLocation(st.TimeZone); err != nil || st.TimeZone == "" {
		return nil, invalid("timeZone", "unknown time zone %q (an IANA name such as Europe/Paris)", st.TimeZone)
	}
	if st.EventRetentionDays < 1 || st.EventRetentionDays > 3650 {
		return nil, invalid("eventRetentionDays", "from 1 to 3650")
	}
	if s.cfg.Settings == nil {
		return nil, fmt.Errorf("settings store: %w", ErrNotImplemented)
	}
	noteObject(c, "settings", "general", sectionNames["general"])
	prev, _ := s.settings(c.Request.Context())
	if err := s.cfg.Settings.PutSettings(c.Request.Context(), st); err != nil {
		return nil, err
	}
	noteChanges(c, prev, st, nil)
	return st, nil
}

// fieldErrs gathers the bad fields of one request.
type fieldErrs []FieldError

func (f *fieldErrs) add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// err is the 422 of every gathered field, nil when none.
func (f fieldErrs) err() error {
	if len(f) == 0 {
		return nil
	}
	msgs := make([]string, len(f))
	for i, e := range f {
		msgs[i] = e.Field + ": " + e.Message
	}
	return &apiError{status: http.StatusUnprocessableEntity, code: "validation", msg: strings.Join(msgs, "; "), details: []FieldError(f)}
}

// plainText reports whether v is at most n bytes without line breaks or NUL.
func plainText(v string, n int) bool { return len(v) <= n && !strings.ContainsAny(v, "\x00\r\n") }

func validVCenterURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && len(raw) <= 2048
}

func validateVCenter(v *api.VCenterSettings) error {
	var f fieldErrs
	v.URL, v.Username, v.Thumbprint = strings.TrimSpace(v.URL), strings.TrimSpace(v.Username), strings.TrimSpace(v.Thumbprint)
	switch {
	case v.URL == "":
		f.add("url", "required: the vCenter or ESXi host, e.g. https://vcenter.example.com/sdk")
	case !validVCenterURL(v.URL):
		f.add("url", "an https:// URL of a vCenter or ESXi host")
	}
	switch {
	case v.Username == "":
		f.add("username", "required")
	case !plainText(v.Username, 1024):
		f.add("username", "at most 1024 characters, no line breaks")
	}
	if !plainText(v.Password, 1024) {
		f.add("password", "at most 1024 characters, no line breaks")
	}
	if !plainText(v.Thumbprint, 1024) {
		f.add("thumbprint", "at most 1024 characters, no line breaks")
	}
	if v.Thumbprint != "" && v.Insecure {
		f.add("insecure", "contradicts thumbprint: pin the certificate or skip verification, not both")
	}
	return f.err()
}

func validAddress(a string) bool {
	m, err := mail.ParseAddress(a)
	return err == nil && plainText(a, 254) && m.Address != ""
}

// validateSMTP checks a mail section; a disabled one keeps its values
// unchecked but for their form.
func validateSMTP(m *api.SMTPSettings) error {
	var f fieldErrs
	m.Host, m.From = strings.TrimSpace(m.Host), strings.TrimSpace(m.From)
	if m.TLS == "" {
		m.TLS = "starttls"
	}
	if m.DailyReportAt == "" {
		m.DailyReportAt = "07:00"
	}
	switch {
	case m.Host == "" && m.Enabled:
		f.add("host", "required: the mail server's name or address")
	case !plainText(m.Host, 253) || strings.ContainsAny(m.Host, " \t/:") && net.ParseIP(m.Host) == nil:
		f.add("host", "%q is not a host name or address (the port goes in port)", m.Host)
	}
	if m.Port < 0 || m.Port > 65535 {
		f.add("port", "%d is not a TCP port (0: the TLS mode's default)", m.Port)
	}
	switch m.TLS {
	case "starttls", "implicit", "none":
	default:
		f.add("tls", "%q: starttls, implicit or none", m.TLS)
	}
	if !plainText(m.Username, 1024) {
		f.add("username", "at most 1024 characters, no line breaks")
	}
	if !plainText(m.Password, 1024) {
		f.add("password", "at most 1024 characters, no line breaks")
	}
	switch {
	case m.From == "" && m.Enabled:
		f.add("from", "required: the sender, e.g. vmvault <vmvault@example.com>")
	case m.From != "" && !validAddress(m.From):
		f.add("from", "%q is not an e-mail address", m.From)
	}
	if len(m.To) == 0 && m.Enabled {
		f.add("to", "at least one recipient")
	}
	if len(m.To) > 100 {
		f.add("to", "at most 100 recipients")
	}
	for i, t := range m.To {
		if !validAddress(strings.TrimSpace(t)) {
			f.add(fmt.Sprintf("to[%d]", i), "%q is not an e-mail address", t)
		}
		m.To[i] = strings.TrimSpace(t)
	}
	if m.DailyReportAt != "off" {
		if _, err := time.Parse("15:04", m.DailyReportAt); err != nil || len(m.DailyReportAt) != 5 {
			f.add("dailyReportAt", "%q: a time of day HH:MM (24 hours), or off", m.DailyReportAt)
		}
	}
	return f.err()
}

func validateMaintenance(m *api.MaintenanceSettings) error {
	var f fieldErrs
	if w := m.Window; w != nil {
		if err := w.Validate(); err != nil {
			f.add("window", "%v", err)
		} else if w.IsEmpty() {
			f.add("window", "has no open time; send null to turn scheduled maintenance off")
		}
	}
	if m.FullCheckDays < 0 || m.FullCheckDays > 365 {
		f.add("fullCheckDays", "from 0 (default 7) to 365")
	}
	return f.err()
}

func (s *Server) appliance() (ApplianceSettings, error) {
	if s.cfg.Appliance == nil {
		return nil, fmt.Errorf("editable settings: %w", ErrNotImplemented)
	}
	return s.cfg.Appliance, nil
}

func (s *Server) putVCenterSettings(c *gin.Context) (any, error) {
	var v api.VCenterSettings
	if err := decodeStrict(c, &v); err != nil {
		return nil, err
	}
	if err := validateVCenter(&v); err != nil {
		return nil, err
	}
	a, err := s.appliance()
	if err != nil {
		return nil, err
	}
	noteAudit(c, SectionVCenter, "", "", "url "+v.URL+", user "+v.Username)
	return s.saveSection(c, a, SectionVCenter, v.Password != "", func(ctx context.Context) (api.SectionSaved, error) { return a.SaveVCenter(ctx, v) })
}

func (s *Server) putSMTPSettings(c *gin.Context) (any, error) {
	var m api.SMTPSettings
	if err := decodeStrict(c, &m); err != nil {
		return nil, err
	}
	if err := validateSMTP(&m); err != nil {
		return nil, err
	}
	a, err := s.appliance()
	if err != nil {
		return nil, err
	}
	detail := "mail off"
	if m.Enabled {
		detail = fmt.Sprintf("server %s:%d (%s), to %s", m.Host, m.Port, m.TLS, strings.Join(m.To, ", "))
	}
	noteAudit(c, SectionSMTP, "", "", detail)
	return s.saveSection(c, a, SectionSMTP, m.Password != "", func(ctx context.Context) (api.SectionSaved, error) { return a.SaveSMTP(ctx, m) })
}

func (s *Server) putMaintenanceSettings(c *gin.Context) (any, error) {
	var m api.MaintenanceSettings
	if err := decodeStrict(c, &m); err != nil {
		return nil, err
	}
	if err := validateMaintenance(&m); err != nil {
		return nil, err
	}
	a, err := s.appliance()
	if err != nil {
		return nil, err
	}
	detail := "window off"
	if m.Window != nil {
		if b, err := json.Marshal(m.Window); err == nil {
			detail = "window " + string(b)
		}
	}
	noteAudit(c, SectionMaintenance, "", "", detail)
	return s.saveSection(c, a, SectionMaintenance, false, func(ctx context.Context) (api.SectionSaved, error) { return a.SaveMaintenance(ctx, m) })
}

func (s *Server) resetSettings(c *gin.Context) (any, error) {
	sec := c.Param("section")
	switch sec {
	case SectionVCenter, SectionSMTP, SectionMaintenance:
	default:
		return nil, &apiError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf("no settings section %q (vcenter, smtp or maintenance)", sec)}
	}
	a, err := s.appliance()
	if err != nil {
		return nil, err
	}
	noteAudit(c, sec, "", "", "back to the configuration file")
	return s.saveSection(c, a, sec, false, func(ctx context.Context) (api.SectionSaved, error) { return a.ResetSection(ctx, sec) })
}

func (s *Server) testVCenter(c *gin.Context) (any, error) {
	var req VCenterTest
	if err := optionalBody(c, &req); err != nil {
		return nil, err
	}
	if req.URL != "" {
		if !validVCenterURL(req.URL) {
			return nil, invalid("url", "an https:// URL of a vCenter or ESXi host")
		}
	}
	for _, f := range []struct{ name, v string }{{"username", req.Username}, {"password", req.Password}, {"thumbprint", req.Thumbprint}} {
		if len(f.v) > 1024 || strings.ContainsAny(f.v, "\x00\r\n") {
			return nil, invalid(f.name, "at most 1024 characters, no line breaks")
		}
	}
	if req.Thumbprint != "" && req.Insecure {
		return nil, invalid("insecure", "contradicts thumbprint: pin the certificate or skip verification, not both")
	}
	if s.cfg.VCenter == nil {
		return nil, fmt.Errorf("vCenter connection test: %w", ErrNotImplemented)
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Second)
	defer cancel()
	return s.cfg.VCenter.TestVCenter(ctx, req)
}

type smtpTestRequest struct {
	To string `json:"to"`
	// SMTP, when given, are unsaved values to send the test through
	// (an empty password: the stored one); absent: the configured mail.
	SMTP *api.SMTPSettings `json:"smtp,omitempty"`
}

func (s *Server) testSMTP(c *gin.Context) (any, error) {
	var req smtpTestRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if req.To == "" {
		return nil, invalid("to", "required")
	}
	a, err := mail.ParseAddress(req.To)
	if err != nil || a.Name != "" || a.Address != req.To || len(req.To) > 254 {
		return nil, invalid("to", "one e-mail address such as ops@example.com")
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Second)
	defer cancel()
	if req.SMTP != nil {
		req.SMTP.Enabled = true
		if err := validateSMTP(req.SMTP); err != nil {
			return nil, err
		}
		app, err := s.appliance()
		if err != nil {
			return nil, err
		}
		if err := app.TestSMTP(ctx, *req.SMTP, req.To); err != nil {
			if len(api.AsInvalid(err)) > 0 {
				return nil, err
			}
			return nil, &apiError{status: http.StatusBadGateway, code: "smtp_failed", msg: "sending the test mail failed: " + err.Error()}
		}
		return gin.H{"ok": true}, nil
	}
	if s.cfg.Mailer == nil {
		return nil, smtpNotConfigured()
	}
	if err := s.cfg.Mailer.SendTest(ctx, req.To); err != nil {
		if errors.Is(err, ErrSMTPNotConfigured) {
			return nil, smtpNotConfigured()
		}
		return nil, &apiError{status: http.StatusBadGateway, code: "smtp_failed", msg: "sending the test mail failed: " + err.Error()}
	}
	return gin.H{"ok": true}, nil
}

func smtpNotConfigured() error {
	return &apiError{status: http.StatusConflict, code: "smtp_not_configured", msg: "SMTP is not configured on this appliance: fill in the Mail section (or smtp in the configuration file)"}
}

// sectionNames are the settings sections as the console names them.
var sectionNames = map[string]string{
	"general": "time zone and event retention", SectionVCenter: "vCenter connection",
	SectionSMTP: "mail server", SectionMaintenance: "maintenance window",
}

// saveSection runs save (a change of one settings section) and tells the
// audit event which section it was and which fields changed: the section's
// effective values before against after. A password given in the request
// is recorded as changed, never with its value (Sections never returns
// one; passwordSet goes with it).
func (s *Server) saveSection(c *gin.Context, a ApplianceSettings, sec string, password bool, save func(context.Context) (api.SectionSaved, error)) (api.SectionSaved, error) {
	ctx := c.Request.Context()
	noteObject(c, "settings", sec, sectionNames[sec])
	before, beforeErr := sectionOf(ctx, a, sec)
	res, err := save(ctx)
	if err != nil {
		return res, err
	}
	after, afterErr := sectionOf(ctx, a, sec)
	var extra []policy.Change
	if password || (beforeErr == nil && afterErr == nil && flatJSON(before)["passwordSet"] != flatJSON(after)["passwordSet"]) {
		extra = append(extra, secretChange("password")) // given, or gone with a reset
	}
	if beforeErr == nil && afterErr == nil {
		noteChanges(c, before, after, []string{"source", "active", "restartNeeded", "password", "passwordSet"}, extra...)
	} else {
		noteChanges(c, nil, nil, nil, extra...)
	}
	return res, nil
}

func sectionOf(ctx context.Context, a ApplianceSettings, sec string) (any, error) {
	v, m, mt, err := a.Sections(ctx)
	if err != nil {
		return nil, err
	}
	switch sec {
	case SectionVCenter:
		return v, nil
	case SectionSMTP:
		return m, nil
	}
	return mt, nil
}
