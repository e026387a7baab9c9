package repository

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Repair outcomes of one commit record (RepairResult.Action).
const (
	// RepairRewritten: the record was missing or unreadable and was written
	// again from the catalog entry and the verified manifest.
	RepairRewritten = "rewritten"
	// RepairUnreadableManifest: the point's manifest cannot be read or does
	// not verify; nothing was written (restore the pack from a copy, or
	// delete the point).
	RepairUnreadableManifest = "manifest-unreadable"
	// RepairLocked: an immutable repository's damaged record is still under
	// its Object Lock retention and cannot be overwritten.
	RepairLocked = "locked"
	// RepairNotInCatalog: an unreadable record of a point the catalog does
	// not know: its lock flag is not proven by anything, so it is not
	// rewritten.
	RepairNotInCatalog = "not-in-catalog"
)

// RepairResult is what Repair did with one commit record.
type RepairResult struct {
	Point   string `json:"point"`
	Action  string `json:"action"` // a Repair* constant
	Message string `json:"message"`
}

// RepairReport lists every commit record Repair looked at that was not
// sound; an empty report means every record was.
type RepairReport struct {
	Results []RepairResult `json:"results"`
}

// Rewritten counts the records Repair wrote.
func (rep *RepairReport) Rewritten() int {
	n := 0
	for _, r := range rep.Results {
		if r.Action == RepairRewritten {
			n++
		}
	}
	return n
}

// Unrepaired counts the records Repair left damaged.
func (rep *RepairReport) Unrepaired() int { return len(rep.Results) - rep.Rewritten() }

// Repair rewrites the commit records that check reports missing or
// unreadable (ProblemMissingRecord, ProblemBadPoint on the record) for the
// points the catalog still lists, from what the repository proves: a
// record holds only the manifest's blob id, which is the point's id, and
// the lock flag, which the catalog keeps. A record is rewritten only when
// its manifest is readable from the packs, verifies (its id is its hash)
// and decodes; otherwise it is reported and nothing is written. Nothing is
// invented: an unreadable record the catalog does not list (its lock flag
// is unknown) is reported, and in an immutable repository a damaged record
// still under its Object Lock is reported, not overwritten.
func (r *Repository) Repair(ctx context.Context) (*RepairReport, error) {
	if err := r.writable("repair"); err != nil {
		return nil, err
	}
	pts, err := r.listCatalog(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	rep := &RepairReport{Results: []RepairResult{}}
	inCat := map[ID]bool{}
	for _, p := range pts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pid, err := ParseID(p.ID)
		if err != nil {
			return nil, err
		}
		inCat[pid] = true
		_, rerr := r.readRecord(pid)
		if rerr == nil {
			continue
		}
		missing := errors.Is(rerr, os.ErrNotExist)
		state := "missing"
		if !missing {
			state = fmt.Sprintf("unreadable (%v)", rerr)
		}
		res := RepairResult{Point: p.ID}
		b, err := r.loadBlob(ctx, pid, nil)
		if err == nil {
			_, err = decodeManifest(b)
		}
		if err != nil {
			res.Action = RepairUnreadableManifest
			res.Message = fmt.Sprintf("commit record %s is %s, and the manifest cannot be read: %v; not rewritten (restore the pack from a copy, or delete the point)", r.recordPath(pid), state, err)
			rep.Results = append(rep.Results, res)
			continue
		}
		if !missing && r.cfg.ObjectLock != nil {
			until, err := r.objectLockedUntil(ctx, recordName(pid))
			if err != nil {
				return nil, err
			}
			if until.After(r.now()) {
				res.Action = RepairLocked
				res.Message = fmt.Sprintf("commit record %s is %s, and its Object Lock holds it until %s: it cannot be overwritten (the point stays readable through the catalog; restore the record from a copy after that date)", r.recordPath(pid), state, until.Format("2006-01-02 15:04 MST"))
				rep.Results = append(rep.Results, res)
				continue
			}
		}
		if err := r.writeRecord(record{Manifest: pid, Locked: p.Locked}); err != nil {
			return rep, fmt.Errorf("repair %s: %w", p.ID, err)
		}
		if _, err := r.readRecord(pid); err != nil {
			return rep, fmt.Errorf("repair %s: the rewritten record does not read back: %w", p.ID, err)
		}
		res.Action = RepairRewritten
		res.Message = fmt.Sprintf("commit record %s was %s: rewritten from the verified manifest (locked: %t, from the catalog)", r.recordPath(pid), state, p.Locked)
		rep.Results = append(rep.Results, res)
	}
	recs, err := r.listRecords()
	if err != nil {
		return rep, err
	}
	for _, id := range recs {
		if inCat[id] {
			continue
		}
		if _, err := r.readRecord(id); err != nil && !errors.Is(err, os.ErrNotExist) {
			rep.Results = append(rep.Results, RepairResult{Point: id.String(), Action: RepairNotInCatalog,
				Message: fmt.Sprintf("commit record %s cannot be read (%v) and the catalog does not list its point: nothing proves its lock flag, so it is not rewritten (restore it from a copy, or remove it)", r.recordPath(id), err)})
		}
	}
	return rep, nil
}
