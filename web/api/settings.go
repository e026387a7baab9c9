package api

import (
	"errors"
	"strings"

	"github.com/vmvault/vmvault/policy"
)

// Settings are the appliance-wide preferences the console edits.
type Settings struct {
	TimeZone           string `json:"timeZone"`           // IANA name, e.g. "Europe/Paris"
	EventRetentionDays int    `json:"eventRetentionDays"` // events older than this are pruned
}

// Where a section's values come from (SettingsView). The configuration
// file (YAML) is the seed; a section saved from the console wins over it
// from then on, until it is reset (DELETE /settings/{section}).
const (
	SourceYAML    = "yaml"    // the configuration file's section
	SourceConsole = "console" // saved through the API; wins over the YAML
	SourceNone    = "none"    // neither: the feature is off
)

// When a saved section takes effect (SectionSaved.Applies).
const (
	AppliesNow     = "now"     // applied live by the running daemon
	AppliesRestart = "restart" // saved; the daemon uses it from its next start
)

// SettingsView is GET /settings: the general settings and each editable
// section with where its values come from. Passwords are never returned:
// passwordSet says whether one is stored.
type SettingsView struct {
	Settings
	VCenter     VCenterSettings     `json:"vcenter"`
	SMTP        SMTPSettings        `json:"smtp"`
	Maintenance MaintenanceSettings `json:"maintenance"`
}

// VCenterSettings is the daemon's vCenter connection (PUT /settings/vcenter).
// The roles of vCenter users stay in the configuration file.
type VCenterSettings struct {
	URL        string `json:"url"`
	Username   string `json:"username"`
	Password   string `json:"password,omitempty"` // write-only; empty on PUT keeps the stored one
	Thumbprint string `json:"thumbprint,omitempty"`
	Insecure   bool   `json:"insecure,omitempty"`

	// Read-only.
	PasswordSet bool   `json:"passwordSet"`
	Source      string `json:"source"` // yaml, console or none
	// Active is the URL of the connection the running daemon uses ("" none);
	// when it differs from the saved values RestartNeeded is true.
	Active        string `json:"active,omitempty"`
	RestartNeeded bool   `json:"restartNeeded"`
}

// SMTPSettings is the mail server of alerts and the daily report (PUT /settings/smtp).
type SMTPSettings struct {
	Enabled       bool     `json:"enabled"` // false: no mail (the other fields are kept)
	Host          string   `json:"host"`
	Port          int      `json:"port"` // 0: the TLS mode's default
	TLS           string   `json:"tls"`  // starttls, implicit, none (loopback hosts only)
	Username      string   `json:"username,omitempty"`
	Password      string   `json:"password,omitempty"` // write-only; empty on PUT keeps the stored one
	From          string   `json:"from"`
	To            []string `json:"to"`
	DailyReportAt string   `json:"dailyReportAt"` // HH:MM in the appliance's time zone, or off
	Alerts        bool     `json:"alerts"`

	// Read-only.
	PasswordSet bool   `json:"passwordSet"`
	Source      string `json:"source"`
}

// MaintenanceSettings is the repository maintenance window (PUT
// /settings/maintenance): retention, reclaim and checks run inside it.
type MaintenanceSettings struct {
	Window        *policy.Window `json:"window"`        // null: no maintenance runs by itself
	FullCheckDays int            `json:"fullCheckDays"` // a full (read every blob) check at most this often; 0: 7

	Source string `json:"source"` // read-only
}

// SectionSaved is the answer to PUT /settings/{section}: what is now
// stored and when it takes effect.
type SectionSaved struct {
	Applies string `json:"applies"` // now or restart
	Message string `json:"message"`
}

// AddRepository is the body of POST /repositories: create a new local
// repository or open an existing one, and keep it open at every start.
type AddRepository struct {
	Mode       string `json:"mode"` // create or open
	Name       string `json:"name"`
	Path       string `json:"path"`       // absolute local directory
	Passphrase string `json:"passphrase"` // write-only; stored in a 0600 file in the state directory
	// Check only tries the request (the console's Test button): every
	// refusal as for adding; open mode opens the repository with the
	// passphrase and closes it again; nothing is created or kept.
	Check bool `json:"check,omitempty"`
}

// RemovedRepository is the answer to DELETE /repositories/{id}: the
// repository is detached from the appliance, its data untouched.
type RemovedRepository struct {
	Name string `json:"name"`
	Path string `json:"path"` // where its files (or objects) stay
	// DataKept is always true: removal never deletes a repository's data.
	DataKept bool   `json:"dataKept"`
	Message  string `json:"message"`
}

// Repository mode values.
const (
	RepoCreate = "create"
	RepoOpen   = "open"
)

// FieldProblem is one bad field a service found.
type FieldProblem struct {
	Field   string
	Message string
}

// InvalidError is a request a service refused for its fields' values
// (422 validation with the fields as details).
type InvalidError struct{ Fields []FieldProblem }

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return strings.Join(parts, "; ")
}

// Invalid returns an *InvalidError of one field.
func Invalid(field, msg string) error {
	return &InvalidError{Fields: []FieldProblem{{Field: field, Message: msg}}}
}

// AsInvalid returns err's field problems, nil when it is no InvalidError.
func AsInvalid(err error) []FieldProblem {
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie.Fields
	}
	return nil
}
