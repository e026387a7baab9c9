package filerestore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore/catalog"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

// loopDisk makes the audit's hostile image: an 8 MiB ext4 made by
// mkfs.ext4 -d with hi.txt, and two hard links to the root planted by
// debugfs, so that /x1, /x2, /x1/x1, ... are all the root again.
func loopDisk(t *testing.T) string {
	t.Helper()
	guestfstest.Need(t, false, "mkfs.ext4", "debugfs", "sgdisk", "dd")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "etc"), 0o755)
	os.WriteFile(filepath.Join(src, "hi.txt"), []byte("hi\n"), 0o644)
	os.WriteFile(filepath.Join(src, "etc", "hostname"), []byte("loop\n"), 0o644)
	fsimg := filepath.Join(dir, "ext4.img")
	guestfstest.Ext4(t, fsimg, src, 8)
	guestfstest.Run(t, "debugfs", "-w", "-R", "ln / /x1", fsimg)
	guestfstest.Run(t, "debugfs", "-w", "-R", "ln / /x2", fsimg)
	disk := filepath.Join(dir, "disk.img")
	guestfstest.GPT(t, disk, 10, guestfstest.Part{SizeMiB: 8, Type: "8300", Image: fsimg})
	return disk
}

// Two hard links to the root made the indexer walk 2^256 paths and fill
// the state disk (audit 2, defect 1). Each directory is now entered once:
// the pass ends, hi.txt is found once and the catalog says why /x1 and /x2
// were not entered.
func TestCatalogDirectoryLoop(t *testing.T) {
	r := repository.TestRepository(t)
	p := frtest.Backup(t, r, "loop01", time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), loopDisk(t))
	s, err := New(Config{Source: Single("main", r), CatalogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Before the fix this pass never ended: the deadline turns a hang
	// into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen int64
	if err := s.IndexPending(ctx, func(_, _ string, n int64) { seen = max(seen, n) }); err != nil {
		t.Fatalf("index: %v", err)
	}
	res, err := s.Search(ctx, catalog.Query{Pattern: "hi.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 1 || res.Hits[0].Path != "/hi.txt" || len(res.Pending) != 0 || len(res.Partial) != 0 {
		t.Fatalf("search: %+v", res)
	}
	if seen > 20 {
		t.Errorf("%d entries indexed for a volume of five names", seen)
	}
	st, _, _ := s.idx.store("main")
	pi, err := st.Point(p.ID)
	if err != nil {
		t.Fatal(err)
	}
	loops := 0
	for _, e := range pi.Errors {
		if strings.Contains(e, "directory hard link or loop") {
			loops++
		}
	}
	if !pi.Complete || loops != 2 {
		t.Errorf("catalog: complete %v, loop notes %d in %q", pi.Complete, loops, pi.Errors)
	}
}

// tickingClock moves on by step at every reading: a walk that looks at the
// clock sees time pass without the test sleeping.
type tickingClock struct {
	*clock.Fake
	step time.Duration
}

func (c tickingClock) Now() time.Time { c.Fake.Advance(c.step); return c.Fake.Now() }

// A point over its budget (entries or time) keeps what was indexed, is
// marked partial with the reason, is not tried again, and the next point
// is indexed in full.
func TestCatalogBudget(t *testing.T) {
	small := filepath.Join(t.TempDir(), "small")
	os.MkdirAll(filepath.Join(small, "etc"), 0o755)
	os.WriteFile(filepath.Join(small, "etc", "small.conf"), []byte("x\n"), 0o644)
	smallDisk := frtest.Ext4Disk(t, small)
	big := filepath.Join(t.TempDir(), "big")
	guestfstest.MakeTree(t, big, guestfstest.Options{BigDir: 3000})
	os.WriteFile(filepath.Join(big, "zz-big.conf"), []byte("x\n"), 0o644)
	bigDisk := frtest.Ext4Disk(t, big)

	for _, tc := range []struct {
		name   string
		cfg    Config
		reason string
	}{
		{"entries", Config{IndexMaxEntries: 1000}, "more than 1000 entries"},
		{"time", Config{IndexMaxTime: 30 * time.Minute, Clock: tickingClock{clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), time.Hour}}, "longer than 30m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := repository.TestRepository(t)
			pBig := frtest.Backup(t, r, "big01", time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), bigDisk)
			pSmall := frtest.Backup(t, r, "small01", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), smallDisk)
			cfg := tc.cfg
			cfg.Source, cfg.CatalogDir = Single("main", r), t.TempDir()
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			if err := s.IndexPending(ctx, nil); err != nil {
				t.Fatal(err)
			}
			res, err := s.Search(ctx, catalog.Query{Pattern: "*.conf"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Partial) != 1 || res.Partial[0].RestorePoint != pBig.ID || !strings.Contains(res.Partial[0].Reason, tc.reason) {
				t.Fatalf("partial: %+v", res.Partial)
			}
			var found []string
			for _, h := range res.Hits {
				found = append(found, h.VM+":"+h.Path)
			}
			if len(res.Pending) != 0 || !strings.Contains(strings.Join(found, " "), "small01:/etc/small.conf") {
				t.Errorf("the small point after the big one: pending %v, hits %v", res.Pending, found)
			}
			// Not tried again: a second pass leaves the partial catalog as it is.
			st, _, _ := s.idx.store("main")
			before, _ := st.Point(pBig.ID)
			if err := s.IndexPending(ctx, nil); err != nil {
				t.Fatal(err)
			}
			after, _ := st.Point(pBig.ID)
			if !after.Complete || after.Partial == "" || !after.BuiltAt.Equal(before.BuiltAt) || after.Files > 1000 && tc.name == "entries" {
				t.Errorf("partial point rebuilt or unmarked: before %+v after %+v", before, after)
			}
			if sp, _ := st.Point(pSmall.ID); !sp.Complete || sp.Partial != "" {
				t.Errorf("small point: %+v", sp)
			}
		})
	}
}
