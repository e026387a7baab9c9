package repos

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
)

// Maintainer implements policy.Maintainer over a Set, so the
// scheduler can apply retention, reclaim and check inside the maintenance
// window. A full check reads the packs through repository.CheckPacks, in
// pack id order, reporting the last pack read as its cursor, so a check cut
// by the window's close resumes after it in the next window.
type Maintainer struct{ Set *Set }

var _ policy.Maintainer = Maintainer{}

// Check implements policy.Maintainer: a quick check verifies structure, a
// full one reads every blob.
func (m Maintainer) Check(ctx context.Context, req policy.CheckRequest, progress func(policy.CheckProgress)) (policy.CheckResult, error) {
	r, done, err := m.Set.Use(req.Repository, "maintenance check")
	if err != nil {
		return policy.CheckResult{}, err
	}
	defer done()
	var problems []repository.Problem
	var read int64
	if req.Full {
		// The data, resumable; then the structure (quick) over what is there now.
		walk := func(from string) error {
			return r.CheckPacks(ctx, from, func(pc repository.PackCheck) error {
				problems = append(problems, pc.Problems...)
				read += pc.Bytes
				progress(policy.CheckProgress{Cursor: pc.Pack, Done: int64(pc.Index), Total: int64(pc.Total)})
				return nil
			})
		}
		err := walk(req.Resume)
		if errors.Is(err, repository.ErrBadCursor) {
			err = walk("") // a saved cursor that means nothing: the whole check again
		}
		if err != nil {
			return policy.CheckResult{}, fmt.Errorf("check %s: read packs: %w", req.Repository, err)
		}
	}
	// An immutable repository: every pack a point needs is kept locked as
	// long as that point (commits do it for what they reuse; this pass
	// catches up after a failed extension or a lengthened time lock).
	locks, err := r.ExtendLocks(ctx, nil)
	if err != nil {
		return policy.CheckResult{}, fmt.Errorf("check %s: extend object locks: %w", req.Repository, err)
	}
	rep, err := r.Check(ctx, repository.CheckOptions{}, nil)
	if err != nil {
		return policy.CheckResult{}, fmt.Errorf("check %s: %w", req.Repository, err)
	}
	problems = append(problems, rep.Problems...)
	res := policy.CheckResult{Damaged: len(problems)}
	if len(problems) == 0 {
		res.Summary = fmt.Sprintf("clean: %d points, %d packs, %d blobs", rep.Points, rep.Packs, rep.Blobs)
		if locks.Extended > 0 {
			res.Summary += fmt.Sprintf(", object lock of %d packs extended to outlast the points that need them", locks.Extended)
		}
		if req.Full {
			res.Summary += fmt.Sprintf(", %d bytes read", read)
		}
		return res, nil
	}
	var lines []string
	if req.Full {
		lines = append(lines, "corrupt blobs are quarantined (the next backup of their data stores fresh copies); run `repo check --read-data` to name the restore points affected")
	}
	for i, p := range problems {
		if i == 10 {
			lines = append(lines, fmt.Sprintf("… and %d more", len(problems)-10))
			break
		}
		lines = append(lines, p.String())
	}
	res.Summary = strings.Join(lines, "; ")
	return res, nil
}

// Points implements policy.Maintainer; Bytes is what only that point references.
func (m Maintainer) Points(ctx context.Context, repo string) ([]policy.Point, error) {
	r, release, err := m.Set.acquire(repo)
	if err != nil {
		return nil, err
	}
	defer release()
	st, err := r.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("points of %s: %w", repo, err)
	}
	unique := map[string]int64{}
	for _, ps := range st.PerPoint {
		unique[ps.ID] = ps.UniqueBytes
	}
	pts, err := r.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("points of %s: %w", repo, err)
	}
	out := make([]policy.Point, len(pts))
	for i, p := range pts {
		status := policy.PointComplete
		if p.Partial {
			status = policy.PointPartial
		}
		vm := p.VM.InstanceUUID
		if vm == "" {
			vm = p.VM.Name
		}
		job := p.Tags[JobTag]
		if p.Tags[repository.CopySourceTag] != "" {
			// A copy keeps its original's job tag, but its copy job's
			// retention governs it (copyjob), never the backup job's.
			job = ""
		}
		out[i] = policy.Point{ID: p.ID, Repository: repo, VM: vm, Job: job, Time: p.Time, Status: status, Locked: p.Locked || inUse(r, p.ID), Bytes: unique[p.ID],
			Writer: p.Writer.Appliance, Foreign: p.Writer.ID != "" && p.Writer.Appliance != r.Appliance()}
	}
	return out, nil
}

// RemovePoints implements policy.Maintainer. Points already gone are
// skipped; the space is freed by the next Reclaim.
func (m Maintainer) RemovePoints(ctx context.Context, repo string, ids []string) error {
	r, done, err := m.Set.Use(repo, "retention")
	if err != nil {
		return err
	}
	defer done()
	defer m.Set.idx.forget(repo)
	var errs []error
	for _, id := range ids {
		if err := r.Delete(ctx, id); err != nil && !errors.Is(err, repository.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove point %s from %s: %w", id, repo, err))
		}
	}
	return errors.Join(errs...)
}

// Reclaim implements policy.Maintainer.
func (m Maintainer) Reclaim(ctx context.Context, repo string) (int64, error) {
	r, done, err := m.Set.Use(repo, "maintenance reclaim")
	if err != nil {
		return 0, err
	}
	defer done()
	rep, err := r.Reclaim(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("reclaim %s: %w", repo, err)
	}
	return rep.BytesFreed, nil
}

// inUse: a point an instant recovery or a verification runs from is kept
// by retention as if locked (Delete would refuse it anyway).
func inUse(r *repository.Repository, id string) bool {
	_, ok := r.InUse(id)
	return ok
}
