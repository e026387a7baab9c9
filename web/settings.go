package web

import (
	"context"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

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

// VCenterTest is the body of POST /settings/vcenter/test; empty fields mean
// the configured connection's.
type VCenterTest struct {
	URL        string `json:"url,omitempty"`
	Username   string `json:"username,omitempty"`
	Password   string `json:"password,omitempty"`
	Thumbprint string `json:"thumbprint,omitempty"`
	Insecure   bool   `json:"insecure,omitempty"`
}

// VCenterTestResult is what a connection test found.
type VCenterTestResult struct {
	OK      bool   `json:"ok"`
	Version string `json:"version,omitempty"` // vCenter's full name and build
	Message string `json:"message"`
}

// VCenterTester tries a vCenter connection (log in, read the version, log
// out); the daemon implements it over vsphere.Connect. A refused or failed
// connection is a result with OK false, not an error; errors are for
// requests it cannot try (ErrConflict, ErrUnavailable).
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

func (s *Server) getSettings(c *gin.Context) (any, error) { return s.settings(c.Request.Context()) }

func (s *Server) putSettings(c *gin.Context) (any, error) {
	var st Settings
	if err := decodeStrict(c, &st); err != nil {
		return nil, err
	}
	if _, err := time.LoadLocation(st.TimeZone); err != nil || st.TimeZone == "" {
		return nil, invalid("timeZone", "unknown time zone %q (an IANA name such as Europe/Paris)", st.TimeZone)
	}
	if st.EventRetentionDays < 1 || st.EventRetentionDays > 3650 {
		return nil, invalid("eventRetentionDays", "from 1 to 3650")
	}
	if s.cfg.Settings == nil {
		return nil, fmt.Errorf("settings store: %w", ErrNotImplemented)
	}
	if err := s.cfg.Settings.PutSettings(c.Request.Context(), st); err != nil {
		return nil, err
	}
	return st, nil
}

func (s *Server) testVCenter(c *gin.Context) (any, error) {
	var req VCenterTest
	if err := optionalBody(c, &req); err != nil {
		return nil, err
	}
	if req.URL != "" {
		u, err := url.Parse(req.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(req.URL) > 2048 {
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
	if s.cfg.Mailer == nil {
		return nil, &apiError{status: http.StatusConflict, code: "smtp_not_configured", msg: "SMTP is not configured on this appliance (smtp in the configuration file)"}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Second)
	defer cancel()
	if err := s.cfg.Mailer.SendTest(ctx, req.To); err != nil {
		return nil, &apiError{status: http.StatusBadGateway, code: "smtp_failed", msg: "sending the test mail failed: " + err.Error()}
	}
	return gin.H{"ok": true}, nil
}
