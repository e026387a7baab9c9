package repository

import (
	"context"

	"github.com/vmvault/vmvault/repository/storage"
)

// Space returns the capacity and free space where the repository's files
// live; ok is false when the backend cannot say (an object store).
func (r *Repository) Space(ctx context.Context) (sp storage.Space, ok bool, err error) {
	rep, ok := storage.As[storage.SpaceReporter](r.store)
	if !ok {
		return storage.Space{}, false, nil
	}
	sp, err = rep.Space(ctx)
	if err != nil {
		return storage.Space{}, false, err
	}
	return sp, true, nil
}
