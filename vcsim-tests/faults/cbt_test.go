package faults

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// TestCBTVerificationCatchesUnderReporting: the lab's CBT stops reporting
// writes to one block. With a 25 % sample (4 classes, rotating by round)
// the lie goes unseen by the rounds whose sample misses that block — the
// points really are wrong, which proves the lab lies — and is caught at the
// round whose class holds it: an alert on the point, the disk read whole
// (that point is right), the next backup read whole too, then incrementals
// again.
func TestCBTVerificationCatchesUnderReporting(t *testing.T) {
	for _, reader := range []string{backup.ReaderDatastore, backup.ReaderNFC} {
		t.Run(reader, func(t *testing.T) { underReport(t, reader) })
	}
}

func underReport(t *testing.T, reader string) {
	l := startLab(t, lab.Options{DiskCapacity: 4 << 20})
	if reader == backup.ReaderNFC {
		must(t, l.SetDatastoreType(ds0, "vsan")) // no flat extent: NFC export
	}
	c := connect(t, l)
	r := newRepo(t)
	const block = 64 << 10
	e := newBackup(c, r, func(o *backup.EngineOptions) { o.CBTVerifyFraction, o.CBTVerifyBlock = 0.25, block })
	ctx := context.Background()
	const vm = "DC0_H0_VM0"
	rng := rand.New(rand.NewPCG(5, 5))
	write(t, l, vm, 0, randomData(rng, 4<<20))
	setCBT(t, l, vm, true)
	backupOK := func() backup.Result {
		t.Helper()
		res, err := e.BackupVM(ctx, backup.Request{VM: vm})
		if err != nil {
			t.Fatalf("backup: %v", err)
		}
		return res
	}
	if res := backupOK(); res.Mode == backup.ModeIncremental {
		t.Fatalf("first backup %s", res.Mode)
	}

	// Block 39 is in class 3: rounds 1 and 2 do not sample it, round 3 does.
	const hidden = 39 * block
	must(t, l.UnderReportCBT(vm, 0, hidden, block))
	write(t, l, vm, hidden, randomData(rng, block))
	for round := 1; round <= 5; round++ {
		write(t, l, vm, 2*block, randomData(rng, 4096)) // a change CBT does report
		img := diskImage(t, l, vm)
		res := backupOK()
		d := res.Disks[0]
		p, err := r.Point(ctx, res.RestorePoint)
		must(t, err)
		got := labtest.PointDisk(t, r, res.RestorePoint, 0)
		tag := p.Tags[fmt.Sprintf("disk.%d.cbt_verify", d.Key)]
		t.Logf("round %d: mode %s verified %d mismatched %d tag %q reason %q", round, res.Mode, d.VerifiedBlocks, d.MismatchedBlocks, tag, d.Reason)
		if d.Reader != reader {
			t.Fatalf("round %d: disk read through %s, want %s", round, d.Reader, reader)
		}
		if p.Tags["cbt.verify.round"] != fmt.Sprint(round) {
			t.Errorf("round %d: point records round %q", round, p.Tags["cbt.verify.round"])
		}
		switch round {
		case 1, 2:
			if res.Mode != backup.ModeIncremental || res.CBTMismatch || d.VerifiedBlocks == 0 {
				t.Fatalf("round %d: mode %s, mismatch %v, %d verified", round, res.Mode, res.CBTMismatch, d.VerifiedBlocks)
			}
			if bytes.Equal(got[hidden:hidden+block], img[hidden:hidden+block]) {
				t.Fatalf("round %d: the point has the hidden write: the lab did not under-report", round)
			}
			labtest.SameBytes(t, "outside the hidden block", got[:hidden], img[:hidden])
		case 3:
			if !res.CBTMismatch || d.MismatchedBlocks != 1 || res.Mode != backup.ModeFull {
				t.Fatalf("round 3: mismatch %v (%d blocks), mode %s: the sample holding block 39 did not catch it", res.CBTMismatch, d.MismatchedBlocks, res.Mode)
			}
			if !hasWarning(res.Warnings, "CBT verification failed") || !hasWarning(p.Warnings, "CBT verification failed") {
				t.Errorf("no alert: result %q, point %q", res.Warnings, p.Warnings)
			}
			if !strings.HasPrefix(tag, "mismatch 1/") || !strings.Contains(p.Tags[fmt.Sprintf("disk.%d.full_reason", d.Key)], "CBT verification") {
				t.Errorf("point tags %v", p.Tags)
			}
			labtest.SameBytes(t, "the point read whole after the mismatch", got, img)
		case 4:
			if res.Mode != backup.ModeFull || !strings.Contains(d.Reason, "CBT verification found writes CBT had missed") || res.CBTMismatch {
				t.Errorf("round 4: mode %s, reason %q, mismatch %v: want the whole disk read", res.Mode, d.Reason, res.CBTMismatch)
			}
			labtest.SameBytes(t, "round 4", got, img)
		case 5:
			if res.Mode != backup.ModeIncremental || res.CBTMismatch || !strings.HasPrefix(tag, "ok ") {
				t.Errorf("round 5: mode %s, mismatch %v, tag %q: want a verified incremental", res.Mode, res.CBTMismatch, tag)
			}
			labtest.SameBytes(t, "round 5", got, img)
		}
	}
	noSnapshots(t, l, vm)
	repoClean(t, r)
}

// TestActiveFull: a job asking for an active full every 3 backups gets
// full, incremental, incremental, full (whole disk, CBT not consulted).
func TestActiveFull(t *testing.T) {
	l := startLab(t, lab.Options{DiskCapacity: 2 << 20})
	c := connect(t, l)
	r := newRepo(t)
	e := newBackup(c, r)
	const vm = "DC0_H0_VM0"
	rng := rand.New(rand.NewPCG(6, 6))
	write(t, l, vm, 0, randomData(rng, 1<<20))
	setCBT(t, l, vm, true)
	want := []string{backup.ModeAllocated, backup.ModeIncremental, backup.ModeIncremental, backup.ModeFull, backup.ModeIncremental}
	for i, w := range want {
		write(t, l, vm, int64(i)<<16, randomData(rng, 4096))
		img := diskImage(t, l, vm)
		res, err := e.BackupVM(context.Background(), backup.Request{VM: vm, ActiveFullEvery: 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mode != w {
			t.Errorf("backup %d: mode %s, want %s (warnings %q)", i, res.Mode, w, res.Warnings)
		}
		if w == backup.ModeFull && !hasWarning(res.Warnings, "active full") {
			t.Errorf("backup %d: warnings %q do not say active full", i, res.Warnings)
		}
		labtest.SameBytes(t, fmt.Sprintf("backup %d", i), labtest.PointDisk(t, r, res.RestorePoint, 0), img)
	}
	repoClean(t, r)
}
