package repository

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// synthPack is one pack of a synthetic catalog: its size and its blobs'
// stored lengths, live or dead.
type synthPack struct {
	size uint64
	live []uint32
	dead []uint32
}

// synthSnapshot builds a snapshot from packs named p0, p1, …; blob ids
// are distinct per pack and position.
func synthSnapshot(t *testing.T, packSize int64, packs []synthPack) (reclaimSnapshot, []packID) {
	t.Helper()
	var s synthSnap
	s.packs, s.live = map[packID]packInfo{}, newLiveSet(0)
	var ids []packID
	for i, p := range packs {
		var pid packID
		copy(pid[:], fmt.Sprintf("p%03d", i))
		ids = append(ids, pid)
		s.packs[pid] = packInfo{Size: p.size, Count: uint32(len(p.live) + len(p.dead))}
		off := uint64(packHeaderReserve)
		add := func(n uint32, live bool, j int) {
			var id ID
			copy(id[:], fmt.Sprintf("b%03d-%v-%03d", i, live, j))
			s.blobs = append(s.blobs, snapBlob{id, blobLoc{Type: BlobData, StoredLen: n, RawLen: n, Offset: off, Pack: pid}})
			off += uint64(n)
			if live {
				s.live.add(id)
			}
		}
		// Interleave so pack order differs from id order.
		for j := len(p.dead) - 1; j >= 0; j-- {
			add(p.dead[j], false, j)
		}
		for j := len(p.live) - 1; j >= 0; j-- {
			add(p.live[j], true, j)
		}
	}
	return s.snapshot(packSize), ids
}

// synthSnap is a catalog in memory; snapshot walks it as reclaimSnapshot
// walks bbolt: packs and blobs in key order.
type synthSnap struct {
	packs map[packID]packInfo
	blobs []snapBlob
	live  *liveSet
}

type snapBlob struct {
	id  ID
	loc blobLoc
}

func (s synthSnap) snapshot(packSize int64) reclaimSnapshot {
	sort.Slice(s.blobs, func(i, j int) bool { return string(s.blobs[i].id[:]) < string(s.blobs[j].id[:]) })
	var pids []packID
	for id := range s.packs {
		pids = append(pids, id)
	}
	sort.Slice(pids, func(i, j int) bool { return string(pids[i][:]) < string(pids[j][:]) })
	return reclaimSnapshot{
		live:     s.live,
		packSize: packSize,
		eachPack: func(fn func(packID, packInfo) error) error {
			for _, id := range pids {
				if err := fn(id, s.packs[id]); err != nil {
					return err
				}
			}
			return nil
		},
		eachBlob: func(fn func(ID, blobLoc) error) error {
			for _, b := range s.blobs {
				if err := fn(b.id, b.loc); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

const packHeaderReserve = 64

func TestPlanReclaim(t *testing.T) {
	const mib = 1 << 20
	big := uint64(16 * mib)
	tenSmall := func(live bool) []synthPack {
		var out []synthPack
		for range 10 {
			p := synthPack{size: mib}
			if live {
				p.live = []uint32{mib - 100}
			} else {
				p.dead = []uint32{mib - 100}
			}
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		packs []synthPack
		doom  []int // indexes of the packs the plan deletes
		want  ReclaimPlan
	}{
		{name: "empty", want: ReclaimPlan{}},
		{name: "all live, big", packs: []synthPack{{size: big, live: []uint32{15 * mib}}},
			want: ReclaimPlan{LiveBlobs: 1}},
		{name: "all dead", packs: []synthPack{{size: big, dead: []uint32{8 * mib, 7 * mib}}}, doom: []int{0},
			want: ReclaimPlan{DeadBlobs: 2, PacksDropped: 1, BytesFreed: int64(big)}},
		{name: "mostly dead is repacked", packs: []synthPack{{size: big, live: []uint32{mib, 2 * mib}, dead: []uint32{12 * mib}}}, doom: []int{0},
			want: ReclaimPlan{LiveBlobs: 2, DeadBlobs: 1, PacksRepacked: 1, BlobsMoved: 2, BytesMoved: 3 * mib, BytesFreed: int64(big)}},
		{name: "exactly half live is kept", packs: []synthPack{{size: big, live: []uint32{8 * mib}, dead: []uint32{8 * mib}}},
			want: ReclaimPlan{LiveBlobs: 1, DeadBlobsKept: 1}},
		{name: "just under half live is repacked", packs: []synthPack{{size: big, live: []uint32{8*mib - uint32(packOverhead(1)) - 1}, dead: []uint32{8 * mib}}}, doom: []int{0},
			want: ReclaimPlan{LiveBlobs: 1, DeadBlobs: 1, PacksRepacked: 1, BlobsMoved: 1, BytesMoved: 8*mib - packOverhead(1) - 1, BytesFreed: int64(big)}},
		// Every reclaim repacked such a pack (its header is most of it)
		// into the same pack again.
		{name: "a live pack of a few small blobs is kept", packs: []synthPack{{size: uint64(packOverhead(10) + 50), live: []uint32{5, 5, 5, 5, 5, 5, 5, 5, 5, 5}}},
			want: ReclaimPlan{LiveBlobs: 10}},
		{name: "seven small live packs stay", packs: tenSmall(true)[:7],
			want: ReclaimPlan{LiveBlobs: 7}},
		{name: "eight small live packs merge", packs: tenSmall(true)[:8], doom: []int{0, 1, 2, 3, 4, 5, 6, 7},
			want: ReclaimPlan{LiveBlobs: 8, PacksRepacked: 8, BlobsMoved: 8, BytesMoved: 8 * (mib - 100), BytesFreed: 8 * mib}},
		{name: "dead small packs do not count toward a merge",
			packs: append(tenSmall(false)[:3], tenSmall(true)[:7]...), doom: []int{0, 1, 2},
			want: ReclaimPlan{LiveBlobs: 7, DeadBlobs: 3, PacksDropped: 3, BytesFreed: 3 * mib}},
		{name: "mixed", packs: []synthPack{
			{size: big, live: []uint32{15 * mib}, dead: []uint32{mib / 2}},
			{size: big, dead: []uint32{mib}},
			{size: big, live: []uint32{mib}, dead: []uint32{14 * mib}},
		}, doom: []int{1, 2},
			want: ReclaimPlan{LiveBlobs: 2, DeadBlobs: 2, DeadBlobsKept: 1, PacksDropped: 1, PacksRepacked: 1, BlobsMoved: 1, BytesMoved: mib, BytesFreed: 2 * int64(big)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, ids := synthSnapshot(t, 16*mib, tc.packs)
			got, err := planReclaim(snap)
			if err != nil {
				t.Fatal(err)
			}
			var doomed []packID
			for _, p := range got.packs {
				doomed = append(doomed, p.id)
				if !sort.SliceIsSorted(p.live, func(i, j int) bool { return p.live[i].Offset < p.live[j].Offset }) {
					t.Errorf("pack %s: live blobs not in pack order", p.id)
				}
				for _, e := range p.live {
					if !snap.live.has(e.ID) {
						t.Errorf("pack %s: dead blob %x planned to move", p.id, e.ID[:8])
					}
				}
				for _, d := range p.dead {
					if snap.live.has(d) {
						t.Errorf("pack %s: live blob %x planned as dead", p.id, d[:8])
					}
				}
			}
			var want []packID
			for _, i := range tc.doom {
				want = append(want, ids[i])
			}
			if !reflect.DeepEqual(doomed, want) {
				t.Errorf("doomed packs %v, want %v", doomed, want)
			}
			got.packs, got.indexed = nil, nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestPlanReclaimUnindexedPack: blobs whose pack has no catalog entry (an
// interrupted index) count as in a pack of size zero: dead ones are
// dropped, live ones stay put unless enough small packs merge.
func TestPlanReclaimUnindexedPack(t *testing.T) {
	var p1, p2 packID
	copy(p1[:], "nopack-1")
	copy(p2[:], "nopack-2")
	var live, dead ID
	copy(live[:], "live")
	copy(dead[:], "dead")
	set := newLiveSet(0)
	set.add(live)
	snap := synthSnap{packs: map[packID]packInfo{}, live: set,
		blobs: []snapBlob{{live, blobLoc{StoredLen: 10, Pack: p1}}, {dead, blobLoc{StoredLen: 10, Pack: p2}}}}.snapshot(1 << 24)
	pl, err := planReclaim(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.packs) != 1 || pl.packs[0].id != p2 || pl.PacksDropped != 1 || pl.LiveBlobs != 1 || pl.BytesFreed != 0 {
		t.Errorf("plan %+v packs %+v", pl, pl.packs)
	}
}

func TestPlanReclaimRefusesBadInput(t *testing.T) {
	if _, err := planReclaim(reclaimSnapshot{}); err == nil {
		t.Error("a zero pack size planned")
	}
}

func TestPlanOrphans(t *testing.T) {
	id := func(s string) packID {
		var p packID
		copy(p[:], s)
		return p
	}
	onDisk := map[packID]int64{id("a"): 100, id("b"): 200, id("c"): 300}
	for _, tc := range []struct {
		name        string
		known       map[packID]bool
		liveMissing bool
		want        []orphanFile
		kept        int
		freed       int64
	}{
		{"all indexed", map[packID]bool{id("a"): true, id("b"): true, id("c"): true}, false, nil, 0, 0},
		{"two orphans", map[packID]bool{id("b"): true}, false, []orphanFile{{id("a"), 100}, {id("c"), 300}}, 0, 400},
		{"a live blob is missing: keep every orphan", map[packID]bool{id("b"): true}, true, nil, 2, 0},
		{"nothing orphaned, missing blob irrelevant", map[packID]bool{id("a"): true, id("b"): true, id("c"): true}, true, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pl ReclaimPlan
			asked := false
			planOrphans(&pl, onDisk, tc.known, func() bool { asked = true; return tc.liveMissing })
			if !reflect.DeepEqual(pl.orphans, tc.want) || pl.OrphanFilesKept != tc.kept || pl.BytesFreed != tc.freed || pl.OrphanFiles != len(tc.want) {
				t.Errorf("orphans %v kept %d freed %d", pl.orphans, pl.OrphanFilesKept, pl.BytesFreed)
			}
			if asked && len(tc.known) == len(onDisk) {
				t.Error("asked for a missing live blob with no orphan (a full catalog scan for nothing)")
			}
		})
	}
}

// TestPlanReclaimDryRun: PlanReclaim changes nothing (catalog, pack files,
// reclaim mark), and the reclaim that follows does what it planned.
func TestPlanReclaimDryRun(t *testing.T) {
	r := TestRepository(t, WithPackSize(8<<20))
	ctx := context.Background()
	img1, img2 := testDisk(440, 3<<20), testDisk(441, 256<<10)
	img2[0] = 1
	p1 := backup(t, r, "vm", testTime, img1, img2)
	p2 := backup(t, r, "vm", testTime.Add(time.Hour), img1)
	small := testDisk(442, 128<<10)
	small[0] = 2
	p3 := backup(t, r, "other", testTime.Add(2*time.Hour), small)
	for _, id := range []string{p1.ID, p3.ID} {
		if err := r.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	blobs := catalogBlobs(t, r)
	files, err := r.listPackFiles()
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	pl, err := r.PlanReclaim(ctx, func(p Progress) { phases = append(phases, p.Phase) })
	if err != nil {
		t.Fatal(err)
	}
	if pl.PacksDropped+pl.PacksRepacked == 0 || pl.DeadBlobs == 0 || pl.BytesFreed == 0 || len(phases) == 0 {
		t.Fatalf("plan %+v (progress %v): nothing to reclaim in a repository with dead packs", pl, phases)
	}
	after, _ := r.listPackFiles()
	if catalogBlobs(t, r) != blobs || !reflect.DeepEqual(after, files) {
		t.Fatal("the dry run changed the catalog or the pack files")
	}
	if err := r.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get(metaReclaim) != nil {
			return fmt.Errorf("reclaim mark set")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksDeleted != pl.PacksDropped+pl.PacksRepacked || rep.PacksRepacked != pl.PacksRepacked ||
		rep.BytesRepacked != pl.BytesMoved || rep.BytesFreed != pl.BytesFreed || rep.DeadBlobs != pl.DeadBlobs ||
		rep.DeadBlobsKept != pl.DeadBlobsKept || rep.LiveBlobs != pl.LiveBlobs || rep.OrphanFiles != pl.OrphanFiles {
		t.Errorf("reclaim did not do what was planned:\nplan   %+v\nreport %+v", pl, *rep)
	}
	verifyPoint(t, r, p2.ID, img1)
	requireClean(t, r)
}

// TestPlanReclaimBudget: a plan takes packs in id order until their blobs
// reach the budget (always at least one) and defers the rest, counting
// their dead blobs as kept.
func TestPlanReclaimBudget(t *testing.T) {
	const mib = 1 << 20
	dead := synthPack{size: 16 * mib, dead: []uint32{mib, mib}}
	for _, tc := range []struct {
		budget, taken, deferred int
	}{
		{1, 1, 3}, // one pack even over the budget
		{3, 1, 3},
		{4, 2, 2},
		{8, 4, 0},
		{0, 4, 0}, // the default
	} {
		snap, ids := synthSnapshot(t, 16*mib, []synthPack{dead, dead, dead, dead})
		snap.maxBlobs = tc.budget
		pl, err := planReclaim(snap)
		if err != nil {
			t.Fatal(err)
		}
		if len(pl.packs) != tc.taken || pl.PacksDeferred != tc.deferred || pl.DeadBlobs != 2*tc.taken || pl.DeadBlobsKept != 2*tc.deferred {
			t.Errorf("budget %d: took %d deferred %d dead %d kept %d, want %d %d", tc.budget, len(pl.packs), pl.PacksDeferred, pl.DeadBlobs, pl.DeadBlobsKept, tc.taken, tc.deferred)
			continue
		}
		for k, p := range pl.packs {
			if p.id != ids[k] {
				t.Errorf("budget %d: pack %d is %s, want %s (id order)", tc.budget, k, p.id, ids[k])
			}
		}
	}
}

// TestReclaimBudgetFinishesOverRuns: with a budget of one pack a run,
// successive reclaims delete every dead pack, and the data stays intact.
func TestReclaimBudgetFinishesOverRuns(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	var pts []Point
	for i := range 6 {
		pts = append(pts, backup(t, r, "vm", testTime.Add(time.Duration(i)*time.Hour), testDisk(uint64(300+i), 300<<10)))
	}
	for _, p := range pts[:3] {
		if err := r.Delete(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	r.reclaimMaxBlobs = 1
	runs, deleted := 0, 0
	for {
		rep, err := r.Reclaim(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs++
		deleted += rep.PacksDeleted
		if rep.PacksDeferred == 0 {
			break
		}
		if rep.PacksDeleted == 0 || runs > 50 {
			t.Fatalf("run %d made no progress: %+v", runs, rep)
		}
	}
	if runs < 2 || deleted < 3 {
		t.Errorf("%d runs deleted %d packs: the budget did not split the work", runs, deleted)
	}
	r.reclaimMaxBlobs = 0
	if rep, err := r.Reclaim(ctx, nil); err != nil || rep.PacksDeleted != 0 || rep.DeadBlobs != 0 {
		t.Errorf("a reclaim after the budgeted runs still found work: %+v %v", rep, err)
	}
	requireClean(t, r)
	for i := 3; i < len(pts); i++ {
		verifyPoint(t, r, pts[i].ID, testDisk(uint64(300+i), 300<<10))
	}
}

// TestReclaimInBatches: a reclaim whose catalog changes span many
// transactions (one entry each) ends as one in a single transaction:
// same report, a clean repository, the kept points intact, and no
// reclaim mark left.
func TestReclaimInBatches(t *testing.T) {
	ctx := context.Background()
	var reports []*ReclaimReport
	for _, batch := range []int{0, 1} {
		r := TestRepository(t)
		r.reclaimBatch = batch
		var pts []Point
		for i := range 5 {
			pts = append(pts, backup(t, r, "vm", testTime.Add(time.Duration(i)*time.Hour), testDisk(uint64(500+i), 400<<10)))
		}
		for _, p := range pts[:3] {
			if err := r.Delete(ctx, p.ID); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := r.Reclaim(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.DeadBlobs < 3 || rep.PacksDeleted < 2 {
			t.Fatalf("batch %d: too little reclaimed to span transactions: %+v", batch, rep)
		}
		r.db.View(func(tx *bolt.Tx) error {
			if tx.Bucket(bucketMeta).Get(metaReclaim) != nil {
				t.Errorf("batch %d: reclaim mark left in the catalog", batch)
			}
			return nil
		})
		requireClean(t, r)
		for i := 3; i < len(pts); i++ {
			verifyPoint(t, r, pts[i].ID, testDisk(uint64(500+i), 400<<10))
		}
		reports = append(reports, rep)
	}
	// Two repositories (two keys): the packs' sizes differ by a few bytes
	// of compressed metadata.
	if d := reports[0].BytesFreed - reports[1].BytesFreed; d > 64 || d < -64 {
		t.Errorf("bytes freed %d vs %d", reports[0].BytesFreed, reports[1].BytesFreed)
	}
	reports[0].BytesFreed, reports[1].BytesFreed = 0, 0
	if !reflect.DeepEqual(reports[0], reports[1]) {
		t.Errorf("one transaction %+v, batches of one %+v", reports[0], reports[1])
	}
}

// TestReclaimRefusesMalformedCatalogKey: a blob key of the wrong length
// (a damaged catalog) stops reclaim with an error and deletes nothing; it
// used to panic converting the key to an id.
func TestReclaimRefusesMalformedCatalogKey(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	p := backup(t, r, "vm", testTime, testDisk(600, 200<<10))
	backup(t, r, "vm", testTime.Add(time.Hour), testDisk(601, 200<<10))
	if err := r.Delete(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	before, err := r.listPackFiles()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).Put([]byte("short"), encodeBlobLoc(blobLoc{StoredLen: 1}))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reclaim(ctx, nil); err == nil || !strings.Contains(err.Error(), "blob key of 5 bytes") {
		t.Fatalf("reclaim over a malformed key: %v", err)
	}
	if _, err := r.PlanReclaim(ctx, nil); err == nil {
		t.Error("plan over a malformed key succeeded")
	}
	after, err := r.listPackFiles()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("packs changed: %d before, %d after", len(before), len(after))
	}
}
