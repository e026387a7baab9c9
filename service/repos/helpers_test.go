package repos

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
)

var testVM = policy.VM{InstanceUUID: "4210a1b2-0000-0000-0000-000000000001", Name: "web01", MoRef: "vm-42"}

type fixture struct {
	repo   *repository.Repository
	set    *Set
	clk    *clock.Fake
	points []repository.Point
}

// newFixture is a real repository "main" with two points of testVM made by
// job nightly and one older ad-hoc point of another VM.
func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	repo := repository.TestRepository(t)
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	f := &fixture{repo: repo, clk: clk, set: New(map[string]*repository.Repository{"main": repo}, append([]Option{WithClock(clk)}, opts...)...)}
	f.points = append(f.points,
		commitPoint(t, repo, testVM, "nightly", time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)),
		commitPoint(t, repo, testVM, "nightly", time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)),
		commitPoint(t, repo, policy.VM{InstanceUUID: "gone-vm", Name: "old01"}, "", time.Date(2026, 10, 1, 1, 0, 0, 0, time.UTC)),
	)
	return f
}

// commitPoint stores a small restore point of vm (job tag set) in r.
func commitPoint(t testing.TB, r *repository.Repository, vm policy.VM, job string, at time.Time) repository.Point {
	t.Helper()
	ctx := context.Background()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	data := bytes.Repeat([]byte(vm.Name+at.String()), 4096)
	id, _, _, err := s.PutChunk(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.PutDisk(ctx, int64(len(data)), []repository.Extent{{Offset: 0, Length: int64(len(data)), ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Commit(ctx, repository.NewPoint{
		VM:   repository.VMIdentity{Name: vm.Name, MoRef: vm.MoRef, InstanceUUID: vm.InstanceUUID},
		Time: at, Consistency: "crash", Tags: map[string]string{JobTag: job},
		Disks: []repository.NewDisk{{Key: 2000, Label: "Hard disk 1", Capacity: int64(len(data)), Map: root,
			Stats: repository.DiskStats{BytesRead: int64(len(data)), NewBytes: int64(len(data)), StoredBytes: int64(len(data)) / 4}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
