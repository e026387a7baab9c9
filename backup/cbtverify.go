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
	// sample of round r is every block i with i mod S == r mod S.
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

// verifySample picks the blocks of round's class that CBT reports
// unchanged: block i (of size block) is in class i mod S, S = 1/fraction,
// so each block is sampled once every S rounds. changed must be sorted.
func verifySample(size int64, changed []dedup.Extent, round int64, fraction float64, block int64) []dedup.Extent {
	if fraction <= 0 || block <= 0 || size <= 0 {
		return nil
	}
	stride := int64(1)
	if fraction < 1 {
		stride = int64(math.Round(1 / fraction))
	}
	var out []dedup.Extent
	c := 0
	for i := round % stride; i*block < size; i += stride {
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
	return out
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

// verifyBlocks compares the sampled blocks of the source with the parent.
// Both readers must be safe for concurrent use (the datastore reader, the
// NFC staging file and the repository's disk reader are).
func verifyBlocks(ctx context.Context, src, parent io.ReaderAt, sample []dedup.Extent) (verifyResult, error) {
	res := verifyResult{Blocks: len(sample), First: -1}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(verifyParallel)
	for _, x := range sample {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			a, b := make([]byte, x.Length), make([]byte, x.Length)
			if err := readFull(src, a, x.Offset); err != nil {
				return fmt.Errorf("read sample at %d from vSphere: %w", x.Offset, err)
			}
			if err := readFull(parent, b, x.Offset); err != nil {
				return fmt.Errorf("read sample at %d from the parent point: %w", x.Offset, err)
			}
			if !bytes.Equal(a, b) {
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
