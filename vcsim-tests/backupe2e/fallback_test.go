package backupe2e

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// TestFallbacks: whenever the parent cannot serve an incremental, the
// engine reads the allocated areas (or the whole disk) and the restore point
// is still exactly the disk.
func TestFallbacks(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 8 << 20})
	c := connect(t, l)
	rng := rand.New(rand.NewPCG(5, 6))
	tests := []struct {
		name   string
		vm     string
		engine func(*backup.EngineOptions)
		// between runs after the first backup; returns the repository to use
		// for the second backup (nil: the same).
		between  func(t *testing.T, r *repository.Repository, first backup.Result) *repository.Repository
		wantMode string
		reason   string // expected in the warnings ("" for none)
		parent   func(first backup.Result) string
	}{
		{name: "parent missing", vm: "DC0_H0_VM0", wantMode: backup.ModeAllocated,
			between: func(t *testing.T, r *repository.Repository, first backup.Result) *repository.Repository {
				return labtest.Repo(t)
			}},
		{name: "newest point partial", vm: "DC0_H0_VM1", wantMode: backup.ModeIncremental,
			between: func(t *testing.T, r *repository.Repository, first backup.Result) *repository.Repository {
				// A partial point after the good one must never be a parent.
				ctx := context.Background()
				p, err := r.Point(ctx, first.RestorePoint)
				must(t, err)
				s, err := r.NewSession(ctx)
				must(t, err)
				_, err = s.Commit(ctx, repository.NewPoint{VM: p.VM, Time: time.Now(), Disks: p.Disks, Partial: true})
				must(t, err)
				return nil
			},
			parent: func(first backup.Result) string { return first.RestorePoint }},
		{name: "CBT reset (disabled and re-enabled)", vm: "DC0_C0_RP0_VM0", wantMode: backup.ModeAllocated, reason: "another CBT epoch",
			between: func(t *testing.T, r *repository.Repository, first backup.Result) *repository.Repository {
				setCBT(t, l, "DC0_C0_RP0_VM0", false)
				setCBT(t, l, "DC0_C0_RP0_VM0", true)
				return nil
			}},
		{name: "disk resized", vm: "DC0_C0_RP0_VM1", wantMode: backup.ModeAllocated, reason: "resized",
			between: func(t *testing.T, r *repository.Repository, first backup.Result) *repository.Repository {
				must(t, l.ResizeDisk("DC0_C0_RP0_VM1", 0, 12<<20))
				write(t, l, "DC0_C0_RP0_VM1", 0, 12<<20-8192, randomData(rng, 8192))
				return nil
			}},
		{name: "CBT off", vm: "DC0_H0_VM0", wantMode: backup.ModeFull, reason: "tracking is off",
			engine: func(o *backup.EngineOptions) { o.KeepCBTOff = true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "CBT off" {
				setCBT(t, l, tc.vm, false)
			}
			r := labtest.Repo(t)
			mods := []func(*backup.EngineOptions){}
			if tc.engine != nil {
				mods = append(mods, tc.engine)
			}
			e := newEngine(t, c, r, mods...)
			write(t, l, tc.vm, 0, 0, randomData(rng, 1<<20))
			write(t, l, tc.vm, 0, 6<<20, randomData(rng, 512<<10))
			first := run(t, e, tc.vm)
			labtest.SameBytes(t, "first", labtest.PointDisk(t, r, first.RestorePoint, 0), diskImage(t, l, tc.vm, 0))
			r2 := r
			if tc.between != nil {
				if nr := tc.between(t, r, first); nr != nil {
					r2 = nr
				}
			}
			write(t, l, tc.vm, 0, 3<<20, randomData(rng, 300<<10))
			img := diskImage(t, l, tc.vm, 0)
			res := run(t, newEngine(t, c, r2, mods...), tc.vm)
			if res.Mode != tc.wantMode {
				t.Errorf("mode %s, want %s (warnings %q)", res.Mode, tc.wantMode, res.Warnings)
			}
			if tc.reason != "" && !hasWarning(res.Warnings, tc.reason) {
				t.Errorf("warnings %q do not say %q", res.Warnings, tc.reason)
			}
			if tc.parent != nil && res.Parent != tc.parent(first) {
				t.Errorf("parent %s, want %s", res.Parent, tc.parent(first))
			}
			labtest.SameBytes(t, "after fallback", labtest.PointDisk(t, r2, res.RestorePoint, 0), img)
			noSnapshots(t, l, tc.vm)
			// And the next one is incremental again (unless CBT stays off).
			write(t, l, tc.vm, 0, 100<<10, randomData(rng, 4096))
			img = diskImage(t, l, tc.vm, 0)
			res = run(t, newEngine(t, c, r2, mods...), tc.vm)
			if want := map[bool]string{true: backup.ModeFull, false: backup.ModeIncremental}[tc.name == "CBT off"]; res.Mode != want {
				t.Errorf("third backup mode %s, want %s (%q)", res.Mode, want, res.Warnings)
			}
			labtest.SameBytes(t, "third", labtest.PointDisk(t, r2, res.RestorePoint, 0), img)
		})
	}
}

// TestMultiDiskAddRemove: three disks of different sizes and an independent
// one (skipped with a warning); then a disk added (read in full, the others
// incremental) and one removed.
func TestMultiDiskAddRemove(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r)
	const vm = "multi"
	sizes := []int64{4 << 20, 12 << 20, 20 << 20, 4 << 20}
	createVM(t, l, c, vm, sizes...)
	ovm := adminVM(t, l, vm)
	indep := vmDisks(t, ovm)[3]
	indep.Backing.(*types.VirtualDiskFlatVer2BackingInfo).DiskMode = string(types.VirtualDiskModeIndependent_persistent)
	must(t, ovm.EditDevice(context.Background(), indep))
	rng := rand.New(rand.NewPCG(7, 8))
	for i, s := range sizes[:3] {
		write(t, l, vm, i, 0, randomData(rng, 256<<10))
		write(t, l, vm, i, s-64<<10, randomData(rng, 64<<10))
	}
	imgs := func(n int) [][]byte {
		var out [][]byte
		for i := range n {
			out = append(out, diskImage(t, l, vm, i))
		}
		return out
	}
	want := imgs(3)
	res := run(t, e, vm)
	if len(res.Disks) != 3 || !hasWarning(res.Warnings, "skipped: independent") {
		t.Fatalf("disks %d, warnings %q: want 3 disks and the independent one skipped", len(res.Disks), res.Warnings)
	}
	for i := range 3 {
		if res.Disks[i].Capacity != sizes[i] {
			t.Errorf("disk %d capacity %d, want %d", i, res.Disks[i].Capacity, sizes[i])
		}
		labtest.SameBytes(t, "multi-disk", labtest.PointDisk(t, r, res.RestorePoint, i), want[i])
	}
	// The configuration blob describes all four disks, NICs, CPUs.
	p, err := r.Point(context.Background(), res.RestorePoint)
	must(t, err)
	blob, err := r.LoadBlob(context.Background(), p.ConfigID)
	must(t, err)
	cfg, err := backup.DecodeVMConfig(blob)
	must(t, err)
	if cfg.Name != vm || cfg.NumCPU != 2 || cfg.MemoryMB != 256 || len(cfg.Disks) != 4 || cfg.Disks[3].Skipped == "" ||
		cfg.Disks[3].Index != -1 || cfg.Disks[2].CapacityBytes != sizes[2] || len(cfg.Controllers) == 0 || cfg.GuestID == "" ||
		cfg.Firmware != "efi" || cfg.Annotation != "made by backupe2e" || cfg.CoresPerSocket != 2 ||
		cfg.ExtraConfig["disk.EnableUUID"] != "TRUE" || cfg.ExtraConfig["guestinfo.scratch"] != "" {
		t.Errorf("captured configuration = %+v", cfg)
	}
	for _, c := range cfg.Controllers {
		if c.Model == "" {
			t.Errorf("controller %d (%s) recorded without its model", c.Key, c.Type)
		}
	}

	// Remove disk 1 (12 MiB) and add a new 8 MiB disk.
	removeDisk(t, l, vm, 1)
	addDisk(t, l, vm, 8<<20)
	// Disks now: 4 MiB, 20 MiB, independent, new.
	write(t, l, vm, 3, 1<<20, randomData(rng, 1<<20))
	write(t, l, vm, 0, 0, randomData(rng, 4096))
	res2 := run(t, e, vm)
	if len(res2.Disks) != 3 {
		t.Fatalf("after add/remove: %d disks, want 3", len(res2.Disks))
	}
	modes := []string{res2.Disks[0].Mode, res2.Disks[1].Mode, res2.Disks[2].Mode}
	if modes[0] != backup.ModeIncremental || modes[1] != backup.ModeIncremental || modes[2] == backup.ModeIncremental {
		t.Errorf("modes %v: want the kept disks incremental and the new one read in full", modes)
	}
	for i, lab := range []int{0, 1, 3} {
		labtest.SameBytes(t, "after add/remove", labtest.PointDisk(t, r, res2.RestorePoint, i), diskImage(t, l, vm, lab))
	}
	noSnapshots(t, l, vm)
	checkRepo(t, r)
}
