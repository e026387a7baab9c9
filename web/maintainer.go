package web

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
)

// RepoMaintainer implements policy.Maintainer over a RepoSet, so the
// scheduler can apply retention, reclaim and check inside the maintenance
// window. Checks do not resume: repository.Check has no cursor yet, so an
// interrupted full check starts again from the beginning.
type RepoMaintainer struct{ Set *RepoSet }

var _ policy.Maintainer = RepoMaintainer{}

// Check implements policy.Maintainer: a quick check verifies structure, a
// full one reads every blob.
func (m RepoMaintainer) Check(ctx context.Context, req policy.CheckRequest, progress func(cursor string)) (policy.CheckResult, error) {
	r, err := m.Set.repo(req.Repository)
	if err != nil {
		return policy.CheckResult{}, err
	}
	rep, err := r.Check(ctx, repository.CheckOptions{ReadData: req.Full}, nil)
	if err != nil {
		return policy.CheckResult{}, fmt.Errorf("check %s: %w", req.Repository, err)
	}
	res := policy.CheckResult{Damaged: len(rep.Problems)}
	if rep.Clean() {
		res.Summary = fmt.Sprintf("clean: %d points, %d packs, %d blobs", rep.Points, rep.Packs, rep.Blobs)
		return res, nil
	}
	var lines []string
	for i, p := range rep.Problems {
		if i == 10 {
			lines = append(lines, fmt.Sprintf("… and %d more", len(rep.Problems)-10))
			break
		}
		lines = append(lines, p.String())
	}
	res.Summary = strings.Join(lines, "; ")
	return res, nil
}

// Points implements policy.Maintainer; Bytes is what only that point references.
func (m RepoMaintainer) Points(ctx context.Context, repo string) ([]policy.Point, error) {
	r, err := m.Set.repo(repo)
	if err != nil {
		return nil, err
	}
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
		out[i] = policy.Point{ID: p.ID, Repository: repo, VM: vm, Job: p.Tags[JobTag], Time: p.Time, Status: status, Locked: p.Locked, Bytes: unique[p.ID]}
	}
	return out, nil
}

// RemovePoints implements policy.Maintainer. Points already gone are
// skipped; the space is freed by the next Reclaim.
func (m RepoMaintainer) RemovePoints(ctx context.Context, repo string, ids []string) error {
	r, err := m.Set.repo(repo)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := r.Delete(ctx, id); err != nil && !errors.Is(err, repository.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove point %s from %s: %w", id, repo, err))
		}
	}
	return errors.Join(errs...)
}

// Reclaim implements policy.Maintainer.
func (m RepoMaintainer) Reclaim(ctx context.Context, repo string) (int64, error) {
	r, err := m.Set.repo(repo)
	if err != nil {
		return 0, err
	}
	rep, err := r.Reclaim(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("reclaim %s: %w", repo, err)
	}
	return rep.BytesFreed, nil
}
