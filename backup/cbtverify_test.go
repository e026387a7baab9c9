package backup

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
)

func TestCBTDistrust(t *testing.T) {
	const e1, e2 = "52 aa bb cc dd ee ff 00-11 22 33 44 55 66 77 88", "52 01 02 03 04 05 06 07-08 09 0a 0b 0c 0d 0e 0f"
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name        string
		parent, cur string
		pcap, ccap  int64
		want        string // substring; "" = trusted
	}{
		{"same epoch, later", e1 + "/4", e1 + "/9", 8 * gib, 8 * gib, ""},
		{"same epoch, same sequence", e1 + "/4", e1 + "/4", 8 * gib, 8 * gib, ""},
		{"another epoch", e1 + "/4", e2 + "/9", 8 * gib, 8 * gib, "another CBT epoch"},
		{"sequence went back (revert)", e1 + "/9", e1 + "/4", 8 * gib, 8 * gib, "reverted"},
		{"reset to *", e1 + "/9", "*", 8 * gib, 8 * gib, "reset"},
		{"grown across 128 GB", e1 + "/4", e1 + "/5", 100 * gib, 200 * gib, "128 GB boundary"},
		{"grown at exactly 128 GB", e1 + "/4", e1 + "/5", 128 * gib, 128*gib + 1, "128 GB boundary"},
		{"grown below 128 GB", e1 + "/4", e1 + "/5", 8 * gib, 16 * gib, "resized"},
		{"grown above 128 GB", e1 + "/4", e1 + "/5", 200 * gib, 300 * gib, "resized"},
		{"unknown form", "opaque", "opaque2", 8 * gib, 8 * gib, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cbtDistrust(tc.parent, tc.cur, tc.pcap, tc.ccap)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("cbtDistrust = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestVerifySampleRotates: over 1/fraction rounds every block CBT calls
// unchanged is sampled exactly once; changed blocks never are.
func TestVerifySampleRotates(t *testing.T) {
	const block, size = 64 << 10, 100*(64<<10) + 1000 // a short last block
	changed := []dedup.Extent{{Offset: 3 * block, Length: 2 * block}, {Offset: 50*block + 10, Length: 1}}
	seen := map[int64]int{}
	for round := int64(0); round < 8; round++ {
		s := verifySample(size, changed, round, 0.125, block)
		if len(s) < 10 || len(s) > 13 {
			t.Errorf("round %d: %d blocks, want about 100/8", round, len(s))
		}
		for _, x := range s {
			seen[x.Offset/block]++
			if x.Offset+x.Length > size {
				t.Errorf("sample past the end: %+v", x)
			}
		}
	}
	for i := int64(0); i <= 100; i++ {
		want := 1
		if i == 3 || i == 4 || i == 50 {
			want = 0
		}
		if seen[i] != want {
			t.Errorf("block %d sampled %d times in 8 rounds, want %d", i, seen[i], want)
		}
	}
	if s := verifySample(size, nil, 0, 0, block); s != nil {
		t.Errorf("fraction 0 sampled %d blocks", len(s))
	}
}

func TestActiveFullReason(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	point := func(inc string, full time.Time) *repository.Point {
		return &repository.Point{Time: now.Add(-time.Hour), Tags: map[string]string{tagIncrementals: inc, tagFullTime: full.Format(time.RFC3339)}}
	}
	for _, tc := range []struct {
		name   string
		req    Request
		parent *repository.Point
		want   bool
	}{
		{"no parent", Request{ActiveFullEvery: 1}, nil, false},
		{"off", Request{}, point("40", now.AddDate(-1, 0, 0)), false},
		{"every 1", Request{ActiveFullEvery: 1}, point("0", now), true},
		{"every 7, after 5 incrementals", Request{ActiveFullEvery: 7}, point("5", now), false},
		{"every 7, after 6 incrementals", Request{ActiveFullEvery: 7}, point("6", now), true},
		{"30 days, last full 29 days ago", Request{ActiveFullAfter: 30 * 24 * time.Hour}, point("3", now.AddDate(0, 0, -29)), false},
		{"30 days, last full 31 days ago", Request{ActiveFullAfter: 30 * 24 * time.Hour}, point("3", now.AddDate(0, 0, -31)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := activeFullReason(tc.req, tc.parent, now)
			if (got != "") != tc.want || got != "" && !strings.HasPrefix(got, "active full") {
				t.Errorf("activeFullReason = %q, want active full %v", got, tc.want)
			}
		})
	}
}

func TestChainTags(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tags := map[string]string{}
	chainTags(tags, nil, ModeAllocated, now)
	p := &repository.Point{Time: now, Tags: tags}
	for i := 1; i <= 3; i++ {
		next := map[string]string{}
		chainTags(next, p, ModeIncremental, now.Add(time.Duration(i)*time.Hour))
		if next[tagIncrementals] != string(rune('0'+i)) || next[tagFullTime] != now.Format(time.RFC3339) {
			t.Fatalf("incremental %d: tags %v", i, next)
		}
		p = &repository.Point{Time: now.Add(time.Duration(i) * time.Hour), Tags: next}
	}
	full := map[string]string{}
	chainTags(full, p, ModeFull, now.Add(5*time.Hour))
	if full[tagIncrementals] != "0" || full[tagFullTime] != now.Add(5*time.Hour).Format(time.RFC3339) {
		t.Errorf("full after the chain: %v", full)
	}
}

func TestVerifyBlocks(t *testing.T) {
	const block = 4096
	src := make([]byte, 64*block)
	for i := range src {
		src[i] = byte(i * 7)
	}
	parent := append([]byte(nil), src...)
	parent[9*block+5] ^= 1                                        // block 9 differs
	parent[30*block+100] ^= 1                                     // block 30 differs
	sample := verifySample(int64(len(src)), nil, 1, 0.125, block) // blocks 1, 9, 17, 25, 33, …
	res, err := verifyBlocks(context.Background(), bytes.NewReader(src), bytes.NewReader(parent), sample)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != 8 || res.Mismatched != 1 || res.First != 9*block {
		t.Errorf("got %+v, want 8 blocks, 1 mismatch at %d (block 30 is not in this round)", res, 9*block)
	}
	if _, err := verifyBlocks(context.Background(), bytes.NewReader(src[:10*block]), bytes.NewReader(parent), sample); err == nil {
		t.Error("a short source read was not an error")
	}
}

// TestVerifySampleRunsOnLargeDisks: on a disk with enough blocks a round's
// sample comes in runs of verifyGroupMax consecutive blocks, and still every
// block CBT calls unchanged is sampled exactly once in 1/fraction rounds.
func TestVerifySampleRunsOnLargeDisks(t *testing.T) {
	const block, rounds = 4096, 8
	const blocks = rounds * verifyMinGroups * verifyGroupMax * 2 // G = verifyGroupMax
	const size = blocks*block - 100                              // a short last block
	changed := []dedup.Extent{{Offset: 20 * block, Length: 3 * block}, {Offset: 3000*block + 1, Length: 1}}
	if g := verifyGroup(size, block, rounds); g != verifyGroupMax {
		t.Fatalf("verifyGroup = %d, want %d", g, verifyGroupMax)
	}
	seen := map[int64]int{}
	for round := int64(0); round < rounds; round++ {
		s := verifySample(size, changed, round, 1.0/rounds, block)
		runs := sampleRuns(s, verifyGroupMax*block)
		if len(s) < blocks/rounds-4 || len(s) > blocks/rounds {
			t.Errorf("round %d: %d blocks, want about %d", round, len(s), blocks/rounds)
		}
		if len(runs) < verifyMinGroups || len(runs) > 2*verifyMinGroups+2 {
			t.Errorf("round %d: %d runs of adjacent blocks, want about %d", round, len(runs), 2*verifyMinGroups)
		}
		for _, x := range s {
			if x.Offset%block != 0 || x.Offset+x.Length > size {
				t.Errorf("round %d: sampled %+v", round, x)
			}
			if i := x.Offset / block; (i/verifyGroupMax)%rounds != round {
				t.Errorf("round %d sampled block %d of class %d", round, i, (i/verifyGroupMax)%rounds)
			}
			seen[x.Offset/block]++
		}
	}
	for i := int64(0); i < blocks; i++ {
		want := 1
		if i >= 20 && i < 23 || i == 3000 {
			want = 0
		}
		if seen[i] != want {
			t.Errorf("block %d sampled %d times in %d rounds, want %d", i, seen[i], rounds, want)
		}
	}
}

// countingReader counts ReadAt calls.
type countingReader struct {
	r     *bytes.Reader
	mu    sync.Mutex
	calls int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.r.ReadAt(p, off)
}

// TestVerifyBlocksReadsRuns: adjacent sampled blocks are read from each side
// in one call (a parent block costs the decode of its whole chunk; a source
// block a round trip), and a difference is still counted per block.
func TestVerifyBlocksReadsRuns(t *testing.T) {
	const block, rounds = 4096, 8
	const blocks = rounds * verifyMinGroups * verifyGroupMax
	src := make([]byte, blocks*block)
	for i := range src {
		src[i] = byte(i*7 + i>>12)
	}
	parent := append([]byte(nil), src...)
	sample := verifySample(int64(len(src)), nil, 3, 1.0/rounds, block)
	// Two differing blocks inside one run, one in another.
	for _, k := range []int{1, 2, 40} {
		parent[sample[k].Offset+17] ^= 1
	}
	s, p := &countingReader{r: bytes.NewReader(src)}, &countingReader{r: bytes.NewReader(parent)}
	res, err := verifyBlocks(context.Background(), s, p, sample)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != len(sample) || res.Mismatched != 3 || res.First != sample[1].Offset {
		t.Errorf("got %+v, want %d blocks, 3 mismatched, the first at %d", res, len(sample), sample[1].Offset)
	}
	want := len(sampleRuns(sample, verifyRunMax))
	if s.calls != want || p.calls != want || want > len(sample)/verifyGroupMax {
		t.Errorf("%d source and %d parent reads for %d blocks in %d runs, want one each per run", s.calls, p.calls, len(sample), want)
	}
}
