package drconfig

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/settings"
	"github.com/vmvault/vmvault/web/api"
)

type memJobs struct{ jobs []policy.Job }

func (m *memJobs) Jobs(context.Context) ([]policy.Job, error) { return m.jobs, nil }
func (m *memJobs) PutJob(_ context.Context, j policy.Job) error {
	m.jobs = append(m.jobs, j)
	return nil
}

type memCopyJobs struct{ jobs []copyjob.Job }

func (m *memCopyJobs) Jobs(context.Context) ([]copyjob.Job, error) { return m.jobs, nil }
func (m *memCopyJobs) PutJob(_ context.Context, j copyjob.Job) error {
	m.jobs = append(m.jobs, j)
	return nil
}

type memSettings struct {
	s     *api.Settings
	added []settings.Repo
}

func (m *memSettings) Settings(context.Context) (api.Settings, bool, error) {
	if m.s == nil {
		return api.Settings{}, false, nil
	}
	return *m.s, true, nil
}
func (m *memSettings) PutSettings(_ context.Context, s api.Settings) error { m.s = &s; return nil }
func (m *memSettings) Repositories(context.Context) ([]settings.Repo, error) {
	return m.added, nil
}

type memUsers struct{ users []auth.User }

func (m *memUsers) Users(context.Context) ([]auth.User, error) { return m.users, nil }
func (m *memUsers) ImportUser(_ context.Context, name string, role auth.Role, source string) (auth.User, error) {
	for _, u := range m.users {
		if u.Username == name {
			return u, auth.ErrUserExists
		}
	}
	u := auth.User{Username: name, Role: role, Source: source, PasswordNotSet: source == auth.SourceLocal}
	m.users = append(m.users, u)
	return u, nil
}

func appliance(repos map[string]*repository.Repository, users *memUsers, out *bytes.Buffer) *Appliance {
	return &Appliance{Clock: clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		Jobs: &memJobs{}, CopyJobs: &memCopyJobs{}, Settings: &memSettings{}, Users: users,
		Configured: []SavedRepo{{Name: "main", Path: "/srv/main"}},
		Open:       func() map[string]*repository.Repository { return repos },
		Log:        slog.New(slog.DiscardHandler), Stdout: out}
}

// What one appliance saves another imports: its jobs, settings and users
// (a local one without a password, an existing name left alone); a
// second import into the configured state is refused without Force; a
// job on a repository the importing appliance lacks names where it was.
func TestImportWhatWasSaved(t *testing.T) {
	ctx := context.Background()
	repo := repository.TestRepository(t)
	repos := map[string]*repository.Repository{"main": repo}
	a := appliance(repos, &memUsers{users: []auth.User{{Username: "admin", Role: auth.Role("administrator"), Source: auth.SourceLocal}}}, &bytes.Buffer{})
	a.Jobs.(*memJobs).jobs = []policy.Job{policy.NewJob("nightly", "Nightly", "main", time.UTC)}
	a.Settings.(*memSettings).s = &api.Settings{TimeZone: "Europe/Paris", EventRetentionDays: 30}
	a.Users.(*memUsers).users = append(a.Users.(*memUsers).users, auth.User{Username: "alice", Role: auth.Role("operator"), Source: auth.SourceLocal})
	s := NewSaver(a, time.Second)
	s.save(ctx, false)
	if s.saves.Load() != 1 {
		t.Fatal("nothing saved")
	}

	out := &bytes.Buffer{}
	b := appliance(repos, &memUsers{users: []auth.User{{Username: "admin", Role: auth.Role("administrator"), Source: auth.SourceLocal}}}, out)
	if err := b.Import(ctx, ImportConfig{Repository: "/srv/main"}); err != nil {
		t.Fatal(err)
	}
	if js := b.Jobs.(*memJobs).jobs; len(js) != 1 || js[0].ID != "nightly" || b.Settings.(*memSettings).s.TimeZone != "Europe/Paris" {
		t.Fatalf("imported jobs %v, settings %+v", js, b.Settings.(*memSettings).s)
	}
	if us := b.Users.(*memUsers).users; len(us) != 2 || us[1].Username != "alice" || !us[1].PasswordNotSet {
		t.Fatalf("users after the import: %+v", us)
	}
	for _, want := range []string{"user admin (administrator, local) exists on this appliance", "user alice (operator, local) recreated without a password", "users without a password: 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	if err := b.Import(ctx, ImportConfig{Repository: "main"}); !errors.Is(err, ErrStateNotEmpty) {
		t.Fatalf("a second import: %v", err)
	}

	c := appliance(map[string]*repository.Repository{"other": repo}, &memUsers{}, &bytes.Buffer{})
	if err := c.Import(ctx, ImportConfig{Repository: "other"}); err == nil || !strings.Contains(err.Error(), "main (it was at /srv/main)") {
		t.Fatalf("an import lacking the jobs' repository: %v", err)
	}
}

// Events passes events through and kicks the saver on the successful
// configuration changes only.
func TestEventsKickOnConfigChanges(t *testing.T) {
	ctx := context.Background()
	var rec recorder
	kicks := 0
	e := Events{Inner: &rec, Changed: func() { kicks++ }}
	for _, ev := range []policy.Event{
		{Kind: "job.create", Outcome: api.OutcomeOK},
		{Kind: "job.create", Outcome: api.OutcomeFailed},
		{Kind: "auth.login", Outcome: api.OutcomeOK},
		{Kind: "repository.remove", Outcome: api.OutcomeOK},
	} {
		if err := e.AddEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if evs, _ := e.Events(ctx, api.EventQuery{}); len(evs) != 4 || kicks != 2 {
		t.Fatalf("%d events passed through, %d kicks", len(evs), kicks)
	}
}

type recorder struct{ evs []policy.Event }

func (r *recorder) Events(context.Context, api.EventQuery) ([]policy.Event, error) { return r.evs, nil }
func (r *recorder) AddEvent(_ context.Context, e policy.Event) error {
	r.evs = append(r.evs, e)
	return nil
}

type scopedUsers struct{ memUsers }

func (m *scopedUsers) ImportScopedUser(ctx context.Context, name string, role auth.Role, source string, sc auth.Scope) (auth.User, error) {
	u, err := m.ImportUser(ctx, name, role, source)
	if err == nil {
		m.users[len(m.users)-1].Scope = sc
		u.Scope = sc
	}
	return u, err
}

// A scoped user is saved with its scope in format 2, and recreated with
// it; a store that cannot keep scopes refuses it rather than recreate it
// unscoped.
func TestImportKeepsScopes(t *testing.T) {
	ctx := context.Background()
	repo := repository.TestRepository(t)
	repos := map[string]*repository.Repository{"main": repo}
	fin := auth.Scope{VMs: []string{"fin-*"}}
	a := appliance(repos, &memUsers{users: []auth.User{{Username: "fin", Role: auth.RoleRestoreOnly, Source: auth.SourceLocal, Scope: fin}}}, &bytes.Buffer{})
	a.Jobs.(*memJobs).jobs = []policy.Job{policy.NewJob("nightly", "Nightly", "main", time.UTC)}
	c, err := a.Collect(ctx)
	if err != nil || c.Format != SavedConfigScopes || len(c.Users) != 1 || len(c.Users[0].Scope.VMs) != 1 {
		t.Fatalf("collected %+v %v", c, err)
	}
	s := NewSaver(a, time.Second)
	s.save(ctx, false)

	su := &scopedUsers{}
	b := &Appliance{}
	*b = *appliance(repos, nil, &bytes.Buffer{})
	b.Users = su
	if err := b.Import(ctx, ImportConfig{Repository: "main"}); err != nil {
		t.Fatal(err)
	}
	if len(su.users) != 1 || len(su.users[0].Scope.VMs) != 1 || su.users[0].Scope.VMs[0] != "fin-*" {
		t.Fatalf("imported %+v", su.users)
	}
	d := appliance(repos, &memUsers{}, &bytes.Buffer{})
	if err := d.Import(ctx, ImportConfig{Repository: "main"}); err == nil || !strings.Contains(err.Error(), "cannot keep scopes") {
		t.Fatalf("import of a scoped user into a store without scopes: %v", err)
	}
}
