package instantvm

import (
	"context"
	"errors"

	"github.com/vmvault/vmvault/web/api"
)

// API adapts a Manager to the web API's InstantRecoveries (DTOs and
// error kinds of web/api).
type API struct{ M *Manager }

func kind(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return api.Kind(err, api.ErrNotFound)
	case errors.Is(err, ErrState):
		return api.Kind(err, api.ErrConflict)
	}
	return err
}

// DTO is a record as the API shows it (the export path, a secret that
// lets an allow-listed host mount the point, is left out).
func DTO(r Record) api.InstantRecovery {
	return api.InstantRecovery{ID: r.ID, State: r.State, Error: r.Error, Point: r.Point, Repository: r.Repository,
		SourceVM: r.SourceVM, VM: api.VMRef{Name: r.VM.Name, InstanceUUID: r.VM.InstanceUUID, MoRef: r.VM.MoRef},
		Mode: map[bool]string{true: "disk", false: "vm"}[r.diskMode()], Attached: r.Attached,
		Host: r.Request.Host, NFSDatastore: r.NFS, Isolated: r.Request.Isolated, MigrateTo: r.MigrateTo, Progress: r.Progress,
		OverlayUsed: r.OverlayUsed, OverlayLimit: r.OverlayLimit, Created: r.Created, Updated: r.Updated,
		Warnings: r.Warnings, Log: append([]string{}, r.Log...)}
}

// List implements web.InstantRecoveries.
func (a API) List(context.Context) ([]api.InstantRecovery, error) {
	out := []api.InstantRecovery{}
	for _, r := range a.M.List() {
		out = append(out, DTO(r))
	}
	return out, nil
}

// Get implements web.InstantRecoveries.
func (a API) Get(_ context.Context, id string) (api.InstantRecovery, error) {
	r, err := a.M.Get(id)
	if err != nil {
		return api.InstantRecovery{}, kind(err)
	}
	return DTO(r), nil
}

// Start implements web.InstantRecoveries.
func (a API) Start(ctx context.Context, req api.InstantRecoveryRequest, by string, rep api.Reporter) (*api.InstantRecovery, error) {
	sr := StartRequest{Point: req.Point, Name: req.Name, Datacenter: req.Datacenter, Host: req.Host, Folder: req.Folder,
		Datastore: req.Datastore, NetworkMap: req.Networks, Isolated: req.Isolated, NoPowerOn: req.PowerOn != nil && !*req.PowerOn, By: by,
		TargetVM: req.TargetVM, Disks: req.Disks, Original: req.Original}
	r, err := a.M.Start(ctx, sr, func(phase string) { rep.Progress(phase, 0, 0) })
	if r.ID == "" {
		return nil, kind(err)
	}
	rep.Logf("instant recovery %s of %s: %s", r.ID, r.SourceVM, r.State)
	out := DTO(r)
	return &out, kind(err)
}

// Migrate implements web.InstantRecoveries.
func (a API) Migrate(ctx context.Context, id, ds string, rep api.Reporter) (*api.InstantRecovery, error) {
	r, err := a.M.Migrate(ctx, id, ds, func(pct int32) { rep.Progress("migrate", int64(pct), 100) })
	if r.ID == "" {
		return nil, kind(err)
	}
	out := DTO(r)
	return &out, kind(err)
}

// Stop implements web.InstantRecoveries.
func (a API) Stop(ctx context.Context, id string, rep api.Reporter) (*api.InstantRecovery, error) {
	r, err := a.M.Stop(ctx, id)
	if r.ID == "" {
		return nil, kind(err)
	}
	rep.Logf("instant recovery %s: %s", r.ID, r.State)
	out := DTO(r)
	return &out, kind(err)
}
