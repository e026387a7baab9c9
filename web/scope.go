package web

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/filerestore/catalog"
	"github.com/vmvault/vmvault/web/api"
)

// Scopes (auth.Scope): a user or token limited to some VMs and
// repositories sees and acts only on those. Every route of the table says
// how it honours a scope (scopeClass); the adapter enforces the classes
// that name a point or a repository in the path before the handler runs,
// and the handlers of lists filter through the request's scopeJudge.

// scopeClass says how a route honours the principal's scope.
type scopeClass uint8

const (
	// scopeUnset is the zero value: TestScopeRouteTable refuses it, so a
	// new route must say how it treats scopes.
	scopeUnset scopeClass = iota
	// scopeNA: the route touches no VM's backup data (jobs, settings,
	// users, vCenter's own inventory, the caller itself).
	scopeNA
	// scopePointID: :id is a restore point; outside the scope the adapter
	// answers 404, as for a point that does not exist.
	scopePointID
	// scopeRepoID: :id is a repository; outside the scope, 404.
	scopeRepoID
	// scopeFiltered: a list; the handler leaves out what the scope does not allow.
	scopeFiltered
	// scopeBody: the body names points, VMs or a repository; the handler
	// answers outside the scope exactly as for ones that do not exist.
	scopeBody
	// scopeTaskID: :id is a task; one working on a point, VM or
	// repository outside the scope answers 404 (allowsTask).
	scopeTaskID
	// scopeInstantID: :id is an instant recovery session; one running a
	// point outside the scope answers 404.
	scopeInstantID
)

func (k scopeClass) String() string {
	switch k {
	case scopeNA:
		return "not-applicable"
	case scopePointID:
		return "point-id"
	case scopeRepoID:
		return "repository-id"
	case scopeFiltered:
		return "filtered"
	case scopeBody:
		return "body"
	case scopeTaskID:
		return "task-id"
	case scopeInstantID:
		return "instant-id"
	}
	return "unset"
}

// errOutOfScope is what a point outside the scope answers: a 404 like an
// unknown point's, so that it tells nothing of the point.
func errPointNotFound(id string) error {
	return fmt.Errorf("restore point %s: %w", id, ErrNotFound)
}

// enforceScope runs before the handler of a route: a point or repository
// named in the path and outside the principal's scope ends the request
// with 404.
func (s *Server) enforceScope(c *gin.Context, rt route, p auth.Principal) error {
	if !p.Scoped() {
		return nil
	}
	switch rt.scope {
	case scopePointID:
		id, err := pointID(c)
		if err != nil {
			return err
		}
		rp, err := s.cfg.Points.Point(c.Request.Context(), id)
		if err != nil {
			return err
		}
		if !s.judge(c).allowsPoint(rp) {
			return errPointNotFound(id)
		}
	case scopeRepoID:
		if !p.AllowsRepository(c.Param("id")) {
			return fmt.Errorf("repository %q: %w", c.Param("id"), ErrNotFound)
		}
	case scopeInstantID:
		if _, _, err := s.session(c); err != nil {
			return err
		}
	case scopeTaskID:
		ctx := c.Request.Context()
		t, err := s.cfg.Tasks.Get(ctx, c.Param("id"))
		if err != nil {
			return err
		}
		if !s.allowsTask(ctx, s.judge(c), t) {
			return fmt.Errorf("task %s: %w", c.Param("id"), task.ErrNotFound)
		}
	}
	return nil
}

const judgeKey = "vmvault.scope"

// scopeJudge decides what one request's scoped principal may see. A nil
// judge (an unscoped principal) allows everything.
type scopeJudge struct {
	p       auth.Principal
	byUUID  map[string]*policy.VM
	byMoRef map[string]*policy.VM
	tags    map[string][]string // tag id -> its id, name and "category:name"
}

// judge returns the request's judge, nil for an unscoped principal.
func (s *Server) judge(c *gin.Context) *scopeJudge {
	p := principal(c)
	if !p.Scoped() {
		return nil
	}
	if v, ok := c.Get(judgeKey); ok {
		return v.(*scopeJudge)
	}
	j := s.newJudge(c.Request.Context(), p)
	c.Set(judgeKey, j)
	return j
}

// newJudge reads the inventory (and the tag names when the scope has
// tags). When vCenter cannot be read, the judge knows no VM: folders and
// tags allow nothing, name patterns match the names points recorded.
func (s *Server) newJudge(ctx context.Context, p auth.Principal) *scopeJudge {
	j := &scopeJudge{p: p, byUUID: map[string]*policy.VM{}, byMoRef: map[string]*policy.VM{}, tags: map[string][]string{}}
	vms, tags := s.scopeInventory(ctx, p.NeedsInventory())
	for i := range vms {
		v := &vms[i]
		if v.InstanceUUID != "" {
			j.byUUID[strings.ToLower(v.InstanceUUID)] = v
		}
		if v.MoRef != "" {
			j.byMoRef[v.MoRef] = v
		}
	}
	for _, t := range tags {
		j.tags[t.ID] = []string{t.ID, t.Name, t.Category + ":" + t.Name}
	}
	return j
}

// scopeInvTTL is how long the inventory a scope is judged on is reused.
const scopeInvTTL = 15 * time.Second

type scopeInvCache struct {
	mu   sync.Mutex
	at   time.Time
	vms  []policy.VM
	tags []api.Tag
	ok   bool
}

// scopeInventory returns the inventory's VMs and, when withTags, the tags
// with their names; empty when vCenter cannot answer (logged).
func (s *Server) scopeInventory(ctx context.Context, withTags bool) ([]policy.VM, []api.Tag) {
	if s.cfg.Inventory == nil {
		return nil, nil
	}
	c := &s.scopeInv
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.now()
	if c.ok && now.Sub(c.at) < scopeInvTTL && now.Sub(c.at) >= 0 && (!withTags || c.tags != nil) {
		return c.vms, c.tags
	}
	vms, err := s.cfg.Inventory.VMs(ctx)
	if err != nil {
		s.cfg.Logger.Warn("scope: read the inventory", "err", err)
		return nil, nil
	}
	var tags []api.Tag
	if withTags && s.cfg.Tags != nil {
		if tags, err = s.cfg.Tags.Tags(ctx); err != nil {
			s.cfg.Logger.Warn("scope: read the tags", "err", err)
			tags = nil
		}
		if tags == nil {
			tags = []api.Tag{}
		}
	}
	c.at, c.vms, c.tags, c.ok = now, vms, tags, true
	return vms, tags
}

// folderPath is the inventory path of a VM's folder, "/DC0/vm/finance":
// the run of folders and datacenters its containers start with (parent
// first), without vCenter's root folder. "" when no datacenter is above it.
func folderPath(v *policy.VM) string {
	var chain []policy.ContainerRef
	dc := false
	for _, c := range v.Containers {
		if c.Kind != policy.KindFolder && c.Kind != policy.KindDatacenter {
			break
		}
		dc = dc || c.Kind == policy.KindDatacenter
		chain = append(chain, c)
	}
	if !dc {
		return ""
	}
	if top := chain[len(chain)-1]; top.Kind == policy.KindFolder && (top.ID == "group-d1" || top.Name == "Datacenters") {
		chain = chain[:len(chain)-1]
	}
	var b strings.Builder
	for i := len(chain) - 1; i >= 0; i-- {
		b.WriteString("/" + chain[i].Name)
	}
	return b.String()
}

// facts is what the judge knows of a VM: the name given (recorded by a
// point, an event's subject) and, when vCenter knows it, its current
// name, folder and tags.
func (j *scopeJudge) facts(ref api.VMRef) auth.ScopeVM {
	v := auth.ScopeVM{}
	if ref.Name != "" {
		v.Names = append(v.Names, ref.Name)
	}
	var inv *policy.VM
	if ref.InstanceUUID != "" {
		inv = j.byUUID[strings.ToLower(ref.InstanceUUID)]
	} else if ref.MoRef != "" {
		inv = j.byMoRef[ref.MoRef]
	}
	if inv == nil {
		return v
	}
	v.InInventory = true
	if inv.Name != "" && !slices.Contains(v.Names, inv.Name) {
		v.Names = append(v.Names, inv.Name)
	}
	v.Folder = folderPath(inv)
	for _, id := range inv.Tags {
		if names, ok := j.tags[id]; ok {
			v.Tags = append(v.Tags, names...)
		} else {
			v.Tags = append(v.Tags, id)
		}
	}
	return v
}

// allowsPoint reports whether the scope allows a restore point.
func (j *scopeJudge) allowsPoint(rp RestorePoint) bool {
	return j == nil || j.p.Allows(rp.Repository, j.facts(rp.VM))
}

// allowsVM reports whether the scope allows a VM (repositories aside).
func (j *scopeJudge) allowsVM(ref api.VMRef) bool {
	return j == nil || j.p.AllowsVM(j.facts(ref))
}

// allowsRepository reports whether the scope allows a repository.
func (j *scopeJudge) allowsRepository(name string) bool {
	return j == nil || j.p.AllowsRepository(name)
}

// allowsEvent reports whether the scope allows an event: one naming a
// repository or a VM outside it is left out (its VM is judged by its
// instance UUID in the inventory, else by the name it names as subject);
// events naming neither are kept.
func (j *scopeJudge) allowsEvent(e policy.Event) bool {
	if j == nil {
		return true
	}
	if e.Repository != "" && !j.p.AllowsRepository(e.Repository) {
		return false
	}
	if e.VM != "" {
		name := ""
		if inv := j.byUUID[strings.ToLower(e.VM)]; inv == nil {
			name = e.Subject
		}
		return j.p.AllowsVM(j.facts(api.VMRef{InstanceUUID: e.VM, Name: name}))
	}
	return true
}

func (j *scopeJudge) filterEvents(evs []policy.Event) []policy.Event {
	if j == nil {
		return evs
	}
	out := evs[:0:0]
	for _, e := range evs {
		if j.allowsEvent(e) {
			out = append(out, e)
		}
	}
	if out == nil {
		out = []policy.Event{}
	}
	return out
}

func filterPoints(j *scopeJudge, pts []RestorePoint) []RestorePoint {
	if j == nil {
		return pts
	}
	var out []RestorePoint
	for _, p := range pts {
		if j.allowsPoint(p) {
			out = append(out, p)
		}
	}
	return out
}

// allowedPoints is the set of ids of the points the scope allows.
func (s *Server) allowedPoints(ctx context.Context, j *scopeJudge) (map[string]bool, error) {
	pts, err := s.cfg.Points.Points(ctx, PointFilter{})
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, p := range pts {
		if j.allowsPoint(p) {
			ids[p.ID] = true
		}
	}
	return ids, nil
}

// filterSearch keeps the versions of points the scope allows, and the
// hits left with one.
func (s *Server) filterSearch(ctx context.Context, j *scopeJudge, res catalog.Result) (catalog.Result, error) {
	if j == nil {
		return res, nil
	}
	ids, err := s.allowedPoints(ctx, j)
	if err != nil {
		return catalog.Result{}, err
	}
	hits := []catalog.Hit{}
	for _, h := range res.Hits {
		var vs []catalog.Version
		for _, v := range h.Versions {
			if ids[v.RestorePoint] {
				vs = append(vs, v)
			}
		}
		if len(vs) > 0 {
			h.Versions = vs
			hits = append(hits, h)
		}
	}
	res.Hits = hits
	var pend []string
	for _, id := range res.Pending {
		if ids[id] {
			pend = append(pend, id)
		}
	}
	res.Pending = pend
	return res, nil
}

// allowsTask reports whether the scope allows a task: one whose subject
// is a restore point, a repository or a VM outside the scope is left out.
func (s *Server) allowsTask(ctx context.Context, j *scopeJudge, t task.Info) bool {
	if j == nil || t.Subject == "" {
		return true
	}
	switch t.Kind {
	case "restore", "restore-disk", "verify", "instant-recovery", "instant-migrate", "instant-stop":
		// Their subject is the restore point.
		rp, err := s.cfg.Points.Point(ctx, t.Subject)
		return err == nil && j.allowsPoint(rp)
	case "check", "reclaim":
		return j.allowsRepository(t.Subject)
	case "backup":
		for _, vm := range strings.Split(t.Subject, ",") {
			if !j.allowsVM(api.VMRef{InstanceUUID: vm}) {
				return false
			}
		}
	}
	return true
}

func (s *Server) filterTasks(ctx context.Context, j *scopeJudge, ts []task.Info) []task.Info {
	if j == nil {
		return ts
	}
	out := []task.Info{}
	for _, t := range ts {
		if s.allowsTask(ctx, j, t) {
			out = append(out, t)
		}
	}
	return out
}

// filterActivity leaves out the running backups of VMs outside the scope
// and the maintenance of repositories outside it.
func filterActivity(j *scopeJudge, a Activity) Activity {
	if j == nil {
		return a
	}
	out := Activity{Backups: []RunningBackup{}, Maintenance: []RunningMaintenance{}}
	for _, b := range a.Backups {
		if j.allowsVM(api.VMRef{InstanceUUID: b.InstanceUUID, Name: b.VM}) {
			out.Backups = append(out.Backups, b)
		}
	}
	for _, m := range a.Maintenance {
		if j.allowsRepository(m.Repository) {
			out.Maintenance = append(out.Maintenance, m)
		}
	}
	return out
}
