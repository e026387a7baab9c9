// Package repostest writes synthetic restore points into a real
// repository, for the scale tests and benchmarks of the API and the console
// (1,000 VMs and 30,000 points in well under a minute with NoFsync): every
// point is a real commit (manifest, commit record, catalog entry) of a tiny
// disk whose one chunk all points share.
package repostest

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/repository"
)

// JobTag is the point tag naming the job (repos.JobTag; not imported, so
// that service/repos's own tests can use this package).
const JobTag = "job"

// Options shape the synthetic catalog.
type Options struct {
	VMs, PerVM int
	// Newest is the time of the newest point; VM i's point d is d days and
	// i seconds older.
	Newest time.Time
	// Job tags every point (default "nightly").
	Job string
	// Workers commit in parallel (default 4).
	Workers int
}

// VMName and VMUUID name synthetic VM i.
func VMName(i int) string { return fmt.Sprintf("scale-vm-%04d", i) }

// VMUUID is synthetic VM i's instance UUID.
func VMUUID(i int) string { return fmt.Sprintf("4210a1b2-5ca1-0000-0000-%012d", i) }

// PointTime is the time of VM i's point d (0 = newest).
func (o Options) PointTime(i, d int) time.Time {
	return o.Newest.Add(-time.Duration(d)*24*time.Hour - time.Duration(i)*time.Second)
}

// Seed commits o.VMs × o.PerVM points into r.
func Seed(ctx context.Context, r *repository.Repository, o Options) error {
	if o.Job == "" {
		o.Job = "nightly"
	}
	if o.Workers < 1 {
		o.Workers = 4
	}
	data := bytes.Repeat([]byte("vmvault synthetic scale point "), 1024)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Workers)
	for i := range o.VMs {
		g.Go(func() error {
			for d := range o.PerVM {
				if err := commit(gctx, r, o, i, d, data); err != nil {
					return fmt.Errorf("seed point %d of VM %d: %w", d, i, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func commit(ctx context.Context, r *repository.Repository, o Options, i, d int, data []byte) error {
	s, err := r.NewSession(ctx)
	if err != nil {
		return err
	}
	defer s.Abort()
	id, _, _, err := s.PutChunk(ctx, data)
	if err != nil {
		return err
	}
	size := int64(len(data))
	root, err := s.PutDisk(ctx, size, []repository.Extent{{Offset: 0, Length: size, ID: id}})
	if err != nil {
		return err
	}
	_, err = s.Commit(ctx, repository.NewPoint{
		VM:   repository.VMIdentity{Name: VMName(i), MoRef: fmt.Sprintf("vm-%d", 5000+i), InstanceUUID: VMUUID(i)},
		Time: o.PointTime(i, d), Consistency: "crash", Tags: map[string]string{JobTag: o.Job},
		Disks: []repository.NewDisk{{Key: 2000, Label: "Hard disk 1", Capacity: 40 << 30, Map: root,
			Stats: repository.DiskStats{BytesRead: size, NewBytes: size, StoredBytes: size / 4}}},
	})
	return err
}
