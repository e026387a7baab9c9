package verification

import (
	"context"
	"errors"
	"time"

	"github.com/vmvault/vmvault/service/verify"
	"github.com/vmvault/vmvault/web/api"
)

// API adapts a Manager to the web API's Verifier (DTOs and error kinds of
// web/api).
type API struct{ M *Manager }

func kind(err error) error {
	switch {
	case errors.Is(err, ErrBootUnavailable):
		return api.Kind(err, api.ErrNotImplemented)
	}
	return err
}

// CanBoot implements web.Verifier.
func (a API) CanBoot() bool { return a.M.CanBoot() }

// Verify implements web.Verifier.
func (a API) Verify(ctx context.Context, point string, req api.VerifyRequest, by string, rep api.Reporter) (*api.Verification, error) {
	r := Request{Point: point, Mode: req.Mode, Network: req.Network, Datacenter: req.Datacenter, Host: req.Host, Folder: req.Folder,
		Datastore: req.Datastore, Ports: req.Ports, URL: req.URL, ReadData: req.ReadData, By: by,
		Timeout: time.Duration(req.TimeoutSeconds) * time.Second, ProbeTimeout: time.Duration(req.ProbeTimeoutSeconds) * time.Second}
	res, err := a.M.Verify(ctx, r, func(phase string) { rep.Progress(phase, 0, 0) })
	if res.ID == "" {
		return nil, kind(err)
	}
	rep.Logf("verification %s of %s: %s: %s", res.ID, res.Point, res.Result, res.Reason)
	out := DTO(res)
	return &out, kind(err)
}

// Latest is the point's latest verification as the restore point API
// shows it (service/repos.Set.Verification); nil when never verified.
func (a API) Latest(point string) *api.PointVerification {
	r, ok := a.M.Latest(point)
	if !ok {
		return nil
	}
	return &api.PointVerification{Result: r.Result, Time: r.Finished, Mode: r.Mode, Reason: r.Reason, Seconds: r.Seconds}
}

// DTO is a result as the API shows it.
func DTO(r Result) api.Verification {
	out := api.Verification{ID: r.ID, Point: r.Point, Repository: r.Repository, VM: r.VM, Mode: r.Mode, Result: r.Result,
		Reason: r.Reason, Started: r.Started, Finished: r.Finished, Seconds: r.Seconds, By: r.By}
	if b := r.Boot; b != nil {
		ab := &api.BootVerification{Session: b.Session, VMName: b.VMName, Network: b.Network, Passed: b.Passed, Reason: b.Reason,
			PoweredOnSeconds: b.PoweredOnSeconds, HeartbeatSeconds: b.HeartbeatSeconds, ProbesSeconds: b.ProbesSeconds,
			GuestIP: b.GuestIP, Probes: []api.VerificationProbe{}, TeardownError: b.TeardownError}
		for _, p := range b.Probes {
			ab.Probes = append(ab.Probes, api.VerificationProbe{Kind: p.Kind, Target: p.Target, Passed: p.Passed, Status: p.Status, Error: p.Error, Attempts: p.Attempts})
		}
		out.Boot = ab
	}
	if w := r.Walk; w != nil {
		aw := &api.WalkVerification{Passed: w.Passed, Reason: w.Reason, Volumes: len(w.Volumes), Seconds: w.Seconds}
		for _, v := range w.Volumes {
			if v.Status == verify.StatusFailed {
				aw.Failed++
			}
			aw.Entries += v.Entries()
		}
		out.Walk = aw
	}
	return out
}
