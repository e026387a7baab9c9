package backups

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/web/api"
)

// Runner runs backups for the scheduler (policy.Runner) and the API
// (web.Backups) with one backup engine per repository, all reading from the
// daemon's vCenter session.
type Runner struct {
	// Observe, when set, receives each successful backup's figures (metrics).
	Observe func(read, newBytes, stored int64, d time.Duration)
	inv     policy.Inventory
	src     backup.VSphere
	host    string

	mu      sync.RWMutex // guards engines and first: add and remove run beside backups
	engines map[string]*backup.Engine
	stores  map[string]backup.Store // the engines' repositories, to rebuild them (EnableHotAdd)
	first   string
	// Repos, when set, registers each backup as an operation on its
	// repository, so the repository cannot be removed under it.
	Repos *repos.Set
}

// New returns a runner with an engine for each of names (opened holds
// their repositories), reading from client and listing VMs from inv.
func New(client *vsphere.Client, opened map[string]*repository.Repository, names []string, inv policy.Inventory) *Runner {
	br := &Runner{engines: map[string]*backup.Engine{}, inv: inv, src: backup.FromClient(client, vsphere.ReaderOptions{}), host: client.Host()}
	for _, n := range names {
		br.Add(n, opened[n])
	}
	return br
}

// EnableHotAdd makes the runner read disks through HotAdd first (jobs with
// transport auto or hotadd) via h, the appliance's own VM. It first sweeps
// the disks a crashed run left attached to that VM and returns them. Call
// it at start-up, before any backup runs: the engines are rebuilt.
func (b *Runner) EnableHotAdd(ctx context.Context, client *vsphere.Client, h *vsphere.HotAdder) ([]vsphere.SweptDisk, error) {
	swept, err := h.Sweep(ctx)
	if err != nil {
		return swept, fmt.Errorf("HotAdd start-up sweep: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.src = backup.FromClientHotAdd(client, vsphere.ReaderOptions{}, h)
	for name := range b.engines {
		b.engines[name] = backup.NewEngine(b.src, b.stores[name], backup.EngineOptions{VCenter: b.host})
	}
	return swept, nil
}

// Add gives the runner an engine for one more repository (one added from
// the console at runtime).
func (b *Runner) Add(name string, r *repository.Repository) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stores == nil {
		b.stores = map[string]backup.Store{}
	}
	b.stores[name] = backup.RepoStore(r)
	b.engines[name] = backup.NewEngine(b.src, b.stores[name], backup.EngineOptions{VCenter: b.host})
	if b.first == "" || name < b.first {
		b.first = name
	}
}

// Remove drops the engine of a repository removed at runtime.
func (b *Runner) Remove(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.engines, name)
	delete(b.stores, name)
	if b.first == name {
		b.first = ""
		for n := range b.engines {
			if b.first == "" || n < b.first {
				b.first = n
			}
		}
	}
}

// Engine returns the backup engine of repo, if the runner has one.
func (b *Runner) Engine(repo string) (*backup.Engine, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, ok := b.engines[repo]
	return e, ok
}

// quiesceFor turns a job's quiesce settings into the engine's: the mode
// (what a guest that cannot be quiesced costs) and the level and VSS type
// (what is asked of a guest that can).
func quiesceFor(j policy.Job) (backup.QuiesceMode, backup.QuiesceLevel, backup.VSSType) {
	if j.Quiesce == policy.QuiesceNone {
		return backup.QuiesceOff, "", ""
	}
	mode := backup.QuiescePrefer // fall back, with a warning, rather than miss the backup
	if j.QuiesceRequired {
		// The job would rather miss the backup than keep a lesser one.
		mode = backup.QuiesceRequire
	}
	if j.Quiesce == policy.QuiesceApplication {
		vss := backup.VSSCopy
		if j.VSSType == policy.VSSFull {
			vss = backup.VSSFull
		}
		return mode, backup.LevelApplication, vss
	}
	return mode, backup.LevelFilesystem, ""
}

// backupOne backs vm up into repo; req carries the job's choices (quiesce,
// all disks, active full) and gets the VM, tags and progress here.
func (b *Runner) backupOne(ctx context.Context, repo, job string, vm policy.VM, req backup.Request, progress func(backup.VMProgress)) (backup.Result, error) {
	if b.Repos != nil {
		what := vm.Name
		if what == "" {
			what = vm.MoRef
		}
		_, done, err := b.Repos.Use(repo, "backup of "+what)
		if err != nil {
			return backup.Result{}, err
		}
		defer done()
	}
	e, ok := b.Engine(repo)
	if !ok {
		return backup.Result{}, fmt.Errorf("repository %q: %w", repo, api.ErrNotFound)
	}
	target := vm.MoRef
	if target == "" {
		target = vm.Name
	}
	tags := map[string]string{}
	if job != "" {
		tags[repos.JobTag] = job
	}
	req.VM, req.Progress, req.Tags = target, progress, tags
	res, err := e.BackupVM(ctx, req)
	if err == nil && b.Observe != nil {
		b.Observe(res.BytesRead, res.NewBytes, res.StoredBytes, res.Duration)
	}
	return res, err
}

// RunBackup implements policy.Runner.
func (b *Runner) RunBackup(ctx context.Context, job policy.Job, vm policy.VM, progress func(policy.Progress)) (policy.BackupResult, error) {
	mode, level, vss := quiesceFor(job)
	req := backup.Request{
		Quiesce: mode, Level: level, VSSType: vss, RequireAllDisks: job.RequireAllDisks,
		ActiveFullEvery: job.ActiveFullEvery, ActiveFullAfter: time.Duration(job.ActiveFullDays) * 24 * time.Hour,
		Transport: backup.Transport(job.Transport),
	}
	res, err := b.backupOne(ctx, job.Repository, job.ID, vm, req, func(p backup.VMProgress) {
		progress(policy.Progress{Phase: p.Phase, BytesDone: p.Done, BytesTotal: p.Size})
	})
	if err != nil {
		return policy.BackupResult{}, err
	}
	return policy.BackupResult{PointID: res.RestorePoint, Bytes: res.BytesRead, Stored: res.StoredBytes}, nil
}

// api.BackupOutcome is one VM's result of POST /backups.
// Backup implements web.Backups: the VMs one after another, each failure
// recorded and the task failed if any VM failed.
func (b *Runner) Backup(ctx context.Context, req api.BackupRequest, rep api.Reporter) ([]api.BackupOutcome, error) {
	repo := req.Repository
	if repo == "" {
		b.mu.RLock()
		repo = b.first
		b.mu.RUnlock()
	}
	all, err := b.inv.VMs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list inventory: %w", err)
	}
	byUUID := map[string]policy.VM{}
	for _, v := range all {
		byUUID[v.InstanceUUID] = v
	}
	var outs []api.BackupOutcome
	failed := 0
	for i, id := range req.VMs {
		o := api.BackupOutcome{VM: id}
		vm, ok := byUUID[id]
		if !ok {
			o.Error = "not in the inventory"
			failed++
			outs = append(outs, o)
			rep.Logf("%s: not in the inventory", id)
			continue
		}
		o.Name = vm.Name
		rep.Logf("backing up %s (%d of %d) to %s", vm.Name, i+1, len(req.VMs), repo)
		res, err := b.backupOne(ctx, repo, req.Job, vm, backup.Request{Quiesce: backup.QuiescePrefer}, func(p backup.VMProgress) {
			rep.Progress(vm.Name+": "+p.Phase, p.Done, p.Size)
		})
		if err != nil {
			if ctx.Err() != nil {
				return outs, err
			}
			o.Error = err.Error()
			failed++
			rep.Logf("%s failed: %v", vm.Name, err)
		} else {
			o.RestorePoint, o.Mode, o.BytesRead, o.NewBytes = res.RestorePoint, res.Mode, res.BytesRead, res.NewBytes
			o.Warnings = res.Warnings
			for _, w := range res.Warnings {
				// At warning level where the reporter has levels (the task
				// log colours and counts them).
				if lr, ok := rep.(interface{ Log(level, msg string) }); ok {
					lr.Log("warning", fmt.Sprintf("%s: %s", vm.Name, w))
				} else {
					rep.Logf("%s: warning: %s", vm.Name, w)
				}
			}
			rep.Logf("%s: restore point %s (%s)", vm.Name, res.RestorePoint, res.Mode)
		}
		outs = append(outs, o)
	}
	if failed > 0 {
		return outs, fmt.Errorf("%d of %d VMs failed", failed, len(req.VMs))
	}
	return outs, nil
}

// ProbeTransports implements web.TransportProber: which transports can
// read the VM's disks (backup.Engine.ProbeTransports).
func (b *Runner) ProbeTransports(ctx context.Context, vm string, rep api.Reporter) (*api.TransportProbeResult, error) {
	b.mu.RLock()
	e := b.engines[b.first]
	src := b.src
	b.mu.RUnlock()
	if e == nil {
		// No repository yet: the probe stores nothing.
		e = backup.NewEngine(src, nil, backup.EngineOptions{VCenter: b.host})
	}
	rep.Progress("probe", 0, 0)
	res, err := e.ProbeTransports(ctx, vm)
	if res.VM.MoRef == "" && err != nil {
		return nil, err
	}
	out := &api.TransportProbeResult{VM: api.VMRef{Name: res.VM.Name, InstanceUUID: res.VM.InstanceUUID, MoRef: res.VM.MoRef},
		Probes: []api.TransportProbe{}, Auto: map[string]string{}, Warnings: res.Warnings}
	for _, p := range res.Probes {
		out.Probes = append(out.Probes, api.TransportProbe{Disk: p.Disk, Label: p.Label, Transport: string(p.Transport), OK: p.OK,
			Reason: p.Reason, Bytes: p.Bytes, Seconds: p.Seconds})
		if p.Reason != "" && !p.OK {
			rep.Logf("disk %d %s: %s", p.Disk, p.Transport, p.Reason)
		}
	}
	for k, t := range res.Auto {
		out.Auto[fmt.Sprint(k)] = string(t)
	}
	return out, err
}
