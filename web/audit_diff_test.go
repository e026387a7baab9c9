package web

import (
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// diffFields lists what changed as an auditor reads it and never a
// secret's value.
func TestDiffFields(t *testing.T) {
	job := policy.Job{ID: "web-nightly", Name: "Web nightly", Repository: "main", Retention: policy.Retention{Last: 7, Daily: 7}}
	longer := job
	longer.Retention.Daily = 14
	longer.Name = "Web nightly (tier 1)"
	smtp := api.SMTPSettings{Host: "smtp.example.com", Port: 587, Password: "old-smtp-secret", To: []string{"ops@example.com"}}
	smtp2 := smtp
	smtp2.Password, smtp2.Port, smtp2.To = "new-smtp-secret", 465, []string{"ops@example.com", "audit@example.com"}
	type creds struct {
		User       string            `json:"user"`
		Passphrase string            `json:"passphrase"`
		S3         map[string]string `json:"s3"`
		APIToken   string            `json:"apiToken"`
	}
	tests := []struct {
		name          string
		before, after any
		skip          []string
		want          []string // changeText of each change, in order
	}{
		{"a job's retention and name", job, longer, nil,
			[]string{"name: Web nightly → Web nightly (tier 1)", "retention.daily: 7 → 14"}},
		{"nothing changed", job, job, nil, nil},
		{"a new copy of nothing", nil, policy.Retention{Last: 3}, nil, []string{"daily: (none) → 0", "last: (none) → 3", "monthly: (none) → 0",
			"quarterly: (none) → 0", "weekly: (none) → 0", "yearly: (none) → 0"}},
		{"the SMTP password, port and recipients", smtp, smtp2, []string{"source"},
			[]string{"password: (changed)", "port: 587 → 465", `to: ["ops@example.com"] → ["ops@example.com","audit@example.com"]`}},
		{"secrets anywhere on the path", creds{User: "a", Passphrase: "p1", S3: map[string]string{"accessKey": "AK1", "region": "eu"}, APIToken: "t1"},
			creds{User: "b", Passphrase: "p2", S3: map[string]string{"accessKey": "AK2", "region": "us"}, APIToken: "t2"}, nil,
			[]string{"apiToken: (changed)", "passphrase: (changed)", "s3.accessKey: (changed)", "s3.region: eu → us", "user: a → b"}},
		{"a user's role (created skipped)", auth.User{Username: "ann", Role: auth.RoleOperator, Source: "local"},
			auth.User{Username: "ann", Role: auth.RoleAdministrator, Source: "ldap"}, []string{"source"},
			[]string{"role: operator → administrator"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := diffFields(tc.before, tc.after, tc.skip...)
			var texts []string
			for _, ch := range got {
				texts = append(texts, changeText(ch))
				for _, secret := range []string{"smtp-secret", "p1", "p2", "AK1", "AK2", "t1", "t2"} {
					if ch.Secret && (strings.Contains(ch.From, secret) || strings.Contains(ch.To, secret)) {
						t.Errorf("change %+v keeps a secret", ch)
					}
				}
			}
			if strings.Join(texts, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestSecretField(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "passwordSet": true, "passphrase": true, "secretKey": true, "accessKey": true, "apiToken": true,
		"key": true, "clientSecret": true, "credentials": true,
		"name": false, "keepLast": false, "last": false, "keyboard": false, "host": false, "objectLockDays": false,
	} {
		if got := secretField(name); got != want {
			t.Errorf("secretField(%q) = %v, want %v", name, got, want)
		}
	}
}

// findEvent returns the newest event of kind, failing the test when none.
func findEvent(t *testing.T, f *fixture, kind string) (policy.Event, string) {
	t.Helper()
	r := f.admin("GET", "/api/v1/events?kind="+kind, nil)
	if r.status != 200 {
		t.Fatalf("events?kind=%s: %d %s", kind, r.status, r.body)
	}
	var evs []policy.Event
	r.json(t, &evs)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i], string(r.body)
		}
	}
	t.Fatalf("no %s event in %s", kind, r.body)
	return policy.Event{}, ""
}

func changeTexts(e policy.Event) string {
	var out []string
	for _, ch := range e.Changes {
		out = append(out, changeText(ch))
	}
	return strings.Join(out, "; ")
}

// A change through the API is an event naming the object and its changed
// fields; a password set through it shows "(changed)" and never reaches
// the event log. Before, "admin changed a job nightly" said neither which
// job by name nor what changed.
func TestAuditChanges(t *testing.T) {
	f, _ := newSettingsFixture(t)
	job := validJob("web-nightly")
	job["name"] = "Web nightly"
	if r := f.admin("POST", "/api/v1/jobs", job); r.status != 201 {
		t.Fatalf("create job: %d %s", r.status, r.body)
	}
	job["retention"] = map[string]any{"last": 5, "daily": 7}
	if r := f.admin("PUT", "/api/v1/jobs/web-nightly", job); r.status != 200 {
		t.Fatalf("put job: %d %s", r.status, r.body)
	}
	const userPassword = "Very-secret-user-pw-42"
	if r := f.admin("POST", "/api/v1/users", map[string]any{"username": "ann", "password": "First-secret-pw-4242", "role": "operator"}); r.status != 201 {
		t.Fatalf("create user: %d %s", r.status, r.body)
	}
	if r := f.admin("PUT", "/api/v1/users/ann", map[string]any{"password": userPassword, "role": "administrator"}); r.status != 200 {
		t.Fatalf("put user: %d %s", r.status, r.body)
	}
	const smtpPassword = "smtp-secret-Xq9"
	if r := f.admin("PUT", "/api/v1/settings/smtp", goodSMTP); r.status != 200 {
		t.Fatalf("put smtp: %d %s", r.status, r.body)
	}
	if r := f.admin("PUT", "/api/v1/settings/smtp", with(goodSMTP, "password", smtpPassword, "port", 465, "tls", "implicit")); r.status != 200 {
		t.Fatalf("put smtp: %d %s", r.status, r.body)
	}

	tests := []struct {
		kind, objKind, objID, objName string
		message, changes              string
	}{
		{"job.update", "job", "web-nightly", "Web nightly", "admin changed job web-nightly (Web nightly) from 127.0.0.1; retention.daily: 0 → 7; retention.last: 1 → 5",
			"retention.daily: 0 → 7; retention.last: 1 → 5"},
		{"job.create", "job", "web-nightly", "Web nightly", "admin created job web-nightly (Web nightly)", ""},
		{"user.update", "user", "ann", "", "admin changed user ann", "role: operator → administrator; password: (changed)"},
		{"settings.smtp", "settings", "smtp", "mail server", "admin changed settings smtp (mail server)", "port: 587 → 465; tls: starttls → implicit; password: (changed)"},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			e, body := findEvent(t, f, tc.kind)
			if e.ObjectKind != tc.objKind || e.ObjectID != tc.objID || e.ObjectName != tc.objName {
				t.Errorf("object %q %q %q, want %q %q %q", e.ObjectKind, e.ObjectID, e.ObjectName, tc.objKind, tc.objID, tc.objName)
			}
			if !strings.HasPrefix(e.Message, tc.message) {
				t.Errorf("message %q, want it to start %q", e.Message, tc.message)
			}
			if got := changeTexts(e); got != tc.changes {
				t.Errorf("changes %q, want %q", got, tc.changes)
			}
			for _, secret := range []string{userPassword, smtpPassword, "leaked-if-returned"} {
				if strings.Contains(body, secret) {
					t.Errorf("GET /events shows the secret %q: %s", secret, body)
				}
			}
		})
	}
	if e, _ := findEvent(t, f, "job.update"); e.Job != "web-nightly" {
		t.Errorf("a job's change is not under the job filter: job %q", e.Job)
	}
}

// The console's Test of a repository (check: true) keeps nothing: it is
// repository.test, never "added a repository".
func TestRepositoryTestIsNotAdded(t *testing.T) {
	f, _ := newSettingsFixture(t)
	if r := f.admin("POST", "/api/v1/repositories", with(goodRepo, "check", true)); r.status != 200 {
		t.Fatalf("test: %d %s", r.status, r.body)
	}
	var evs []policy.Event
	f.admin("GET", "/api/v1/events?kind=repository", nil).json(t, &evs)
	if len(evs) != 1 || evs[0].Kind != "repository.test" || evs[0].ObjectID != "offsite" || !strings.Contains(evs[0].Message, "tested repository offsite") {
		t.Fatalf("after a Test: %+v, want one repository.test of offsite", evs)
	}
	if r := f.admin("POST", "/api/v1/repositories", goodRepo); r.status != 201 {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	e, _ := findEvent(t, f, "repository.add")
	if e.ObjectID != "offsite" || !strings.Contains(e.Message, "added repository offsite") {
		t.Errorf("repository.add: %+v", e)
	}
}

// The Kind filter offers every kind: each audit kind of a route, the
// download's, and the scheduler's, each in a known group.
func TestEventKindsCoverEveryKind(t *testing.T) {
	f := newFixture(t, nil)
	var kinds []EventKind
	if r := f.as(auth.RoleRestoreOnly, "GET", "/api/v1/event-kinds", nil); r.status != 200 {
		t.Fatalf("events/kinds: %d %s", r.status, r.body)
	} else {
		r.json(t, &kinds)
	}
	listed := map[string]EventKind{}
	groups := map[string]bool{}
	for _, g := range eventKindGroups {
		groups[g] = true
	}
	for _, k := range kinds {
		if _, dup := listed[k.Kind]; dup {
			t.Errorf("kind %s listed twice", k.Kind)
		}
		listed[k.Kind] = k
		if !groups[k.Group] || k.Label == "" {
			t.Errorf("kind %+v has no known group or no label", k)
		}
	}
	want := []string{EventKindFileDownload, "repository.test", EventLoginLockout,
		policy.EventJobStarted, policy.EventJobFinished, policy.EventVMBackedUp, policy.EventVMFailed, policy.EventVMCancelled,
		policy.EventVMInterrupted, policy.EventVMNotBackedUp, policy.EventSelectionNew, policy.EventSelectionVanished,
		policy.EventSelectionFailed, policy.EventWindowMissed, policy.EventRetentionRemoved, policy.EventReclaimDone,
		policy.EventCheckClean, policy.EventCheckDamage, policy.EventCheckPaused, policy.EventMaintenanceFailed,
		policy.EventScriptRan, policy.EventScriptFailed}
	for _, k := range auditKinds {
		want = append(want, k)
	}
	for _, k := range want {
		if k != "" && listed[k].Kind == "" {
			t.Errorf("the Kind filter lacks %s", k)
		}
	}
}
