package backup

import (
	"context"
	"fmt"
	"io"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
)

// Store is what the engine needs from the repository.
type Store interface {
	// Begin starts a backup session.
	Begin(ctx context.Context) (Session, error)
	// Points lists the committed restore points, oldest first.
	Points(ctx context.Context) ([]repository.Point, error)
	// OpenParent opens disk index disk of a restore point, for an
	// incremental backup on top of it.
	OpenParent(ctx context.Context, pointID string, disk int) (ParentReader, error)
	// Chunker returns the repository's chunker.
	Chunker() (dedup.Chunker, error)
}

// Session is one backup in progress (repository.Session).
type Session interface {
	ChunkStore
	PutDisk(ctx context.Context, size int64, extents []repository.Extent) (repository.ID, error)
	Commit(ctx context.Context, p repository.NewPoint) (repository.Point, error)
	Abort()
}

// ParentReader serves a parent restore point's disk.
type ParentReader interface {
	io.ReaderAt
	Size() int64
	Extents() []repository.Extent
	Close() error
}

// RepoStore adapts a repository to Store.
func RepoStore(r *repository.Repository) Store { return repoStore{r} }

type repoStore struct{ r *repository.Repository }

func (s repoStore) Begin(ctx context.Context) (Session, error) { return s.r.NewSession(ctx) }

func (s repoStore) Points(ctx context.Context) ([]repository.Point, error) { return s.r.List(ctx) }

func (s repoStore) Chunker() (dedup.Chunker, error) {
	c := s.r.Config().Chunker
	ch, err := dedup.New(dedup.Params{Algorithm: c.Algorithm, Polynomial: c.Polynomial, MinSize: c.MinSize, AvgSize: c.AvgSize, MaxSize: c.MaxSize})
	if err != nil {
		return nil, fmt.Errorf("repository chunker: %w", err)
	}
	return ch, nil
}

func (s repoStore) OpenParent(ctx context.Context, pointID string, disk int) (ParentReader, error) {
	_, exts, err := s.r.DiskExtents(ctx, pointID, disk)
	if err != nil {
		return nil, fmt.Errorf("parent disk map: %w", err)
	}
	dr, err := s.r.OpenDisk(ctx, pointID, disk)
	if err != nil {
		return nil, fmt.Errorf("open parent disk: %w", err)
	}
	return &parentReader{DiskReader: dr, exts: exts}, nil
}

type parentReader struct {
	*repository.DiskReader
	exts []repository.Extent
}

func (p *parentReader) Extents() []repository.Extent { return p.exts }
