package repository

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Points in use: an instant recovery runs a VM from a point's data and a
// verification boots one, for minutes or days. While it does, the point
// must not be deleted (by retention, an administrator or a copy job's
// target retention): Delete refuses it as locked ("in use: ..."), and
// reclaim, which frees only what no point references, keeps its data.
// The hold lives in this process's memory; the owner (service/instantvm)
// persists its sessions and takes the hold again when it resumes them
// after a restart, before anything else can run against the repository.

// HoldInUse holds the point id (or unique prefix) in use for why (shown
// in the refusal) until release is called; release is idempotent.
func (r *Repository) HoldInUse(ctx context.Context, id, why string) (release func(), err error) {
	p, err := r.Point(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("hold restore point %s: %w", id, err)
	}
	pid, _ := ParseID(p.ID)
	r.mu.Lock()
	if r.inUse == nil {
		r.inUse = map[ID]map[uint64]string{}
	}
	r.inUseSeq++
	tok := r.inUseSeq
	if r.inUse[pid] == nil {
		r.inUse[pid] = map[uint64]string{}
	}
	r.inUse[pid][tok] = why
	r.mu.Unlock()
	done := false
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if done {
			return
		}
		done = true
		delete(r.inUse[pid], tok)
		if len(r.inUse[pid]) == 0 {
			delete(r.inUse, pid)
		}
	}, nil
}

// InUse says whether the point id (full id) is held in use, and by what.
func (r *Repository) InUse(id string) (string, bool) {
	pid, err := ParseID(id)
	if err != nil {
		return "", false
	}
	return r.inUseBy(pid)
}

func (r *Repository) inUseBy(pid ID) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.inUse[pid]
	if len(h) == 0 {
		return "", false
	}
	whys := make([]string, 0, len(h))
	for _, w := range h {
		whys = append(whys, w)
	}
	sort.Strings(whys)
	return strings.Join(whys, ", "), true
}
