package repository

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
)

// ReclaimPlan is what a reclaim decides, pack by pack, from one snapshot of
// the catalog and the live set. planReclaim computes it without I/O; the
// executor (reclaim.go) carries it out, and PlanReclaim returns it as a dry
// run. The counts are the plan's; a reclaim's ReclaimReport says what was
// actually done (a pack whose live blob cannot be read is kept, for one).
type ReclaimPlan struct {
	LiveBlobs int `json:"liveBlobs"`
	// DeadBlobs are the unreferenced blobs in packs the plan deletes;
	// DeadBlobsKept those left in packs that are mostly live.
	DeadBlobs     int `json:"deadBlobs"`
	DeadBlobsKept int `json:"deadBlobsKept"`
	// PacksDropped hold no live blob and are deleted outright;
	// PacksRepacked have their live blobs copied into new packs first
	// (mostly dead, or small packs merged).
	PacksDropped  int `json:"packsDropped"`
	PacksRepacked int `json:"packsRepacked"`
	// BlobsMoved and BytesMoved are the live blobs copied into new packs.
	BlobsMoved int   `json:"blobsMoved"`
	BytesMoved int64 `json:"bytesMoved"`
	// BytesFreed is the size of the packs deleted, before what the copies
	// take (the net gain is BytesFreed - BytesMoved), plus orphan files.
	BytesFreed int64 `json:"bytesFreed"`
	// OrphanFiles are pack files neither indexed nor being written that
	// would be deleted; OrphanFilesKept those kept because a live blob is
	// not indexed (it may be in one of them).
	OrphanFiles     int `json:"orphanFiles"`
	OrphanFilesKept int `json:"orphanFilesKept"`
	// PacksDeferred qualified but were left for the next reclaim: one
	// reclaim takes at most reclaimMaxBlobs blobs' worth of packs, which
	// bounds its memory (their dead blobs count in DeadBlobsKept).
	PacksDeferred int `json:"packsDeferred,omitempty"`

	packs   []plannedPack // packs to delete, by id
	orphans []orphanFile
	// indexed are the packs the snapshot knows (a catalog entry or a blob
	// in it), sorted: findOrphans keeps those files.
	indexed []packID
}

// orphanFile is a pack file the plan deletes as an orphan.
type orphanFile struct {
	id   packID
	size int64
}

// plannedPack is one pack the plan deletes.
type plannedPack struct {
	id   packID
	info packInfo
	live []packEntry // blobs to copy first, in pack order
	dead []ID        // unreferenced blobs indexed in it
}

// reclaimSnapshot is the input of planReclaim: every pack and blob of the
// catalog, walked (more than once) through eachPack and eachBlob in key
// order, and the set of live blob ids. close ends the walk's read
// transaction (nil in tests).
type reclaimSnapshot struct {
	eachPack func(func(packID, packInfo) error) error
	eachBlob func(func(ID, blobLoc) error) error
	live     *liveSet
	packSize int64 // the repository's target pack size
	maxBlobs int   // blobs of the packs one plan takes at most; 0: reclaimMaxBlobs
	close    func()
}

// reclaimMaxBlobs bounds the blobs (live and dead) of the packs one
// reclaim deletes: the plan keeps each one's id and location, and condemn
// an entry per dead blob (~200 bytes a blob in all: 2 Mi blobs, ~400 MiB at
// worst, 2 TiB of 1 MiB chunks a run; at 4 Mi, reclaim's peak heap at 100
// million chunks was 2.3 GiB instead of 2.0: docs/PERFORMANCE.md). Packs beyond it, in pack id order,
// wait for the next reclaim (PacksDeferred), which starts where this one
// stopped since what it deleted is gone.
const reclaimMaxBlobs = 2 << 20

// packTally is what planReclaim keeps per pack while it decides: ~100
// bytes a pack with its map entry (3.2 million packs at 100 TB of 32 MiB
// packs: ~320 MiB), nothing per blob.
type packTally struct {
	info      packInfo
	liveBytes int64
	nLive     int
	nDead     int
}

// packOverhead is what a pack of n blobs takes besides their stored bytes:
// magic, header (sealed, when encrypted) and trailer (FORMAT.md §pack).
func packOverhead(n int) int64 {
	return packStart + packHeaderFixed + int64(n)*packEntrySize + blobSealOverhead + packTrailerSize
}

// planReclaim decides which packs go: a pack with no live blob, or whose
// live bytes (with the header a copy of them needs) are under
// repackThreshold of its size, is deleted (its live blobs
// copied first); packs under packSize/smallPackDivisor are merged once at
// least smallPackMerge of them exist (every Commit flushes a tail pack). A
// blob whose pack has no catalog entry counts as in a pack of size zero.
//
// Memory is bounded by the packs, not the blobs: a first walk of the
// catalog tallies each pack's live bytes, a second collects the blobs of
// the doomed packs only.
func planReclaim(s reclaimSnapshot) (ReclaimPlan, error) {
	if s.packSize <= 0 {
		return ReclaimPlan{}, fmt.Errorf("plan reclaim: pack size %d", s.packSize)
	}
	all := map[packID]*packTally{}
	if err := s.eachPack(func(id packID, pi packInfo) error {
		all[id] = &packTally{info: pi}
		return nil
	}); err != nil {
		return ReclaimPlan{}, fmt.Errorf("plan reclaim: %w", err)
	}
	var pl ReclaimPlan
	totalDead := 0
	if err := s.eachBlob(func(id ID, l blobLoc) error {
		t := all[l.Pack]
		if t == nil {
			t = &packTally{}
			all[l.Pack] = t
		}
		if s.live.has(id) {
			t.liveBytes += int64(l.StoredLen)
			t.nLive++
			pl.LiveBlobs++
		} else {
			t.nDead++
			totalDead++
		}
		return nil
	}); err != nil {
		return ReclaimPlan{}, fmt.Errorf("plan reclaim: %w", err)
	}
	doomed := map[packID]*plannedPack{}
	var small []packID
	pl.indexed = make([]packID, 0, len(all))
	for id, t := range all {
		pl.indexed = append(pl.indexed, id)
		// Live bytes count with the header their copy needs: a pack of a
		// few small blobs is mostly header, and copying it only wrote
		// the same pack again (every reclaim repacked it, forever).
		if t.nLive == 0 || float64(t.liveBytes+packOverhead(t.nLive)) < repackThreshold*float64(t.info.Size) {
			doomed[id] = &plannedPack{id: id, info: t.info}
		} else if t.info.Size < uint64(s.packSize)/smallPackDivisor {
			small = append(small, id)
		}
	}
	slices.SortFunc(pl.indexed, func(a, b packID) int { return bytes.Compare(a[:], b[:]) })
	budget := s.maxBlobs
	if budget <= 0 {
		budget = reclaimMaxBlobs
	}
	cmp := func(a, b packID) int { return bytes.Compare(a[:], b[:]) }
	ids := make([]packID, 0, len(doomed))
	for id := range doomed {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmp)
	taken := 0
	for k, id := range ids {
		t := all[id]
		// The first pack is always taken, however large: every reclaim
		// makes progress.
		if k > 0 && taken+t.nLive+t.nDead > budget {
			delete(doomed, id)
			pl.PacksDeferred++
			continue
		}
		taken += t.nLive + t.nDead
	}
	// Small packs merge at least smallPackMerge at a time whatever the
	// budget (a few small packs' blobs): merging fewer would only write
	// a new small pack, and the next reclaim would merge it again.
	if len(small) >= smallPackMerge {
		slices.SortFunc(small, cmp)
		for k, id := range small {
			t := all[id]
			if k >= smallPackMerge && taken+t.nLive+t.nDead > budget {
				pl.PacksDeferred += len(small) - k
				break
			}
			taken += t.nLive + t.nDead
			doomed[id] = &plannedPack{id: id, info: t.info}
		}
	}
	if len(doomed) > 0 {
		if err := s.eachBlob(func(id ID, l blobLoc) error {
			pp := doomed[l.Pack]
			if pp == nil {
				return nil
			}
			if s.live.has(id) {
				pp.live = append(pp.live, l.entry(id))
			} else {
				pp.dead = append(pp.dead, id)
			}
			return nil
		}); err != nil {
			return ReclaimPlan{}, fmt.Errorf("plan reclaim: %w", err)
		}
	}
	for _, pp := range doomed {
		// Copy in pack order: the repack then reads each pack front to back.
		sort.Slice(pp.live, func(i, j int) bool { return pp.live[i].Offset < pp.live[j].Offset })
		sort.Slice(pp.dead, func(i, j int) bool { return string(pp.dead[i][:]) < string(pp.dead[j][:]) })
		pl.packs = append(pl.packs, *pp)
		if len(pp.live) == 0 {
			pl.PacksDropped++
		} else {
			pl.PacksRepacked++
		}
		pl.BlobsMoved += len(pp.live)
		for _, e := range pp.live {
			pl.BytesMoved += int64(e.StoredLen)
		}
		pl.BytesFreed += int64(pp.info.Size)
		pl.DeadBlobs += len(pp.dead)
	}
	// Pack id order is the packs' on-disk order (packs/xx/<id>, FORMAT.md):
	// the repack reads them, and the delete removes them, directory by
	// directory.
	sort.Slice(pl.packs, func(i, j int) bool { return string(pl.packs[i].id[:]) < string(pl.packs[j].id[:]) })
	pl.DeadBlobsKept = totalDead - pl.DeadBlobs
	return pl, nil
}

// planOrphans picks the pack files to delete as orphans: on disk (with
// their sizes) and not known (indexed in the snapshot or since, or being
// written). When a live blob is missing from the catalog every orphan is
// kept instead: it may be in one of them (a pack whose damaged header was
// not salvaged). liveMissing is only asked when there are orphans.
func planOrphans(pl *ReclaimPlan, onDisk map[packID]int64, known map[packID]bool, liveMissing func() bool) {
	var orphans []orphanFile
	for id, size := range onDisk {
		if !known[id] {
			orphans = append(orphans, orphanFile{id, size})
		}
	}
	sort.Slice(orphans, func(i, j int) bool { return string(orphans[i].id[:]) < string(orphans[j].id[:]) })
	if len(orphans) > 0 && liveMissing() {
		pl.OrphanFilesKept = len(orphans)
		return
	}
	pl.orphans = orphans
	pl.OrphanFiles = len(orphans)
	for _, o := range orphans {
		pl.BytesFreed += o.size
	}
}
