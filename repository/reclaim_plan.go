package repository

import (
	"fmt"
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

	packs   []plannedPack // packs to delete, by id
	orphans []orphanFile
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
// catalog and the set of live blob ids.
type reclaimSnapshot struct {
	packs    map[packID]packInfo
	blobs    []snapBlob
	live     map[ID]struct{}
	packSize int64 // the repository's target pack size
}

type snapBlob struct {
	id  ID
	loc blobLoc
}

// planReclaim decides which packs go: a pack with no live blob, or with
// live bytes under repackThreshold of its size, is deleted (its live blobs
// copied first); packs under packSize/smallPackDivisor are merged once at
// least smallPackMerge of them exist (every Commit flushes a tail pack). A
// blob whose pack has no catalog entry counts as in a pack of size zero.
func planReclaim(s reclaimSnapshot) (ReclaimPlan, error) {
	if s.packSize <= 0 {
		return ReclaimPlan{}, fmt.Errorf("plan reclaim: pack size %d", s.packSize)
	}
	type tally struct {
		plannedPack
		liveBytes int64
	}
	all := map[packID]*tally{}
	for id, pi := range s.packs {
		all[id] = &tally{plannedPack: plannedPack{id: id, info: pi}}
	}
	var pl ReclaimPlan
	totalDead := 0
	for _, b := range s.blobs {
		t := all[b.loc.Pack]
		if t == nil {
			t = &tally{plannedPack: plannedPack{id: b.loc.Pack}}
			all[b.loc.Pack] = t
		}
		if _, ok := s.live[b.id]; ok {
			t.liveBytes += int64(b.loc.StoredLen)
			t.live = append(t.live, b.loc.entry(b.id))
			pl.LiveBlobs++
		} else {
			t.dead = append(t.dead, b.id)
			totalDead++
		}
	}
	doomed := map[packID]bool{}
	var small []packID
	for id, t := range all {
		if len(t.live) == 0 || float64(t.liveBytes) < repackThreshold*float64(t.info.Size) {
			doomed[id] = true
		} else if t.info.Size < uint64(s.packSize)/smallPackDivisor {
			small = append(small, id)
		}
	}
	if len(small) >= smallPackMerge {
		for _, id := range small {
			doomed[id] = true
		}
	}
	for id := range doomed {
		t := all[id]
		// Copy in pack order: the repack then reads each pack front to back.
		sort.Slice(t.live, func(i, j int) bool { return t.live[i].Offset < t.live[j].Offset })
		sort.Slice(t.dead, func(i, j int) bool { return string(t.dead[i][:]) < string(t.dead[j][:]) })
		pl.packs = append(pl.packs, t.plannedPack)
		if len(t.live) == 0 {
			pl.PacksDropped++
		} else {
			pl.PacksRepacked++
		}
		pl.BlobsMoved += len(t.live)
		pl.BytesMoved += t.liveBytes
		pl.BytesFreed += int64(t.info.Size)
		pl.DeadBlobs += len(t.dead)
	}
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
