package appsettings

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/state"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/settings"
	"github.com/vmvault/vmvault/web/api"
)

func newStore(t *testing.T) *settings.Bolt {
	t.Helper()
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := settings.NewBolt(db)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type jobs []policy.Job

func (j jobs) Jobs(context.Context) ([]policy.Job, error) { return j, nil }

type copyJobs []copyjob.Job

func (j copyJobs) Jobs(context.Context) ([]copyjob.Job, error) { return j, nil }

type tasks []task.Info

func (t tasks) List(context.Context, int) ([]task.Info, error) { return t, nil }

// The maintenance section: the console's when saved, else the YAML's,
// else none.
func TestMaintenanceEffective(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	w, fc, src, err := MaintenanceEffective(ctx, st, Maintenance{FullCheckDays: 7})
	if err != nil || w != nil || fc != 7*24*time.Hour || src != api.SourceNone {
		t.Fatalf("nothing configured: %v %v %q %v", w, fc, src, err)
	}
	yw := &policy.Window{Location: time.UTC}
	yw.Days[time.Sunday] = []policy.Range{{Start: 60, End: 120}}
	if w, _, src, _ := MaintenanceEffective(ctx, st, Maintenance{Window: yw, FullCheckDays: 7}); w != yw || src != api.SourceYAML {
		t.Fatalf("the YAML's: %v %q", w, src)
	}
	if err := st.PutMaintenance(ctx, api.MaintenanceSettings{FullCheckDays: 3}); err != nil {
		t.Fatal(err)
	}
	w, fc, src, err = MaintenanceEffective(ctx, st, Maintenance{Window: yw, FullCheckDays: 7})
	if err != nil || w != nil || fc != 3*24*time.Hour || src != api.SourceConsole {
		t.Fatalf("the console's: %v %v %q %v", w, fc, src, err)
	}
}

func TestSameVCenter(t *testing.T) {
	vc := &VCenter{URL: "https://vc", Username: "u", Thumbprint: "aa"}
	act := &Connection{URL: "https://vc", Username: "u", Password: "pw", Thumbprint: "aa"}
	switch {
	case !sameVCenter(nil, "", nil):
		t.Error("none and none differ")
	case sameVCenter(vc, "pw", nil), sameVCenter(nil, "", act):
		t.Error("one and none are the same")
	case !sameVCenter(vc, "pw", act):
		t.Error("the same connection differs")
	case sameVCenter(vc, "other", act):
		t.Error("another password is the same connection")
	}
}

// A repository added from the console: the refusals, then one created,
// given to the daemon and the backup engine; a job using it keeps it, and
// once none does its removal forgets it, drops its passphrase file and
// says the configuration changed.
func TestAddAndRemoveRepository(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	rs := repos.New(nil)
	var opened, backups, forgot []string
	changed := 0
	js := jobs{}
	cfg := Config{Store: newStore(t), Repos: rs, Log: slog.New(slog.DiscardHandler), Location: time.UTC, StateDir: stateDir,
		RepoInit:   repository.InitOptions{Chunker: repository.TestChunker, KDF: repository.TestKDF},
		Configured: []Repo{{Name: "main", Path: filepath.Join(dir, "main")}},
		CopyJobs:   copyJobs{}, Tasks: tasks{},
		Opened: func(name string, r *repository.Repository) {
			opened = append(opened, name)
			t.Cleanup(func() { r.Close() })
		},
		Forget:     func(name string) { forgot = append(forgot, name) },
		AddBackups: func(name string, _ *repository.Repository) { backups = append(backups, name) },
		Changed:    func() { changed++ },
	}
	cfg.Jobs = &js
	a := New(cfg)

	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		req  api.AddRepository
		want string
	}{
		{api.AddRepository{Name: "r", Path: filepath.Join(stateDir, "r"), Mode: api.RepoCreate}, "state directory"},
		{api.AddRepository{Name: "r", Path: full, Mode: api.RepoCreate}, "not empty"},
		{api.AddRepository{Name: "r", Path: filepath.Join(dir, "none"), Mode: api.RepoOpen}, "no such directory"},
		{api.AddRepository{Name: "r", Path: full, Mode: api.RepoOpen}, "holds no repository"},
	} {
		_, err := a.AddRepository(ctx, bad.req)
		var ie *api.InvalidError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want an invalid field saying %q", bad.req, err, bad.want)
		}
	}
	path := filepath.Join(dir, "offsite")
	if ri, err := a.AddRepository(ctx, api.AddRepository{Name: "offsite", Path: path, Mode: api.RepoCreate, Passphrase: "pass-1", Check: true}); err != nil || !ri.Encrypted {
		t.Fatalf("check: %+v %v", ri, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a check created the repository: %v", err)
	}
	if _, err := a.AddRepository(ctx, api.AddRepository{Name: "offsite", Path: path, Mode: api.RepoCreate, Passphrase: "pass-1"}); err != nil {
		t.Fatal(err)
	}
	if !rs.Has("offsite") || len(opened) != 1 || len(backups) != 1 {
		t.Fatalf("after the add: in the set %v, opened %v, backups %v", rs.Has("offsite"), opened, backups)
	}
	pfile := filepath.Join(stateDir, "repositories", "offsite.passphrase")
	if b, err := os.ReadFile(pfile); err != nil || string(b) != "pass-1\n" {
		t.Fatalf("passphrase file: %q %v", b, err)
	}
	if _, err := a.AddRepository(ctx, api.AddRepository{Name: "offsite", Path: filepath.Join(dir, "other"), Mode: api.RepoCreate}); err == nil {
		t.Fatal("a second repository of the same name was added")
	}

	if err := a.CanRemove(ctx, "main"); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("remove the configuration file's: %v", err)
	}
	if err := a.CanRemove(ctx, "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("remove an unknown one: %v", err)
	}
	js = jobs{policy.NewJob("nightly", "Nightly", "offsite", time.UTC)}
	if _, err := a.RemoveRepository(ctx, "offsite"); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "backup jobs nightly") {
		t.Fatalf("remove one a job uses: %v", err)
	}
	js = nil
	res, err := a.RemoveRepository(ctx, "offsite")
	if err != nil || !res.DataKept {
		t.Fatalf("remove: %+v %v", res, err)
	}
	if rs.Has("offsite") || len(forgot) != 1 || changed != 1 {
		t.Fatalf("after the removal: in the set %v, forgot %v, changed %d", rs.Has("offsite"), forgot, changed)
	}
	if _, err := os.Stat(pfile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the passphrase file stayed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(path, "config")); err != nil {
		t.Fatalf("the data went: %v", err)
	}
}
