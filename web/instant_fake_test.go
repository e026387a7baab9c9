package web

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web/api"
)

// memInstantID is the session newMemInstant starts with.
const memInstantID = "a1b2c3d4e5f6"

// memInstant is an in-memory InstantRecoveries: sessions change state at
// once (service/instantvm and vcsim-tests/instante2e test the real one).
type memInstant struct {
	mu   sync.Mutex
	seq  int
	sess map[string]*api.InstantRecovery
}

func newMemInstant(p repository.Point) *memInstant {
	t := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	return &memInstant{sess: map[string]*api.InstantRecovery{memInstantID: {ID: memInstantID, State: "running", Point: p.ID,
		Repository: "main", SourceVM: p.VM.Name, VM: api.VMRef{Name: p.VM.Name + "-instant", MoRef: "vm-900"},
		Mode: "vm", NFSDatastore: "vmvault-" + memInstantID, OverlayLimit: 1 << 30, Created: t, Updated: t, Log: []string{}}}}
}

func (m *memInstant) List(context.Context) ([]api.InstantRecovery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []api.InstantRecovery{}
	for _, s := range m.sess {
		out = append(out, *s)
	}
	return out, nil
}

func (m *memInstant) Get(_ context.Context, id string) (api.InstantRecovery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sess[id]
	if s == nil {
		return api.InstantRecovery{}, api.Kind(fmt.Errorf("instant recovery %s", id), api.ErrNotFound)
	}
	return *s, nil
}

func (m *memInstant) Start(_ context.Context, req api.InstantRecoveryRequest, _ string, rep Reporter) (*api.InstantRecovery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	id := fmt.Sprintf("%012x", m.seq)
	s := &api.InstantRecovery{ID: id, State: "running", Point: req.Point, Repository: "main", SourceVM: "vm",
		VM: api.VMRef{Name: "vm-instant"}, Mode: "vm", NFSDatastore: "vmvault-" + id, Isolated: req.Isolated, Log: []string{}}
	m.sess[id] = s
	rep.Logf("started %s", id)
	out := *s
	return &out, nil
}

func (m *memInstant) change(id, from, to string) (*api.InstantRecovery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sess[id]
	if s == nil {
		return nil, api.Kind(fmt.Errorf("instant recovery %s", id), api.ErrNotFound)
	}
	if s.State != from {
		return nil, api.Kind(fmt.Errorf("instant recovery %s is %s", id, s.State), api.ErrConflict)
	}
	s.State = to
	out := *s
	return &out, nil
}

func (m *memInstant) Migrate(_ context.Context, id, ds string, _ Reporter) (*api.InstantRecovery, error) {
	return m.change(id, "running", "done")
}

func (m *memInstant) Stop(_ context.Context, id string, _ Reporter) (*api.InstantRecovery, error) {
	return m.change(id, "running", "stopped")
}

// fakeProber answers every probe with network working (the real probe is
// tested in vcsim-tests/backupe2e).
type fakeProber struct{}

func (fakeProber) ProbeTransports(_ context.Context, vm string, _ Reporter) (*api.TransportProbeResult, error) {
	return &api.TransportProbeResult{VM: api.VMRef{InstanceUUID: vm}, Probes: []api.TransportProbe{{Disk: 2000, Transport: "network", OK: true, Bytes: 1 << 20}},
		Auto: map[string]string{"2000": "network"}}, nil
}
