package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
)

// CBT trust-but-verify. Changed block tracking is known to lose writes
// (VMware KBs 2090639, 2136854: disks grown past 128 GB, snapshot reverts,
// storage migrations, ctk files lost or reset). The engine therefore
// (1) refuses an incremental when the change ids show such an event and
// (2) re-reads a rotating sample of the blocks CBT calls unchanged and
// compares them with the parent restore point: a difference means CBT
// missed a write, and the disk is read whole.

// Tags of the verification on a restore point.
const (
	// tagCBTRound is the verification round: the parent's plus one. The
	// sample of round r is every block i with (i / G) mod S == r mod S
	// (verifySample says what G is).
	tagCBTRound = "cbt.verify.round"
	// tagCBTVerify is "ok <blocks>" or "mismatch <differing>/<blocks>" per
	// disk, absent when the disk was not read incrementally.
	tagCBTVerify = "disk.%d.cbt_verify"
	// tagFullReason says why a disk was not read incrementally.
	tagFullReason = "disk.%d.full_reason"
	// tagIncrementals counts the incremental backups since the last full
	// one (0 on a full); tagFullTime is when that full one ran (RFC 3339).
	tagIncrementals = "chain.incrementals"
	tagFullTime     = "chain.full_time"
)

const (
	// DefaultCBTVerifyFraction is the share of CBT-unchanged blocks
	// re-read per incremental backup (0.5 %: every block within 200
	// backups).
	DefaultCBTVerifyFraction = 0.005
	// DefaultCBTVerifyBlock is the unit of the sample.
	DefaultCBTVerifyBlock = 64 << 10
	// cbtBoundary: a disk grown across 128 GiB with CBT on may report
	// wrong changes (VMware KB 2090639).
	cbtBoundary = 128 << 30
)

// ErrCBTMismatch is what a disk read returns when the sample found a block
// CBT called unchanged that differs from the parent; the engine then reads
// the disk whole.
var ErrCBTMismatch = errors.New("backup: changed block tracking missed changes")

// cbtDistrust says why the change ids of a disk cannot be trusted for an
// incremental on top of the parent ("" when they can). A change id is
// "<uuid>/<sequence>" (the UUID identifies the tracking epoch).
func cbtDistrust(parentID, curID string, parentCap, curCap int64) string {
	if parentCap != curCap {
		if parentCap <= cbtBoundary && curCap > cbtBoundary {
			return fmt.Sprintf("the disk grew across the 128 GB boundary (%d -> %d bytes), where CBT is known to lose changes", parentCap, curCap)
		}
		return fmt.Sprintf("the disk was resized (%d -> %d bytes)", parentCap, curCap)
	}
	if curID == "*" {
		return "changed block tracking was reset (the snapshot's change id is \"*\")"
	}
	pe, ps, pok := splitChangeID(parentID)
	ce, cs, cok := splitChangeID(curID)
	if !pok || !cok {
		return "" // an unknown form: QueryChangedDiskAreas decides
	}
	if pe != ce {
		return fmt.Sprintf("the change id is from another CBT epoch (%s, the parent recorded %s): tracking was reset (snapshot revert, storage migration or CBT switched off and on)", curID, parentID)
	}
	if cs < ps {
		return fmt.Sprintf("the change id went back (%s, the parent recorded %s): the VM was reverted to a snapshot", curID, parentID)
	}
	return ""
}

// splitChangeID splits "52 1f … 9a/41" into its epoch and sequence.
func splitChangeID(id string) (string, int64, bool) {
	i := strings.LastIndexByte(id, '/')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return id[:i], n, true
}

// Sampled blocks come in runs of up to verifyGroupMax consecutive blocks
// (1 MiB at the default 64 KiB), as long as a round still samples at least
// verifyMinGroups runs. Why: the parent's bytes come from ~1 MiB chunks
// that are decoded and verified whole, so a lone 64 KiB block cost 16
// times its size in zstd and HMAC (measured: BenchmarkCBTVerify, 0.5 % of
// a disk cost as much CPU as restoring 8 % of it), and on vSphere each
// block read is a round trip. The coverage does not change: every block
// is still sampled exactly once every S rounds.
const (
	verifyGroupMax  = 16
	verifyMinGroups = 16
)

// verifyGroup is G, the number of consecutive blocks in one class: the
// largest up to verifyGroupMax that leaves verifyMinGroups runs per round
// (1 on small disks, which keeps their sample spread out).
func verifyGroup(size, block, stride int64) int64 {
	blocks := (size + block - 1) / block
	return min(max(blocks/(stride*verifyMinGroups), 1), verifyGroupMax)
}

// verifySample picks the blocks of round's class that CBT reports
// unchanged: block i (of size block) is in class (i / G) mod S,
// S = 1/fraction, G = verifyGroup, so each block is sampled once every S
// rounds. changed must be sorted. One extent per block, in disk order.
func verifySample(size int64, changed []dedup.Extent, round int64, fraction float64, block int64) []dedup.Extent {
	if fraction <= 0 || block <= 0 || size <= 0 {
		return nil
	}
	stride := int64(1)
	if fraction < 1 {
		stride = int64(math.Round(1 / fraction))
	}
	g := verifyGroup(size, block, stride)
	var out []dedup.Extent
	c := 0
	for grp := round % stride; grp*g*block < size; grp += stride {
		for i := grp * g; i < (grp+1)*g && i*block < size; i++ {
			off := i * block
			end := min(off+block, size)
			for c < len(changed) && changed[c].Offset+changed[c].Length <= off {
				c++
			}
			if c < len(changed) && changed[c].Offset < end {
				continue // CBT says it changed: it is read anyway
			}
			out = append(out, dedup.Extent{Offset: off, Length: end - off})
		}
	}
	return out
}

// sampleRuns joins the adjacent blocks of a sample into reads of at most
// maxRun bytes: one read of each side per run instead of per block.
func sampleRuns(sample []dedup.Extent, maxRun int64) [][]dedup.Extent {
	var runs [][]dedup.Extent
	var start int64
	for i, x := range sample {
		if n := len(runs); i > 0 && n > 0 {
			run := runs[n-1]
			last := run[len(run)-1]
			if last.Offset+last.Length == x.Offset && x.Offset+x.Length-start <= maxRun {
				runs[n-1] = append(run, x)
				continue
			}
		}
		runs = append(runs, []dedup.Extent{x})
		start = x.Offset
	}
	return runs
}

// verifyResult is one disk's verification.
type verifyResult struct {
	Blocks     int
	Mismatched int
	First      int64 // offset of the first differing block
}

// verifyParallel bounds the sample reads in flight: the blocks are
// scattered, so one at a time each would cost a round trip.
const verifyParallel = 4

// verifyRunMax bounds one read of adjacent sampled blocks (and so the
// buffers: 2 x verifyParallel x 1 MiB).
const verifyRunMax = 1 << 20

// verifyBlocks compares the sampled blocks of the source with the parent,
// block by block, reading adjacent blocks together. Both readers must be
// safe for concurrent use (the datastore reader, the NFC staging file and
// the repository's disk reader are).
func verifyBlocks(ctx context.Context, src, parent io.ReaderAt, sample []dedup.Extent) (verifyResult, error) {
	res := verifyResult{Blocks: len(sample), First: -1}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(verifyParallel)
	for _, run := range sampleRuns(sample, verifyRunMax) {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			off := run[0].Offset
			n := run[len(run)-1].Offset + run[len(run)-1].Length - off
			a, b := make([]byte, n), make([]byte, n)
			if err := readFull(src, a, off); err != nil {
				return fmt.Errorf("read sample at %d from vSphere: %w", off, err)
			}
			if err := readFull(parent, b, off); err != nil {
				return fmt.Errorf("read sample at %d from the parent point: %w", off, err)
			}
			for _, x := range run {
				lo, hi := x.Offset-off, x.Offset-off+x.Length
				if bytes.Equal(a[lo:hi], b[lo:hi]) {
					continue
				}
				mu.Lock()
				res.Mismatched++
				if res.First < 0 || x.Offset < res.First {
					res.First = x.Offset
				}
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return verifyResult{}, err
	}
	return res, nil
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// unionExtents returns the sorted union of two extent lists.
func unionExtents(a, b []dedup.Extent) []dedup.Extent {
	all := append(append([]dedup.Extent(nil), a...), b...)
	if len(all) == 0 {
		return nil
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Offset < all[j].Offset })
	out := []dedup.Extent{all[0]}
	for _, x := range all[1:] {
		last := &out[len(out)-1]
		if x.Offset <= last.Offset+last.Length {
			last.Length = max(last.Length, x.Offset+x.Length-last.Offset)
			continue
		}
		out = append(out, x)
	}
	return out
}

// diskPlan is what BackupVM decides for all the disks of a VM.
type diskPlan struct {
	round      int64  // CBT verification round (the sample's class)
	activeFull string // why this backup is an active full ("" if not)
	transport  Transport
}

// activeFullReason says why this backup of the VM must be an active full
// (every disk read whole, CBT not consulted), "" when it need not.
func activeFullReason(req Request, parent *repository.Point, now time.Time) string {
	if parent == nil {
		return "" // a first backup reads everything anyway
	}
	if n := req.ActiveFullEvery; n > 0 {
		inc, _ := strconv.Atoi(parent.Tags[tagIncrementals])
		if inc+1 >= n {
			return fmt.Sprintf("active full: the job reads every disk whole every %d backups", n)
		}
	}
	if after := req.ActiveFullAfter; after > 0 {
		last := parent.Time
		if t, err := time.Parse(time.RFC3339, parent.Tags[tagFullTime]); err == nil {
			last = t
		}
		if now.Sub(last) >= after {
			return fmt.Sprintf("active full: the last full backup is from %s and the job asks for one every %s",
				last.UTC().Format(time.RFC3339), after)
		}
	}
	return ""
}

// chainTags records how many incrementals follow the last full backup and
// when that one ran (what the active-full rules count).
func chainTags(tags map[string]string, parent *repository.Point, mode string, when time.Time) {
	if mode != ModeIncremental || parent == nil {
		tags[tagIncrementals] = "0"
		tags[tagFullTime] = when.UTC().Format(time.RFC3339)
		return
	}
	inc, _ := strconv.Atoi(parent.Tags[tagIncrementals])
	tags[tagIncrementals] = strconv.Itoa(inc + 1)
	if ft := parent.Tags[tagFullTime]; ft != "" {
		tags[tagFullTime] = ft
	} else {
		tags[tagFullTime] = parent.Time.UTC().Format(time.RFC3339)
	}
}
