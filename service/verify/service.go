package verify

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/service/filerestore"
)

// Service verifies restore points of the repositories its Source holds
// (repos.Set in the daemon, filerestore.Single in the CLI). It keeps no
// state: each call opens the point's disks and closes them again.
type Service struct {
	src filerestore.Source
	clk clock.Clock
}

// New returns a Service over src; clk (nil: the real clock) times walks.
func New(src filerestore.Source, clk clock.Clock) (*Service, error) {
	if src == nil {
		return nil, errors.New("verify: a Source is required")
	}
	if clk == nil {
		clk = clock.Real()
	}
	return &Service{src: src, clk: clk}, nil
}

// VerifyPoint walks every volume of a restore point (id or unique
// prefix), its disks opened from the repository as file-level restore
// opens them, every blob read verified. A point that cannot be found or
// opened is an error; damage found is in the report (Passed false), and
// the returned error is nil.
func (s *Service) VerifyPoint(ctx context.Context, point string, opts Options) (Report, error) {
	repoName, p, err := s.src.Locate(ctx, point)
	if err != nil {
		return Report{}, err // it names the point
	}
	r, err := s.src.Repo(repoName)
	if err != nil {
		return Report{}, err
	}
	disks, readers, err := filerestore.OpenDisks(ctx, r, p)
	if err != nil {
		return Report{}, err
	}
	defer func() {
		for _, dr := range readers {
			dr.Close()
		}
	}()
	if opts.Clock == nil {
		opts.Clock = s.clk
	}
	rep, err := Walk(ctx, disks, opts)
	rep.Repository, rep.RestorePoint, rep.VM = repoName, p.ID, p.VM.Name
	if err != nil {
		return rep, fmt.Errorf("verify %s: %w", p.ID, err)
	}
	return rep, nil
}
