package appsettings

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/web/api"
)

// Removing a repository added from the console (DELETE
// /repositories/{id}): it is detached, never deleted. Its files stay
// where they are and POST /repositories (mode open) brings it back.

// CanRemove implements web.RepositoryRemover.
func (a *Service) CanRemove(ctx context.Context, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.removable(ctx, name)
}

// removable says why repository name cannot be removed now: it comes
// from the configuration file, jobs or copy jobs use it (a job left
// pointing at nothing would fail every night), or an operation runs on
// it. Called under a.mu.
func (a *Service) removable(ctx context.Context, name string) error {
	for _, rc := range a.cfg.Configured {
		if rc.Name == name {
			return api.Kind(fmt.Errorf("repository %q is configured in the configuration file (%s): remove it from the file's repositories section and restart the appliance (its data stays)",
				name, rc.Path), api.ErrConflict)
		}
	}
	if !a.rs.Has(name) {
		return fmt.Errorf("repository %q: %w", name, api.ErrNotFound)
	}
	var uses []string
	jobs, err := a.cfg.Jobs.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("read the jobs: %w", err)
	}
	var names []string
	for _, j := range jobs {
		if j.Repository == name {
			names = append(names, j.ID)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		uses = append(uses, "backup jobs "+strings.Join(names, ", "))
	}
	cjobs, err := a.cfg.CopyJobs.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("read the copy jobs: %w", err)
	}
	names = names[:0]
	for _, j := range cjobs {
		if j.Source == name || j.Target == name {
			names = append(names, j.ID)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		uses = append(uses, "copy jobs "+strings.Join(names, ", "))
	}
	ops := a.rs.InUse(name)
	// A check or reclaim task still queued has not reached the set yet.
	if ts, err := a.cfg.Tasks.List(ctx, 1000); err == nil {
		for _, t := range ts {
			if t.State == task.Queued && t.Subject == name && (t.Kind == "check" || t.Kind == "reclaim") {
				ops = append(ops, t.Kind+" (queued, task "+t.ID+")")
			}
		}
	}
	if len(ops) > 0 {
		uses = append(uses, "running: "+strings.Join(ops, ", "))
	}
	if len(uses) > 0 {
		return api.Kind(fmt.Errorf("repository %q is in use (%s): change or delete those jobs, or wait for the operations to end, then remove it",
			name, strings.Join(uses, "; ")), api.ErrConflict)
	}
	return nil
}

// RemoveRepository implements web.RepositoryRemover (and, through
// approval.RemoveRepository, the delayed removal): it checks again, takes
// the repository out of the set (waiting for the calls reading it),
// forgets it in the state database, drops its backup engine and its
// passphrase file, and closes it, which releases its lock. The
// configuration saved into the remaining repositories no longer names it.
func (a *Service) RemoveRepository(ctx context.Context, name string) (api.RemovedRepository, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.removable(ctx, name); err != nil {
		return api.RemovedRepository{}, err
	}
	// Refuses if an operation began since the check; from here nothing
	// finds the repository.
	r, err := a.rs.Remove(name)
	if err != nil {
		return api.RemovedRepository{}, err
	}
	rec, err := a.store.RemoveRepository(ctx, name)
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		// Nothing changed: it stays, open, as it was.
		if aerr := a.rs.Add(name, r); aerr != nil {
			a.log.Error("repository removal failed and the repository could not be put back", "name", name, "err", aerr)
		}
		return api.RemovedRepository{}, fmt.Errorf("remove repository %s: %w", name, err)
	}
	if a.cfg.RemoveBackups != nil {
		a.cfg.RemoveBackups(name)
	}
	a.cfg.Forget(name)
	path := r.Location()
	res := api.RemovedRepository{Name: name, Path: path, DataKept: true,
		Message: fmt.Sprintf("repository %s is removed from the appliance; its data is kept in %s: open it again with POST /repositories (mode open) and its passphrase", name, path)}
	if cerr := r.Close(); cerr != nil {
		// Nothing was writing (no operation ran); say it rather than hide it.
		a.log.Error("close the removed repository", "name", name, "err", cerr)
		res.Message += "; closing it reported: " + cerr.Error()
	}
	if rec.PassphraseFile != "" {
		if err := os.Remove(rec.PassphraseFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("remove the passphrase file of a removed repository", "name", name, "file", rec.PassphraseFile, "err", err)
		}
	}
	a.cfg.Changed()
	a.log.Info("repository removed from the appliance; its data is kept", "name", name, "path", path)
	return res, nil
}
