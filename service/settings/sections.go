package settings

import (
	"context"
	"fmt"

	"github.com/vmvault/vmvault/web/api"
)

// Section keys in bucket "settings", beside "settings" (the general ones).
const (
	SectionVCenter     = "vcenter"
	SectionSMTP        = "smtp"
	SectionMaintenance = "maintenance"
	keyRepositories    = "repositories"
)

// Option changes a Bolt made by NewBolt.
type Option func(*Bolt)

// WithSealer seals the passwords of the vCenter and SMTP sections; without
// one, saving a section with a password fails with ErrNoKey.
func WithSealer(s *Sealer) Option { return func(b *Bolt) { b.seal = s } }

// A section as stored: the API's fields without the read-only ones, the
// password replaced by its sealed form.
type storedVCenter struct {
	URL        string `json:"url"`
	Username   string `json:"username"`
	Sealed     string `json:"passwordSealed,omitempty"`
	Thumbprint string `json:"thumbprint,omitempty"`
	Insecure   bool   `json:"insecure,omitempty"`
}

type storedSMTP struct {
	Enabled       bool     `json:"enabled"`
	Host          string   `json:"host"`
	Port          int      `json:"port"`
	TLS           string   `json:"tls"`
	Username      string   `json:"username,omitempty"`
	Sealed        string   `json:"passwordSealed,omitempty"`
	From          string   `json:"from"`
	To            []string `json:"to"`
	DailyReportAt string   `json:"dailyReportAt"`
	Alerts        bool     `json:"alerts"`
}

// Repo is a repository added from the console: the daemon opens it at
// every start, after those of the configuration file.
type Repo struct {
	Name           string `json:"name"`
	Path           string `json:"path"`
	PassphraseFile string `json:"passphraseFile,omitempty"` // "" for an unencrypted repository
}

// VCenter returns the saved vCenter section, its password opened; false
// when the console never saved one.
func (b *Bolt) VCenter(ctx context.Context) (api.VCenterSettings, bool, error) {
	var s storedVCenter
	ok, err := b.get(SectionVCenter, &s)
	if err != nil || !ok {
		return api.VCenterSettings{}, false, err
	}
	pw, err := b.seal.Open(s.Sealed)
	if err != nil {
		return api.VCenterSettings{}, false, fmt.Errorf("vCenter password: %w", err)
	}
	return api.VCenterSettings{URL: s.URL, Username: s.Username, Password: pw, PasswordSet: pw != "",
		Thumbprint: s.Thumbprint, Insecure: s.Insecure, Source: api.SourceConsole}, true, nil
}

// PutVCenter saves the vCenter section (v.Password in clear; it is sealed).
func (b *Bolt) PutVCenter(ctx context.Context, v api.VCenterSettings) error {
	sealed, err := b.seal.Seal(v.Password)
	if err != nil {
		return fmt.Errorf("vCenter password: %w", err)
	}
	return b.put(SectionVCenter, storedVCenter{URL: v.URL, Username: v.Username, Sealed: sealed, Thumbprint: v.Thumbprint, Insecure: v.Insecure})
}

// SMTP returns the saved mail section, its password opened.
func (b *Bolt) SMTP(ctx context.Context) (api.SMTPSettings, bool, error) {
	var s storedSMTP
	ok, err := b.get(SectionSMTP, &s)
	if err != nil || !ok {
		return api.SMTPSettings{}, false, err
	}
	pw, err := b.seal.Open(s.Sealed)
	if err != nil {
		return api.SMTPSettings{}, false, fmt.Errorf("SMTP password: %w", err)
	}
	return api.SMTPSettings{Enabled: s.Enabled, Host: s.Host, Port: s.Port, TLS: s.TLS, Username: s.Username, Password: pw, PasswordSet: pw != "",
		From: s.From, To: s.To, DailyReportAt: s.DailyReportAt, Alerts: s.Alerts, Source: api.SourceConsole}, true, nil
}

// PutSMTP saves the mail section (m.Password in clear; it is sealed).
func (b *Bolt) PutSMTP(ctx context.Context, m api.SMTPSettings) error {
	sealed, err := b.seal.Seal(m.Password)
	if err != nil {
		return fmt.Errorf("SMTP password: %w", err)
	}
	return b.put(SectionSMTP, storedSMTP{Enabled: m.Enabled, Host: m.Host, Port: m.Port, TLS: m.TLS, Username: m.Username, Sealed: sealed,
		From: m.From, To: m.To, DailyReportAt: m.DailyReportAt, Alerts: m.Alerts})
}

// Maintenance returns the saved maintenance section.
func (b *Bolt) Maintenance(ctx context.Context) (api.MaintenanceSettings, bool, error) {
	var m api.MaintenanceSettings
	ok, err := b.get(SectionMaintenance, &m)
	if err != nil || !ok {
		return api.MaintenanceSettings{}, false, err
	}
	m.Source = api.SourceConsole
	return m, true, nil
}

// PutMaintenance saves the maintenance section.
func (b *Bolt) PutMaintenance(ctx context.Context, m api.MaintenanceSettings) error {
	m.Source = ""
	return b.put(SectionMaintenance, m)
}

// Repositories returns the repositories added from the console, in the
// order they were added.
func (b *Bolt) Repositories(ctx context.Context) ([]Repo, error) {
	var out []Repo
	if _, err := b.get(keyRepositories, &out); err != nil {
		return nil, err
	}
	return out, nil
}
