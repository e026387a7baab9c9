package backupe2e

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

const diskSize = 16 << 20

// TestFullThenIncrementals: a first backup (CBT off: the engine enables it
// and reads the allocated areas), then six incrementals with scattered
// 4 KiB writes, a large sequential write and writes at the very end of the
// disk between them. Every restore point reads back byte-identical to the
// disk at its snapshot, and each incremental reads exactly the CBT blocks
// that changed.
func TestFullThenIncrementals(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: diskSize})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r)
	const vm = "DC0_H0_VM0"
	rng := rand.New(rand.NewPCG(1, 2))

	// A sparse disk: data in a few places, holes elsewhere.
	write(t, l, vm, 0, 0, randomData(rng, 1<<20))
	write(t, l, vm, 0, 5<<20, randomData(rng, 3<<20))
	write(t, l, vm, 0, diskSize-200<<10, randomData(rng, 200<<10))

	want := map[string][32]byte{}
	first := diskImage(t, l, vm, 0)
	res := run(t, e, vm)
	if res.Mode != backup.ModeAllocated || !res.EnabledCBT {
		t.Errorf("first backup: mode %s, enabled CBT %v; want allocated after enabling CBT", res.Mode, res.EnabledCBT)
	}
	if res.BytesRead >= diskSize/2 || res.BytesRead < 4<<20 {
		t.Errorf("first backup read %d bytes of a disk with about 4.2 MiB allocated", res.BytesRead)
	}
	if res.Consistency != backup.ConsistencyFilesystem {
		t.Errorf("consistency %q, want filesystem (Tools running, Linux-like guest)", res.Consistency)
	}
	labtest.SameBytes(t, "full backup", labtest.PointDisk(t, r, res.RestorePoint, 0), first)
	p, err := r.Point(context.Background(), res.RestorePoint)
	must(t, err)
	blob, err := r.LoadBlob(context.Background(), p.ConfigID)
	must(t, err)
	cfg, err := backup.DecodeVMConfig(blob)
	must(t, err)
	if len(cfg.NICs) == 0 || cfg.NICs[0].Type == "" || cfg.NICs[0].Network == "" || cfg.NumCPU == 0 || cfg.MemoryMB == 0 || cfg.Disks[0].Unit < 0 {
		t.Errorf("captured configuration %+v", cfg)
	}
	if p.Disks[0].ChangeID == "" || p.Disks[0].Stats.Mode != backup.ModeAllocated || p.Tags["timing.total"] == "" {
		t.Errorf("restore point disk %+v, tags %v", p.Disks[0], p.Tags)
	}
	want[res.RestorePoint] = sum(first)
	noSnapshots(t, l, vm)

	prev := res.RestorePoint
	for round := 1; round <= 6; round++ {
		blocks := map[int64]bool{}
		var written int64
		put := func(off int64, n int) {
			write(t, l, vm, 0, off, randomData(rng, n))
			markBlocks(blocks, off, n)
			written += int64(n)
		}
		switch round % 3 {
		case 1: // scattered 4 KiB writes
			for range 40 {
				put(rng.Int64N(diskSize/4096)*4096, 4096)
			}
		case 2: // one large sequential write
			put(rng.Int64N(diskSize/2), 3<<20)
		case 0: // the last bytes of the disk, and the very first
			put(diskSize-4096, 4096)
			put(diskSize-100, 100)
			put(0, 512)
		}
		img := diskImage(t, l, vm, 0)
		res := run(t, e, vm)
		if res.Mode != backup.ModeIncremental || res.Parent != prev {
			t.Fatalf("round %d: mode %s parent %s, want incremental on %s (warnings %q)", round, res.Mode, res.Parent, prev, res.Warnings)
		}
		if got, want := res.BytesRead, cbtBlocks(blocks); got != want {
			t.Errorf("round %d: read %d bytes for %d changed bytes in %d CBT blocks (%d bytes)", round, got, written, len(blocks), want)
		}
		labtest.SameBytes(t, "incremental", labtest.PointDisk(t, r, res.RestorePoint, 0), img)
		want[res.RestorePoint] = sum(img)
		prev = res.RestorePoint
		noSnapshots(t, l, vm)
	}
	// Every point still reads back as it was (incrementals share chunks).
	for id, h := range want {
		if sum(labtest.PointDisk(t, r, id, 0)) != h {
			t.Errorf("restore point %s changed after later backups", id)
		}
	}
	checkRepo(t, r)
}

// TestWritesDuringBackupStayOut: writes the guest makes after the snapshot
// (here: while the disks are being read) are not in that restore point, and
// the next incremental picks them up.
func TestWritesDuringBackupStayOut(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 8 << 20})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r)
	const vm = "DC0_H0_VM0"
	rng := rand.New(rand.NewPCG(3, 4))
	write(t, l, vm, 0, 0, randomData(rng, 8<<20))
	before := diskImage(t, l, vm, 0)
	late := randomData(rng, 256<<10)
	wrote := false
	res := run(t, e, vm, func(q *backup.Request) {
		q.Progress = func(p backup.VMProgress) {
			if p.Phase == "disks" && !wrote {
				wrote = true
				write(t, l, vm, 0, 1<<20, late)
				write(t, l, vm, 0, 8<<20-4096, late[:4096])
			}
		}
	})
	if !wrote {
		t.Fatal("progress never reported the disks phase")
	}
	labtest.SameBytes(t, "point taken before the writes", labtest.PointDisk(t, r, res.RestorePoint, 0), before)
	after := diskImage(t, l, vm, 0)
	if string(after[1<<20:1<<20+len(late)]) != string(late) {
		t.Fatal("the guest's writes were lost when the snapshot was removed")
	}
	res2 := run(t, e, vm)
	if res2.Mode != backup.ModeIncremental {
		t.Errorf("second backup mode %s", res2.Mode)
	}
	labtest.SameBytes(t, "next incremental", labtest.PointDisk(t, r, res2.RestorePoint, 0), after)
	_ = context.Background
}
