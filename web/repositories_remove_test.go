package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/state"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/approval"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/web/api"
)

// setRemover removes repositories of a repos.Set as the daemon does
// (refusing while an operation runs, closing after the readers), without
// the daemon's state.
type setRemover struct{ rs *repos.Set }

func (r setRemover) CanRemove(ctx context.Context, name string) error {
	if !r.rs.Has(name) {
		return fmt.Errorf("repository %q: %w", name, api.ErrNotFound)
	}
	if ops := r.rs.InUse(name); len(ops) > 0 {
		return &repos.InUseError{Repository: name, Operations: ops}
	}
	return nil
}

func (r setRemover) RemoveRepository(ctx context.Context, name string) (api.RemovedRepository, error) {
	repo, err := r.rs.Remove(name)
	if err != nil {
		return api.RemovedRepository{}, err
	}
	path := repo.Location()
	return api.RemovedRepository{Name: name, Path: path, DataKept: true, Message: "removed; its data is kept in " + path}, repo.Close()
}

// newRemoveFixture is the API with a repository remover, the given
// approval delay and a second administrator (bob's token).
func newRemoveFixture(t *testing.T, delay time.Duration) (*fixture, *repos.Set, string) {
	t.Helper()
	var am *auth.Manager
	var rs *repos.Set
	f := newFixture(t, func(c *Config) {
		am = c.Auth
		rs = c.Repositories.(*repos.Set)
		c.RemoveRepository = setRemover{rs}
		adb, err := state.Open(filepath.Join(t.TempDir(), "approvals.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { adb.Close() })
		rec := c.Events.(EventRecorder)
		m, err := approval.New(approval.Config{DB: adb, Delay: delay, Clock: c.Clock,
			Executors: map[string]approval.Executor{approval.KindRemoveRepository: approval.RemoveRepository(setRemover{rs})},
			OnEvent:   func(e policy.Event) { _ = rec.AddEvent(context.Background(), e) }})
		if err != nil {
			t.Fatal(err)
		}
		c.Approvals = m
	})
	bob := secondAdmin(t, am)
	return f, rs, bob
}

// With a delay: 202 and a pending remove-repository action, the
// repository still there; operators and restore-only users are refused;
// the requester cannot approve; a second administrator's approval removes
// it (gone from the list, the dashboard and the points). Each step is an
// audit event.
func TestRemoveRepositoryAPIWithDelay(t *testing.T) {
	f, _, bob := newRemoveFixture(t, 24*time.Hour)
	for _, role := range []auth.Role{auth.RoleOperator, auth.RoleRestoreOnly} {
		if r := f.as(role, "DELETE", "/api/v1/repositories/main", nil); r.status != http.StatusForbidden {
			t.Fatalf("%s removes: %d %s", role, r.status, r.body)
		}
	}
	r := f.admin("DELETE", "/api/v1/repositories/main", nil)
	var a Approval
	r.json(t, &a)
	if r.status != http.StatusAccepted || a.Kind != api.ApprovalRemoveRepository || a.Subject != "main" || a.Repository != "main" ||
		!strings.Contains(a.Summary, "data is kept") || !strings.Contains(a.Summary, f.repo.Location()) {
		t.Fatalf("remove with a delay: %d %s", r.status, r.body)
	}
	if r := f.admin("GET", "/api/v1/repositories/main", nil); r.status != 200 {
		t.Fatalf("the repository while its removal waits: %d", r.status)
	}
	if r := f.admin("POST", "/api/v1/approvals/"+a.ID+"/approve", nil); r.status != http.StatusForbidden {
		t.Fatalf("the requester approves: %d %s", r.status, r.body)
	}
	r = f.do("POST", "/api/v1/approvals/"+a.ID+"/approve", nil, bearer(bob))
	r.json(t, &a)
	if r.status != 200 || a.Status != api.ApprovalExecuted {
		t.Fatalf("bob approves: %d %s", r.status, r.body)
	}
	if r := f.admin("GET", "/api/v1/repositories/main", nil); r.status != 404 {
		t.Fatalf("the removed repository: %d", r.status)
	}
	var list []RepositoryInfo
	f.admin("GET", "/api/v1/repositories", nil).json(t, &list)
	var dash Dashboard
	f.admin("GET", "/api/v1/dashboard", nil).json(t, &dash)
	if len(list) != 0 || len(dash.Repositories) != 0 {
		t.Fatalf("after the removal: repositories %+v, dashboard %+v", list, dash.Repositories)
	}
	if r := f.admin("GET", "/api/v1/restore-points/"+f.points[0].ID, nil); r.status != 404 {
		t.Fatalf("a point of the removed repository: %d", r.status)
	}
	want := map[string]bool{"approval.request": false, "approval.execute": false}
	for _, e := range f.eventKinds(t, "approval") {
		if _, ok := want[e.Kind]; ok && e.Outcome == OutcomeOK {
			want[e.Kind] = true
		}
	}
	if !want["approval.request"] || !want["approval.execute"] {
		t.Fatalf("audit events %v", want)
	}
}

// A running operation refuses the removal at the request (409 naming it,
// nothing held); without a delay the removal acts at once (200, data
// kept, audit event repository.remove); without a remover, 501.
func TestRemoveRepositoryAPI(t *testing.T) {
	f, rs, _ := newRemoveFixture(t, 0)
	_, done, err := rs.Use("main", "backup of web01")
	if err != nil {
		t.Fatal(err)
	}
	r := f.admin("DELETE", "/api/v1/repositories/main", nil)
	if r.status != http.StatusConflict || !strings.Contains(r.errBody(t).Message, "backup of web01") {
		t.Fatalf("remove while a backup runs: %d %s", r.status, r.body)
	}
	done()
	if r := f.admin("DELETE", "/api/v1/repositories/nothere", nil); r.status != 404 {
		t.Fatalf("remove an unknown repository: %d %s", r.status, r.body)
	}
	r = f.admin("DELETE", "/api/v1/repositories/main", nil)
	var res api.RemovedRepository
	r.json(t, &res)
	if r.status != 200 || !res.DataKept || res.Name != "main" || res.Path != f.repo.Location() {
		t.Fatalf("remove now: %d %s", r.status, r.body)
	}
	if _, err := f.repo.List(context.Background()); !errors.Is(err, repository.ErrClosed) {
		t.Fatalf("the removed repository is not closed: %v", err)
	}
	kinds := map[string]string{}
	for _, e := range f.eventKinds(t, "repository") {
		kinds[e.Kind] = e.Outcome
	}
	if kinds["repository.remove"] != OutcomeOK {
		t.Fatalf("audit events %v", kinds)
	}

	g := newFixture(t, nil)
	if r := g.admin("DELETE", "/api/v1/repositories/main", nil); r.status != http.StatusNotImplemented {
		t.Fatalf("without a remover: %d %s", r.status, r.body)
	}
}
