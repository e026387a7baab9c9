package storage

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
)

// Space is the capacity of the file system or volume a backend writes to.
type Space struct {
	Total int64 // bytes
	Free  int64 // bytes an unprivileged writer may still use
}

// SpaceReporter is implemented by backends that know their free space. An
// object store has no such figure (a bucket grows until a quota says no).
type SpaceReporter interface {
	Space(ctx context.Context) (Space, error)
}

// Space implements SpaceReporter with statfs(2) on the repository directory.
func (l *Local) Space(ctx context.Context) (Space, error) {
	if err := ctx.Err(); err != nil {
		return Space{}, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(l.dir, &st); err != nil {
		return Space{}, fmt.Errorf("statfs %s: %w", l.dir, err)
	}
	bs := int64(st.Bsize)
	// Bavail, not Bfree: the blocks reserved for root are not the
	// appliance's to fill (it should not run as root, and ext4 keeps 5%).
	return Space{Total: int64(st.Blocks) * bs, Free: int64(st.Bavail) * bs}, nil
}
