package instantvm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/service/instant"
	"github.com/vmvault/vmvault/vsphere"
)

// AnyNetwork is StartRequest.NetworkMap's key for every network no other
// key names (restore.AnyNetwork): all NICs onto one port group.
const AnyNetwork = restore.AnyNetwork

// States of a session.
const (
	StateStarting  = "starting"
	StateRunning   = "running"
	StateMigrating = "migrating"
	StateDone      = "done"
	StateStopped   = "stopped"
	StateFailed    = "failed"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: no session of that id.
	ErrNotFound = errors.New("instant recovery session not found")
	// ErrState: the session is not in a state that allows the action.
	ErrState = errors.New("instant recovery session is not in a state for this")
	// ErrInvalid: the request is wrong.
	ErrInvalid = errors.New("invalid instant recovery request")
)

// VCenter is what a session needs from vCenter; *vsphere.Client has it.
type VCenter interface {
	restore.VCenter
	MountNFS(ctx context.Context, m vsphere.NFSMount) (vsphere.Datastore, error)
	UnmountNFS(ctx context.Context, datacenter, host, name string) error
	Relocate(ctx context.Context, vm vsphere.VMRef, datacenter, ds string, progress func(int32)) error
	UnregisterVM(ctx context.Context, vm vsphere.VMRef) (string, error)
	DeleteDatastoreFile(ctx context.Context, datacenter, dsPath string) error
	// Instant disk recovery.
	AttachExistingDisk(ctx context.Context, vm vsphere.VMRef, dsPath string) (vsphere.Disk, error)
	DetachDiskKeepFile(ctx context.Context, vm vsphere.VMRef, diskKey int32) error
	RelocateDisks(ctx context.Context, vm vsphere.VMRef, datacenter, ds string, keys []int32, progress func(int32)) error
}

var _ VCenter = (*vsphere.Client)(nil)

// RepoSet finds the repository that holds a point and holds a repository
// open for a use (service/repos.Set).
type RepoSet interface {
	Locate(ctx context.Context, point string) (string, repository.Point, error)
	Use(name, what string) (*repository.Repository, func(), error)
}

// Exports is the NFS server sessions are served by (instant.Server).
type Exports interface {
	Add(*instant.Session)
	Remove(*instant.Session)
}

// Config configures a Manager.
type Config struct {
	// Dir holds one directory per session (record, overlay, scratch).
	Dir string
	// Advertise is the appliance's address as the ESXi hosts reach it
	// (the NFS datastore's remote host).
	Advertise string
	// OverlayLimit caps each disk's overlay (0: instant's default).
	OverlayLimit int64
	Clock        clock.Clock
	// NoSync skips fsync of overlays (tests).
	NoSync bool
}

// StartRequest asks for an instant recovery.
type StartRequest struct {
	Point string
	// Name of the VM; default "<vm>-instant".
	Name       string
	Datacenter string
	// Host mounts the export and runs the VM (inventory path or name;
	// "" = the only host).
	Host   string
	Folder string
	// Datastore holds the VM's own files (configuration, log, swap);
	// default: its first disk's original datastore.
	Datastore  string
	NetworkMap map[string]string
	// Isolated leaves every NIC disconnected.
	Isolated bool
	// PowerOn defaults to true (the point of the exercise); NoPowerOn
	// leaves the VM off.
	NoPowerOn bool
	// By is who asked (the audit trail).
	By string
	// TargetVM, when set, makes this an instant disk recovery: the
	// point's disks (Disks: their indexes; default all) are attached from
	// the export to this existing VM (name, path or moref) instead of a
	// new VM being created.
	TargetVM string `json:",omitempty"`
	Disks    []int  `json:",omitempty"`
	// Original keeps the original VM's identity (restore.InstantRequest).
	Original bool `json:",omitempty"`
}

// Record is a session as stored and shown.
type Record struct {
	Version    int           `json:"version"`
	ID         string        `json:"id"`
	State      string        `json:"state"`
	Error      string        `json:"error,omitempty"`
	Point      string        `json:"point"`
	Repository string        `json:"repository"`
	SourceVM   string        `json:"sourceVm"`
	Request    StartRequest  `json:"request"`
	VM         vsphere.VMRef `json:"vm"`
	// Attached are the disk keys an instant disk recovery added to VM
	// (empty for a whole-VM recovery).
	Attached  []int32           `json:"attached,omitempty"`
	NFS       string            `json:"nfsDatastore,omitempty"`
	Export    string            `json:"export,omitempty"`
	MigrateTo string            `json:"migrateTo,omitempty"`
	Progress  int32             `json:"progress,omitempty"`
	Created   time.Time         `json:"created"`
	Updated   time.Time         `json:"updated"`
	Warnings  []string          `json:"warnings,omitempty"`
	Files     []instant.File    `json:"files,omitempty"`
	Log       []string          `json:"log,omitempty"`
	Extra     map[string]string `json:"extra,omitempty"`
	// OverlayUsed and OverlayLimit are filled when shown (live).
	OverlayUsed  int64 `json:"overlayUsed"`
	OverlayLimit int64 `json:"overlayLimit"`
}

// Active says whether the session still holds an export.
func (r Record) Active() bool {
	return r.State == StateStarting || r.State == StateRunning || r.State == StateMigrating
}

// live is an active session's open resources.
type live struct {
	sess    *instant.Session
	release func() // point hold
	done    func() // repository use
	busy    bool   // an action (migrate, stop) runs
}

// Manager runs the sessions.
type Manager struct {
	cfg Config
	vc  VCenter
	rs  RepoSet
	srv Exports
	clk clock.Clock

	mu      sync.Mutex
	records map[string]*Record
	live    map[string]*live
	alerted map[string]int // OverlayAlerts: 1 warned at 80%, 2 full
}

// New returns a Manager; call Resume before serving requests.
func New(cfg Config, vc VCenter, rs RepoSet, srv Exports) (*Manager, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: no session directory", ErrInvalid)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("instant recovery directory: %w", err)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real()
	}
	return &Manager{cfg: cfg, vc: vc, rs: rs, srv: srv, clk: clk, records: map[string]*Record{}, live: map[string]*live{}}, nil
}

func newID() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

func (m *Manager) sessionDir(id string) string { return filepath.Join(m.cfg.Dir, id) }
func (m *Manager) exportDir(id string) string  { return filepath.Join(m.cfg.Dir, id, "export") }

// save writes the record atomically; the caller holds no lock.
func (m *Manager) save(r *Record) error {
	m.mu.Lock()
	r.Updated = m.clk.Now().UTC()
	b, err := json.MarshalIndent(r, "", "  ")
	m.mu.Unlock()
	if err != nil {
		return err
	}
	dir := m.sessionDir(r.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session %s: %w", r.ID, err)
	}
	tmp := filepath.Join(dir, "record.json.tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("session %s: %w", r.ID, err)
	}
	_, err = f.Write(b)
	if err == nil && !m.cfg.NoSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, "record.json"))
	}
	if err != nil {
		return fmt.Errorf("save session %s: %w", r.ID, err)
	}
	return nil
}

func (m *Manager) setState(r *Record, state, msg string) error {
	m.mu.Lock()
	r.State = state
	if msg != "" {
		r.Log = append(r.Log, m.clk.Now().UTC().Format(time.RFC3339)+" "+msg)
	}
	m.mu.Unlock()
	return m.save(r)
}

func (m *Manager) logf(r *Record, format string, a ...any) {
	m.mu.Lock()
	r.Log = append(r.Log, m.clk.Now().UTC().Format(time.RFC3339)+" "+fmt.Sprintf(format, a...))
	m.mu.Unlock()
}

// undo runs clean-up steps in reverse order with a context that survives
// the caller's cancellation, and joins their errors.
type undo []func(context.Context) error

func (u *undo) push(f func(context.Context) error) { *u = append(*u, f) }

func (u undo) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for i := len(u) - 1; i >= 0; i-- {
		errs = append(errs, u[i](ctx))
	}
	return errors.Join(errs...)
}

// Start runs an instant recovery to the running state (or failed, undone).
// progress, when set, gets each phase.
func (m *Manager) Start(ctx context.Context, req StartRequest, progress func(phase string)) (Record, error) {
	if req.Point == "" {
		return Record{}, fmt.Errorf("%w: no restore point", ErrInvalid)
	}
	if m.cfg.Advertise == "" {
		return Record{}, fmt.Errorf("%w: the appliance has no NFS address for the hosts to mount (set instant.advertise)", ErrInvalid)
	}
	report := func(p string) {
		if progress != nil {
			progress(p)
		}
	}
	repoName, p, err := m.rs.Locate(ctx, req.Point)
	if err != nil {
		return Record{}, err
	}
	now := m.clk.Now().UTC()
	rec := &Record{Version: 1, ID: newID(), State: StateStarting, Point: p.ID, Repository: repoName, SourceVM: p.VM.Name,
		Request: req, Created: now}
	rec.NFS = "vmvault-" + rec.ID
	m.mu.Lock()
	m.records[rec.ID] = rec
	m.mu.Unlock()
	if err := m.save(rec); err != nil {
		m.forget(rec.ID)
		return Record{}, err
	}
	var u undo
	fail := func(err error) (Record, error) {
		report("cleanup")
		if uerr := u.run(); uerr != nil {
			err = fmt.Errorf("%w; undoing it failed too: %v (check vCenter for datastore %s and VM %q)", err, uerr, rec.NFS, rec.VM.Name)
		}
		m.mu.Lock()
		delete(m.live, rec.ID)
		rec.Error = err.Error()
		m.mu.Unlock()
		_ = m.setState(rec, StateFailed, "failed: "+err.Error())
		return m.show(rec), err
	}
	lv, err := m.open(ctx, rec)
	if err != nil {
		return fail(err)
	}
	u.push(func(context.Context) error { return m.closeLive(rec.ID, true) })

	report("mount")
	m.logf(rec, "exported %s at %s; mounting it on %s as datastore %s", p.ID, lv.sess.Export, hostLabel(req.Host), rec.NFS)
	if _, err := m.vc.MountNFS(ctx, vsphere.NFSMount{Host: req.Host, Datacenter: req.Datacenter, RemoteHost: m.cfg.Advertise,
		RemotePath: lv.sess.Export, Name: rec.NFS}); err != nil {
		return fail(err)
	}
	u.push(func(ctx context.Context) error { return m.vc.UnmountNFS(ctx, req.Datacenter, req.Host, rec.NFS) })

	report("register")
	files := map[int]string{}
	for _, f := range lv.sess.Files() {
		if f.Disk >= 0 && strings.HasSuffix(f.Name, ".vmdk") && !strings.HasSuffix(f.Name, "-flat.vmdk") {
			files[f.Disk] = fmt.Sprintf("[%s] %s", rec.NFS, f.Name)
		}
	}
	for i := range p.Disks {
		if files[i] == "" {
			// No descriptor (a disk the format cannot describe): the VM
			// cannot attach it.
			return fail(fmt.Errorf("%w: disk %d of %s has no VMDK descriptor in the export", ErrInvalid, i, p.ID))
		}
	}
	if req.TargetVM != "" {
		return m.startDisks(ctx, rec, lv, files, &u, fail, report)
	}
	e := restore.New(lv.repo, m.vc, restore.Options{})
	res, err := e.InstantVM(ctx, restore.InstantRequest{
		VMRequest: restore.VMRequest{RestorePoint: p.ID, Name: req.Name, Datacenter: req.Datacenter, Folder: req.Folder,
			Host: req.Host, Datastore: req.Datastore, NetworkMap: req.NetworkMap, PowerOn: !req.NoPowerOn,
			Progress: func(pr restore.Progress) { report(pr.Phase) }},
		DiskFiles: files, Isolated: req.Isolated, Original: req.Original,
	})
	if err != nil {
		return fail(err)
	}
	m.mu.Lock()
	rec.VM, rec.Warnings, rec.Export, rec.Files = res.VM, res.Warnings, lv.sess.Export, lv.sess.Files()
	m.mu.Unlock()
	m.logf(rec, "VM %s (%s) created from the export%s", res.VM.Name, res.VM.MoRef, map[bool]string{true: " and powered on", false: ""}[res.PoweredOn])
	if err := m.setState(rec, StateRunning, "running"); err != nil {
		// The VM runs but the record could not say so: undo rather than
		// leave a session no restart would find.
		u.push(func(ctx context.Context) error { return restore.RemoveInstantVM(ctx, m.vc, req.Datacenter, res.VM) })
		return fail(err)
	}
	report("running")
	return m.show(rec), nil
}

// startDisks attaches the point's disks from the export to an existing VM.
func (m *Manager) startDisks(ctx context.Context, rec *Record, lv liveOpen, files map[int]string, u *undo,
	fail func(error) (Record, error), report func(string)) (Record, error) {
	req := rec.Request
	report("attach")
	target, err := m.findVM(ctx, req.TargetVM)
	if err != nil {
		return fail(fmt.Errorf("target VM %s: %w", req.TargetVM, err))
	}
	idxs := req.Disks
	if len(idxs) == 0 {
		for i := range files {
			idxs = append(idxs, i)
		}
		sort.Ints(idxs)
	}
	m.mu.Lock()
	rec.VM = target.VMRef
	m.mu.Unlock()
	for _, i := range idxs {
		f, ok := files[i]
		if !ok {
			return fail(fmt.Errorf("%w: restore point %s has no disk %d", ErrInvalid, rec.Point, i))
		}
		d, err := m.vc.AttachExistingDisk(ctx, target.VMRef, f)
		if err != nil {
			return fail(err)
		}
		key := d.Key
		u.push(func(ctx context.Context) error { return m.vc.DetachDiskKeepFile(ctx, target.VMRef, key) })
		m.mu.Lock()
		rec.Attached = append(rec.Attached, key)
		m.mu.Unlock()
		m.logf(rec, "disk %d attached to %s as disk %d (%s)", i, target.Name, key, f)
	}
	m.mu.Lock()
	rec.Export, rec.Files = lv.sess.Export, lv.sess.Files()
	m.mu.Unlock()
	if err := m.setState(rec, StateRunning, "running"); err != nil {
		return fail(err)
	}
	report("running")
	return m.show(rec), nil
}

// findVM finds a VM by name, path, moref or instance UUID (the API's).
func (m *Manager) findVM(ctx context.Context, id string) (vsphere.VM, error) {
	v, err := m.vc.FindVM(ctx, id)
	if err == nil {
		return v, nil
	}
	notes, nerr := m.vc.VMNotes(ctx)
	if nerr != nil {
		return vsphere.VM{}, err
	}
	for _, n := range notes {
		if n.InstanceUUID == id {
			return m.vc.VM(ctx, n.VMRef)
		}
	}
	return vsphere.VM{}, err
}

type liveOpen struct {
	*live
	repo *repository.Repository
}

// open holds the repository and the point and exports the point.
func (m *Manager) open(ctx context.Context, rec *Record) (liveOpen, error) {
	r, done, err := m.rs.Use(rec.Repository, "instant recovery "+rec.ID)
	if err != nil {
		return liveOpen{}, err
	}
	release, err := r.HoldInUse(ctx, rec.Point, "instant recovery "+rec.ID)
	if err != nil {
		done()
		return liveOpen{}, err
	}
	sess, err := instant.Open(ctx, r, instant.Options{Point: rec.Point, Dir: m.exportDir(rec.ID), OverlayLimit: m.cfg.OverlayLimit, NoSync: m.cfg.NoSync})
	if err != nil {
		release()
		done()
		return liveOpen{}, fmt.Errorf("export %s: %w", rec.Point, err)
	}
	m.srv.Add(sess)
	lv := &live{sess: sess, release: release, done: done}
	m.mu.Lock()
	m.live[rec.ID] = lv
	m.mu.Unlock()
	return liveOpen{live: lv, repo: r}, nil
}

// closeLive ends a session's export; remove deletes the overlay too.
func (m *Manager) closeLive(id string, remove bool) error {
	m.mu.Lock()
	lv := m.live[id]
	delete(m.live, id)
	m.mu.Unlock()
	if lv == nil {
		return nil
	}
	m.srv.Remove(lv.sess)
	var err error
	if remove {
		err = lv.sess.Remove()
	} else {
		err = lv.sess.Close()
	}
	lv.release()
	lv.done()
	return err
}

func hostLabel(h string) string {
	if h == "" {
		return "the host"
	}
	return h
}

func (m *Manager) forget(id string) {
	m.mu.Lock()
	delete(m.records, id)
	m.mu.Unlock()
}

// show copies a record with its live figures.
func (m *Manager) show(r *Record) Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := *r
	out.Log = append([]string(nil), r.Log...)
	if lv := m.live[r.ID]; lv != nil {
		out.OverlayUsed, out.OverlayLimit = lv.sess.Overlays()
	}
	return out
}

// List returns every session, newest first.
func (m *Manager) List() []Record {
	m.mu.Lock()
	recs := make([]*Record, 0, len(m.records))
	for _, r := range m.records {
		recs = append(recs, r)
	}
	m.mu.Unlock()
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		out = append(out, m.show(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out
}

// Get returns one session.
func (m *Manager) Get(id string) (Record, error) {
	m.mu.Lock()
	r := m.records[id]
	m.mu.Unlock()
	if r == nil {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return m.show(r), nil
}

// claim marks an active session busy for one action.
func (m *Manager) claim(id string, states ...string) (*Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.records[id]
	if r == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	lv := m.live[id]
	ok := false
	for _, s := range states {
		ok = ok || r.State == s
	}
	if !ok || lv == nil {
		return nil, fmt.Errorf("%w: session %s is %s", ErrState, id, r.State)
	}
	if lv.busy {
		return nil, fmt.Errorf("%w: session %s is busy with another action", ErrState, id)
	}
	lv.busy = true
	return r, nil
}

func (m *Manager) unclaim(id string) {
	m.mu.Lock()
	if lv := m.live[id]; lv != nil {
		lv.busy = false
	}
	m.mu.Unlock()
}

// Migrate moves a running session's VM to datastore ds with Storage
// vMotion, then ends the export: the VM keeps running, now from
// production storage. A failed move leaves the session running.
func (m *Manager) Migrate(ctx context.Context, id, ds string, progress func(pct int32)) (Record, error) {
	if ds == "" {
		return Record{}, fmt.Errorf("%w: no target datastore", ErrInvalid)
	}
	if strings.HasPrefix(ds, "vmvault-") {
		return Record{}, fmt.Errorf("%w: %s is an instant recovery export, not production storage", ErrInvalid, ds)
	}
	rec, err := m.claim(id, StateRunning)
	if err != nil {
		return Record{}, err
	}
	defer m.unclaim(id)
	m.mu.Lock()
	rec.MigrateTo, rec.Error = ds, ""
	m.mu.Unlock()
	if err := m.setState(rec, StateMigrating, "moving to datastore "+ds); err != nil {
		return m.show(rec), err
	}
	onPct := func(pct int32) {
		m.mu.Lock()
		rec.Progress = pct
		m.mu.Unlock()
		if progress != nil {
			progress(pct)
		}
	}
	if len(rec.Attached) > 0 {
		err = m.vc.RelocateDisks(ctx, rec.VM, rec.Request.Datacenter, ds, rec.Attached, onPct)
	} else {
		err = m.vc.Relocate(ctx, rec.VM, rec.Request.Datacenter, ds, onPct)
	}
	if err != nil {
		m.mu.Lock()
		rec.Error, rec.Progress = "migrate: "+err.Error(), 0
		m.mu.Unlock()
		_ = m.setState(rec, StateRunning, "move failed, still running from the export: "+err.Error())
		return m.show(rec), err
	}
	return m.finish(ctx, rec)
}

// finish ends a migrated session: unmount, drop the export and overlay.
func (m *Manager) finish(ctx context.Context, rec *Record) (Record, error) {
	var errs []error
	if err := m.vc.UnmountNFS(ctx, rec.Request.Datacenter, rec.Request.Host, rec.NFS); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, m.closeLive(rec.ID, true))
	}
	if err := errors.Join(errs...); err != nil {
		m.mu.Lock()
		rec.Error = "after the move: " + err.Error()
		m.mu.Unlock()
		_ = m.save(rec)
		return m.show(rec), fmt.Errorf("VM %s moved, but ending the export failed: %w (retry with stop)", rec.VM.Name, err)
	}
	m.mu.Lock()
	rec.Progress = 100
	m.mu.Unlock()
	err := m.setState(rec, StateDone, "moved to "+rec.MigrateTo+"; export removed")
	return m.show(rec), err
}

// Stop ends a session: the VM is powered off and unregistered and its home
// deleted (unless the session was migrated), the datastore unmounted, the
// export and overlay removed: what the VM wrote is gone.
func (m *Manager) Stop(ctx context.Context, id string) (Record, error) {
	rec, err := m.claim(id, StateRunning, StateMigrating, StateStarting)
	if err != nil {
		return Record{}, err
	}
	defer m.unclaim(id)
	var errs []error
	switch {
	case rec.VM.MoRef == "" && !rec.diskMode():
		// Killed between CreateVM and the record: find the VM by name,
		// and only one whose disks are on our datastore.
		name := rec.Request.Name
		if name == "" {
			name = rec.SourceVM + "-instant"
		}
		refs, err := m.vc.VMsNamed(ctx, name)
		if err != nil {
			errs = append(errs, err)
		}
		for _, r := range refs {
			if v, err := m.vc.VM(ctx, r); err == nil && onDatastore(v, rec.NFS) {
				if err := restore.RemoveInstantVM(ctx, m.vc, rec.Request.Datacenter, r); err != nil {
					errs = append(errs, err)
				}
			}
		}
	case rec.VM.MoRef == "" || m.migrated(ctx, rec):
	case rec.diskMode():
		// A disk recovery: the VM is the administrator's; only our
		// disks come off it, their files stay the export's.
		for _, k := range rec.Attached {
			if err := m.vc.DetachDiskKeepFile(ctx, rec.VM, k); err != nil {
				errs = append(errs, err)
			}
		}
	default:
		if err := restore.RemoveInstantVM(ctx, m.vc, rec.Request.Datacenter, rec.VM); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := m.vc.UnmountNFS(ctx, rec.Request.Datacenter, rec.Request.Host, rec.NFS); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		m.mu.Lock()
		rec.Error = "stop: " + err.Error()
		m.mu.Unlock()
		_ = m.save(rec)
		return m.show(rec), err
	}
	if err := m.closeLive(id, true); err != nil {
		errs = append(errs, err)
	}
	m.mu.Lock()
	rec.Error = ""
	m.mu.Unlock()
	errs = append(errs, m.setState(rec, StateStopped, "stopped; VM unregistered, export removed"))
	return m.show(rec), errors.Join(errs...)
}

// migrated says whether the VM's disks are all off the export already.
func (m *Manager) migrated(ctx context.Context, rec *Record) bool {
	if rec.State != StateMigrating {
		return false
	}
	v, err := m.vc.VM(ctx, rec.VM)
	return err == nil && len(v.Disks) > 0 && !onDatastore(v, rec.NFS)
}

// diskMode says whether the session attaches disks to an existing VM.
func (r Record) diskMode() bool { return r.Request.TargetVM != "" }

// Resume reopens the sessions a previous run left active. It returns the
// sessions it could not bring back (each then failed, with its reason).
func (m *Manager) Resume(ctx context.Context) error {
	ents, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return fmt.Errorf("instant recovery sessions: %w", err)
	}
	var errs []error
	for _, e := range ents {
		rec, ok, err := readRecord(m.cfg.Dir, e)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			continue
		}
		r := &rec
		m.mu.Lock()
		m.records[rec.ID] = r
		m.mu.Unlock()
		if !rec.Active() {
			continue
		}
		if _, err := m.open(ctx, r); err != nil {
			m.mu.Lock()
			r.Error = "resume: " + err.Error()
			m.mu.Unlock()
			_ = m.setState(r, StateFailed, "could not resume: "+err.Error())
			errs = append(errs, fmt.Errorf("session %s: %w", rec.ID, err))
			continue
		}
		switch rec.State {
		case StateStarting:
			// Killed half-way: undo whatever vCenter shows of it.
			if _, err := m.Stop(ctx, rec.ID); err != nil {
				errs = append(errs, fmt.Errorf("session %s: undo the interrupted start: %w", rec.ID, err))
			}
		case StateMigrating:
			if m.migrated(ctx, r) {
				if _, err := m.finish(ctx, r); err != nil {
					errs = append(errs, err)
				}
			} else {
				_ = m.setState(r, StateRunning, "resumed; the interrupted move did not finish (migrate again)")
			}
		default:
			m.logf(r, "resumed after an appliance restart")
			_ = m.save(r)
		}
	}
	return errors.Join(errs...)
}

// Close ends every export without removing overlays (the daemon stops;
// Resume brings the sessions back).
func (m *Manager) Close() error {
	m.mu.Lock()
	ids := make([]string, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, m.closeLive(id, false))
	}
	return errors.Join(errs...)
}

// Remove deletes a finished session's record (done, stopped, failed).
func (m *Manager) Remove(id string) error {
	m.mu.Lock()
	r := m.records[id]
	m.mu.Unlock()
	if r == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if r.Active() {
		return fmt.Errorf("%w: session %s is %s; stop it first", ErrState, id, r.State)
	}
	if err := os.RemoveAll(m.sessionDir(id)); err != nil {
		return err
	}
	m.forget(id)
	return nil
}

// Records reads the sessions kept in dir without opening anything (the
// CLI's list), newest first.
func Records(dir string) ([]Record, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("instant recovery sessions: %w", err)
	}
	var out []Record
	for _, e := range ents {
		if r, ok, _ := readRecord(dir, e); ok {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// readRecord reads the record of the session directory e of dir: ok false
// for an entry that is no session (or one that never got a record), with
// an error when the record is there but unreadable.
func readRecord(dir string, e os.DirEntry) (Record, bool, error) {
	if !e.IsDir() {
		return Record{}, false, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, e.Name(), "record.json"))
	if err != nil {
		return Record{}, false, nil
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Version != 1 || rec.ID != e.Name() {
		return Record{}, false, fmt.Errorf("session %s: unreadable record", e.Name())
	}
	return rec, true, nil
}

func onDatastore(v vsphere.VM, ds string) bool {
	for _, d := range v.Disks {
		if strings.HasPrefix(d.FileName, "["+ds+"]") {
			return true
		}
	}
	return false
}

// OverlayAlert is a session whose overlay crossed a threshold.
type OverlayAlert struct {
	Record Record
	Full   bool // at its limit: the guest's writes fail
}

// Overlay thresholds: alert at 80% and when full, again after use fell
// under 70% (so a session hovering at the mark does not alert on every
// check).
const (
	overlayWarn  = 0.80
	overlayReset = 0.70
)

// OverlayAlerts returns the sessions whose overlay crossed 80% or filled
// since the last call (the daemon turns them into events).
func (m *Manager) OverlayAlerts() []OverlayAlert {
	m.mu.Lock()
	ids := make([]string, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	sort.Strings(ids)
	var out []OverlayAlert
	for _, id := range ids {
		m.mu.Lock()
		r := m.records[id]
		m.mu.Unlock()
		if r == nil {
			continue
		}
		rec := m.show(r)
		if rec.OverlayLimit <= 0 {
			continue
		}
		frac := float64(rec.OverlayUsed) / float64(rec.OverlayLimit)
		m.mu.Lock()
		if m.alerted == nil {
			m.alerted = map[string]int{}
		}
		level := m.alerted[id]
		switch {
		case frac >= 1 && level < 2:
			m.alerted[id] = 2
			out = append(out, OverlayAlert{Record: rec, Full: true})
		case frac >= overlayWarn && level < 1:
			m.alerted[id] = 1
			out = append(out, OverlayAlert{Record: rec})
		case frac < overlayReset:
			delete(m.alerted, id)
		}
		m.mu.Unlock()
	}
	return out
}
