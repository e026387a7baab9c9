package web

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// fakeAppliance is web's side of ApplianceSettings and RepositoryAdder: it
// keeps what was saved in memory and refuses what refuse says (the daemon's
// implementation over settings.Bolt is tested in daemon).
type fakeAppliance struct {
	mu      sync.Mutex
	vc      api.VCenterSettings
	smtp    api.SMTPSettings
	maint   api.MaintenanceSettings
	calls   []string
	refuse  error // returned by every call when set
	sendErr error // TestSMTP's
}

func (a *fakeAppliance) call(name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, name)
	return a.refuse
}

func (a *fakeAppliance) called() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

func (a *fakeAppliance) Sections(ctx context.Context) (api.VCenterSettings, api.SMTPSettings, api.MaintenanceSettings, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vc := a.vc
	vc.Password = "leaked-if-returned" // web must strip it whatever a service does
	if vc.Source == "" {
		vc.Source = api.SourceYAML
	}
	m := a.smtp
	m.Password = "leaked-if-returned"
	if m.Source == "" {
		m.Source = api.SourceNone
	}
	mt := a.maint
	if mt.Source == "" {
		mt.Source = api.SourceNone
	}
	return vc, m, mt, nil
}

func (a *fakeAppliance) SaveVCenter(ctx context.Context, v api.VCenterSettings) (api.SectionSaved, error) {
	if err := a.call("vcenter"); err != nil {
		return api.SectionSaved{}, err
	}
	a.mu.Lock()
	a.vc, a.vc.Source = v, api.SourceConsole
	a.mu.Unlock()
	return api.SectionSaved{Applies: api.AppliesRestart, Message: "restart"}, nil
}

func (a *fakeAppliance) SaveSMTP(ctx context.Context, m api.SMTPSettings) (api.SectionSaved, error) {
	if err := a.call("smtp"); err != nil {
		return api.SectionSaved{}, err
	}
	a.mu.Lock()
	a.smtp, a.smtp.Source = m, api.SourceConsole
	a.mu.Unlock()
	return api.SectionSaved{Applies: api.AppliesNow, Message: "now"}, nil
}

func (a *fakeAppliance) SaveMaintenance(ctx context.Context, m api.MaintenanceSettings) (api.SectionSaved, error) {
	if err := a.call("maintenance"); err != nil {
		return api.SectionSaved{}, err
	}
	a.mu.Lock()
	a.maint, a.maint.Source = m, api.SourceConsole
	a.mu.Unlock()
	return api.SectionSaved{Applies: api.AppliesNow, Message: "now"}, nil
}

func (a *fakeAppliance) ResetSection(ctx context.Context, section string) (api.SectionSaved, error) {
	if err := a.call("reset " + section); err != nil {
		return api.SectionSaved{}, err
	}
	return api.SectionSaved{Applies: api.AppliesNow, Message: "yaml again"}, nil
}

func (a *fakeAppliance) TestSMTP(ctx context.Context, m api.SMTPSettings, to string) error {
	if err := a.call("test-smtp " + m.Host + " " + to); err != nil {
		return err
	}
	return a.sendErr
}

func (a *fakeAppliance) AddRepository(ctx context.Context, req api.AddRepository) (api.RepositoryInfo, error) {
	if err := a.call("add " + req.Mode + " " + req.Name + " " + req.Path); err != nil {
		return api.RepositoryInfo{}, err
	}
	return api.RepositoryInfo{Name: req.Name, Path: req.Path, Format: "1.0", Encrypted: req.Passphrase != ""}, nil
}

func newSettingsFixture(t *testing.T) (*fixture, *fakeAppliance) {
	t.Helper()
	app := &fakeAppliance{}
	f := newFixture(t, func(c *Config) { c.Appliance = app; c.AddRepository = app; c.Mailer = &recordingMailer{} })
	return f, app
}

var (
	goodVCenter = map[string]any{"url": "https://vc.example.com/sdk", "username": "backup@vsphere.local", "password": "pw"}
	goodSMTP    = map[string]any{"enabled": true, "host": "smtp.example.com", "port": 587, "tls": "starttls", "from": "vmvault@example.com",
		"to": []string{"ops@example.com"}, "dailyReportAt": "07:00", "alerts": true}
	goodMaint = map[string]any{"window": map[string]any{"location": "UTC", "days": map[string]any{"saturday": []string{"01:00-07:00"}}}, "fullCheckDays": 7}
	goodRepo  = map[string]any{"mode": "create", "name": "offsite", "path": "/srv/vmvault/offsite", "passphrase": "correct horse"}
)

func with(base map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// Every bad value is a 422 naming its field, and the service is not
// called: nothing changes.
func TestSettingsSectionsValidation(t *testing.T) {
	f, app := newSettingsFixture(t)
	for _, tc := range []struct {
		name, method, path string
		body               any
		fields             []string
	}{
		{"vcenter no url", "PUT", "/api/v1/settings/vcenter", with(goodVCenter, "url", ""), []string{"url"}},
		{"vcenter ftp url", "PUT", "/api/v1/settings/vcenter", with(goodVCenter, "url", "ftp://vc"), []string{"url"}},
		{"vcenter no user", "PUT", "/api/v1/settings/vcenter", with(goodVCenter, "username", " "), []string{"username"}},
		{"vcenter password line break", "PUT", "/api/v1/settings/vcenter", with(goodVCenter, "password", "a\r\nb"), []string{"password"}},
		{"vcenter pin and skip", "PUT", "/api/v1/settings/vcenter", with(goodVCenter, "thumbprint", "AA:BB", "insecure", true), []string{"insecure"}},
		{"smtp several", "PUT", "/api/v1/settings/smtp", with(goodSMTP, "host", "", "tls", "ssl", "from", "nobody", "to", []string{}), []string{"host", "tls", "from", "to"}},
		{"smtp host with port", "PUT", "/api/v1/settings/smtp", with(goodSMTP, "host", "smtp.example.com:25"), []string{"host"}},
		{"smtp port", "PUT", "/api/v1/settings/smtp", with(goodSMTP, "port", 70000), []string{"port"}},
		{"smtp bad recipient", "PUT", "/api/v1/settings/smtp", with(goodSMTP, "to", []string{"ops@example.com", "not an address"}), []string{"to[1]"}},
		{"smtp report time", "PUT", "/api/v1/settings/smtp", with(goodSMTP, "dailyReportAt", "25:00"), []string{"dailyReportAt"}},
		{"maintenance empty range", "PUT", "/api/v1/settings/maintenance", with(goodMaint, "window", map[string]any{"location": "UTC", "days": map[string]any{"monday": []string{"01:00-01:00"}}}), []string{"window"}},
		{"maintenance no open time", "PUT", "/api/v1/settings/maintenance", with(goodMaint, "window", map[string]any{"location": "UTC", "days": map[string]any{}}), []string{"window"}},
		{"maintenance full check", "PUT", "/api/v1/settings/maintenance", with(goodMaint, "fullCheckDays", 400), []string{"fullCheckDays"}},
		{"repo mode", "POST", "/api/v1/repositories", with(goodRepo, "mode", "copy"), []string{"mode"}},
		{"repo name", "POST", "/api/v1/repositories", with(goodRepo, "name", "has space"), []string{"name"}},
		{"repo relative path", "POST", "/api/v1/repositories", with(goodRepo, "path", "srv/repo"), []string{"path"}},
		{"repo no path", "POST", "/api/v1/repositories", with(goodRepo, "path", ""), []string{"path"}},
		{"repo short passphrase", "POST", "/api/v1/repositories", with(goodRepo, "passphrase", "short"), []string{"passphrase"}},
		{"repo create without passphrase", "POST", "/api/v1/repositories", with(goodRepo, "passphrase", nil), []string{"passphrase"}},
		{"smtp test bad unsaved host", "POST", "/api/v1/settings/smtp/test", map[string]any{"to": "ops@example.com", "smtp": with(goodSMTP, "host", "")}, []string{"host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.admin(tc.method, tc.path, tc.body)
			if r.status != 422 {
				t.Fatalf("status %d %s, want 422", r.status, r.body)
			}
			for _, fld := range tc.fields {
				r.fieldNamed(t, fld)
			}
		})
	}
	if c := app.called(); len(c) != 0 {
		t.Fatalf("the service was called for invalid requests: %q", c)
	}
	// Unknown fields and malformed JSON are 400, as elsewhere.
	if r := f.admin("PUT", "/api/v1/settings/smtp", with(goodSMTP, "relay", "x")); r.status != 400 {
		t.Errorf("unknown field: %d", r.status)
	}
	if r := f.admin("PUT", "/api/v1/settings/maintenance", `{"window":{"location":"Mars/Base","days":{}}}`); r.status != 400 && r.status != 422 {
		t.Errorf("unknown zone: %d", r.status)
	}
	if r := f.admin("DELETE", "/api/v1/settings/tls", nil); r.status != 404 {
		t.Errorf("reset of an unknown section: %d", r.status)
	}
}

// Saving goes to the service; GET shows each section's source and never
// a password; the service's own field refusals are per-field 422s.
func TestSettingsSectionsSave(t *testing.T) {
	f, app := newSettingsFixture(t)
	var saved api.SectionSaved
	r := f.admin("PUT", "/api/v1/settings/vcenter", goodVCenter)
	if r.status != 200 {
		t.Fatalf("PUT vcenter: %d %s", r.status, r.body)
	}
	r.json(t, &saved)
	if saved.Applies != api.AppliesRestart {
		t.Fatalf("vCenter saved %+v: the answer must say it takes effect at restart", saved)
	}
	for _, b := range []struct {
		path string
		body any
	}{{"/api/v1/settings/smtp", goodSMTP}, {"/api/v1/settings/maintenance", goodMaint}, {"/api/v1/settings/maintenance", map[string]any{"window": nil}}} {
		if r := f.admin("PUT", b.path, b.body); r.status != 200 {
			t.Fatalf("PUT %s: %d %s", b.path, r.status, r.body)
		}
	}
	if r := f.admin("DELETE", "/api/v1/settings/smtp", nil); r.status != 200 {
		t.Fatalf("reset smtp: %d %s", r.status, r.body)
	}
	if got, want := strings.Join(app.called(), ","), "vcenter,smtp,maintenance,maintenance,reset smtp"; got != want {
		t.Fatalf("service calls %q, want %q", got, want)
	}
	r = f.admin("GET", "/api/v1/settings", nil)
	if strings.Contains(string(r.body), "leaked-if-returned") || strings.Contains(string(r.body), `"password"`) {
		t.Fatalf("GET /settings returned a password: %s", r.body)
	}
	var view api.SettingsView
	r.json(t, &view)
	if view.VCenter.Source != api.SourceConsole || view.VCenter.URL != "https://vc.example.com/sdk" || view.SMTP.Source != api.SourceConsole || view.Maintenance.Source != api.SourceConsole {
		t.Fatalf("sources %q %q %q", view.VCenter.Source, view.SMTP.Source, view.Maintenance.Source)
	}
	// The console sends GET's document back with a new time zone: accepted.
	doc := map[string]any{}
	r.json(t, &doc)
	doc["timeZone"] = "Europe/Paris"
	if r := f.admin("PUT", "/api/v1/settings", doc); r.status != 200 {
		t.Fatalf("PUT /settings with GET's document: %d %s", r.status, r.body)
	}

	// The service refuses a field: 422 naming it.
	app.mu.Lock()
	app.refuse = &api.InvalidError{Fields: []api.FieldProblem{{Field: "path", Message: "inside repository \"main\""}}}
	app.mu.Unlock()
	r = f.admin("POST", "/api/v1/repositories", goodRepo)
	if r.status != 422 {
		t.Fatalf("service refusal: %d %s", r.status, r.body)
	}
	r.fieldNamed(t, "path")
	app.mu.Lock()
	app.refuse = nil
	app.mu.Unlock()
	r = f.admin("POST", "/api/v1/repositories", goodRepo)
	if r.status != 201 || strings.Contains(string(r.body), "correct horse") {
		t.Fatalf("add repository: %d %s", r.status, r.body)
	}
	if r := f.admin("POST", "/api/v1/repositories", with(goodRepo, "check", true)); r.status != 200 {
		t.Fatalf("check only: %d %s", r.status, r.body)
	}
}

// The SMTP test sends through unsaved values when given them; a failed
// send is a 502 with the server's answer; without them, the configured mail.
func TestSMTPTestUnsaved(t *testing.T) {
	f, app := newSettingsFixture(t)
	r := f.admin("POST", "/api/v1/settings/smtp/test", map[string]any{"to": "me@example.com", "smtp": with(goodSMTP, "host", "relay.example.com")})
	if r.status != 200 {
		t.Fatalf("test with unsaved values: %d %s", r.status, r.body)
	}
	if c := app.called(); len(c) != 1 || c[0] != "test-smtp relay.example.com me@example.com" {
		t.Fatalf("calls %q", c)
	}
	app.mu.Lock()
	app.sendErr = errors.New("535 authentication failed")
	app.mu.Unlock()
	r = f.admin("POST", "/api/v1/settings/smtp/test", map[string]any{"to": "me@example.com", "smtp": goodSMTP})
	if r.status != 502 || !strings.Contains(string(r.body), "535") {
		t.Fatalf("failed send: %d %s", r.status, r.body)
	}
	// The daemon's mail switch without mail configured.
	f2 := newFixture(t, func(c *Config) { c.Mailer = notConfiguredMailer{} })
	if r := f2.admin("POST", "/api/v1/settings/smtp/test", map[string]any{"to": "me@example.com"}); r.status != 409 {
		t.Fatalf("no mail configured: %d %s", r.status, r.body)
	}
	// Without the service, editing is 501.
	f3 := newFixture(t, nil)
	if r := f3.admin("PUT", "/api/v1/settings/smtp", goodSMTP); r.status != 501 {
		t.Fatalf("no service: %d %s", r.status, r.body)
	}
	if r := f3.admin("POST", "/api/v1/repositories", goodRepo); r.status != 501 {
		t.Fatalf("no adder: %d %s", r.status, r.body)
	}
}

type notConfiguredMailer struct{}

func (notConfiguredMailer) SendTest(context.Context, string) error { return ErrSMTPNotConfigured }

// Only administrators edit settings and add repositories; operators and
// restore-only users are refused, and every attempt is an audit event
// with the user and outcome, and no password in it.
func TestSettingsSectionsRolesAudited(t *testing.T) {
	f, app := newSettingsFixture(t)
	routes := []struct {
		method, path string
		body         any
		kind         string
	}{
		{"PUT", "/api/v1/settings/vcenter", goodVCenter, "settings.vcenter"},
		{"PUT", "/api/v1/settings/smtp", with(goodSMTP, "username", "u", "password", "smtp-secret"), "settings.smtp"},
		{"PUT", "/api/v1/settings/maintenance", goodMaint, "settings.maintenance"},
		{"DELETE", "/api/v1/settings/maintenance", nil, "settings.reset"},
		{"POST", "/api/v1/repositories", goodRepo, "repository.add"},
	}
	for _, role := range []auth.Role{auth.RoleOperator, auth.RoleRestoreOnly} {
		for _, rt := range routes {
			if r := f.do(rt.method, rt.path, rt.body, bearer(f.tokens[role])); r.status != 403 {
				t.Errorf("%s %s as %s: %d, want 403", rt.method, rt.path, role, r.status)
			}
		}
	}
	if c := app.called(); len(c) != 0 {
		t.Fatalf("refused requests reached the service: %q", c)
	}
	for _, rt := range routes {
		if r := f.admin(rt.method, rt.path, rt.body); r.status/100 != 2 {
			t.Fatalf("%s %s as administrator: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
	var all []policy.Event
	r := f.admin("GET", "/api/v1/events?limit=1000", nil)
	r.json(t, &all)
	if strings.Contains(string(r.body), "smtp-secret") || strings.Contains(string(r.body), "correct horse") || strings.Contains(string(r.body), `"pw"`) {
		t.Fatalf("a secret is in the audit trail: %s", r.body)
	}
	for _, rt := range routes {
		var ok, failed int
		for _, e := range all {
			if e.Kind != rt.kind {
				continue
			}
			if e.Address != "127.0.0.1" || e.User == "" {
				t.Errorf("%s event without user or address: %+v", rt.kind, e)
			}
			switch e.Outcome {
			case OutcomeOK:
				ok++
			case OutcomeFailed:
				failed++
			}
		}
		if ok != 1 || failed != 2 {
			t.Errorf("%s: %d ok and %d failed events, want 1 and 2", rt.kind, ok, failed)
		}
	}
}

func TestSettingsTests(t *testing.T) {
	mailer := &recordingMailer{}
	f := newFixture(t, func(c *Config) { c.Mailer = mailer; c.VCenter = staticVCenter{} })
	tests := []struct {
		name, path, body string
		status           int
		field, code      string
	}{
		{"smtp ok", "/api/v1/settings/smtp/test", `{"to":"ops@example.com"}`, 200, "", ""},
		{"smtp no to", "/api/v1/settings/smtp/test", `{}`, 422, "to", ""},
		{"smtp bad address", "/api/v1/settings/smtp/test", `{"to":"not an address"}`, 422, "to", ""},
		{"smtp with name", "/api/v1/settings/smtp/test", `{"to":"Ops <ops@example.com>"}`, 422, "to", ""},
		{"smtp two", "/api/v1/settings/smtp/test", `{"to":"a@example.com, b@example.com"}`, 422, "to", ""},
		{"smtp unknown field", "/api/v1/settings/smtp/test", `{"to":"ops@example.com","cc":"x"}`, 400, "cc", ""},
		{"smtp empty body", "/api/v1/settings/smtp/test", ``, 400, "", ""},
		{"vcenter configured", "/api/v1/settings/vcenter/test", ``, 200, "", ""},
		{"vcenter given", "/api/v1/settings/vcenter/test", `{"url":"https://vc.example.com","username":"u","password":"p"}`, 200, "", ""},
		{"vcenter bad url", "/api/v1/settings/vcenter/test", `{"url":"ftp://vc"}`, 422, "url", ""},
		{"vcenter pin and insecure", "/api/v1/settings/vcenter/test", `{"url":"https://vc","thumbprint":"AA:BB","insecure":true}`, 422, "insecure", ""},
		{"vcenter newline", "/api/v1/settings/vcenter/test", `{"username":"a\nb"}`, 422, "username", ""},
		{"vcenter wrong type", "/api/v1/settings/vcenter/test", `{"insecure":"yes"}`, 400, "insecure", ""},
	}
	for _, tc := range tests {
		r := f.admin("POST", tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
			continue
		}
		if tc.field != "" {
			r.fieldNamed(t, tc.field)
		}
	}
	if len(mailer.to) != 1 || mailer.to[0] != "ops@example.com" {
		t.Fatalf("mails sent %v", mailer.to)
	}
	var res VCenterTestResult
	f.admin("POST", "/api/v1/settings/vcenter/test", `{"password":"wrong"}`).json(t, &res)
	if res.OK || res.Message == "" {
		t.Fatalf("refused test %+v", res)
	}
	mailer.err = errors.New("535 5.7.8 authentication failed")
	r := f.admin("POST", "/api/v1/settings/smtp/test", `{"to":"ops@example.com"}`)
	if d := r.errBody(t); r.status != 502 || d.Code != "smtp_failed" || !strings.Contains(d.Message, "535") {
		t.Fatalf("smtp failure: %d %s", r.status, r.body)
	}
	// Not configured.
	g := newFixture(t, nil)
	r = g.admin("POST", "/api/v1/settings/smtp/test", `{"to":"ops@example.com"}`)
	if r.status != 409 || r.errBody(t).Code != "smtp_not_configured" {
		t.Fatalf("no mailer: %d %s", r.status, r.body)
	}
	if r := g.admin("POST", "/api/v1/settings/vcenter/test", ``); r.status != 501 {
		t.Fatalf("no tester: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/api/v1/settings/smtp/test", `{"to":"ops@example.com"}`, bearer(f.tokens[auth.RoleOperator])); r.status != 403 {
		t.Fatalf("operator: %d", r.status)
	}
}
