package imagebackup

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
)

// makeImage writes a sparse raw image of size bytes with random data in the
// given [offset, length) ranges, holes elsewhere.
func makeImage(t *testing.T, size int64, seed uint64, data ...[2]int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for _, d := range data {
		b := make([]byte, d[1])
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(b, d[0]); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// overwrite writes n random bytes at off into the image, as a guest would.
func overwrite(t *testing.T, path string, off, n int64, seed uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func backupOne(t *testing.T, r *repository.Repository, req Request, paths ...string) Result {
	t.Helper()
	ims, err := Open(paths)
	if err != nil {
		t.Fatal(err)
	}
	defer ims.Close()
	res, err := Backup(context.Background(), r, ims, req)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	return res
}

func restoreTo(t *testing.T, r *repository.Repository, point string, disk int) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.img")
	if _, err := Restore(context.Background(), r, RestoreRequest{Point: point, Disk: disk, Out: out}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return out
}

func sameFile(t *testing.T, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s differs from %s (%d vs %d bytes)", got, want, len(b), len(a))
	}
}

// TestRoundTrip backs up a sparse raw image and the same image converted by
// qemu-img to VMDK, restores both byte-identical and sparse, and reports
// progress up to the disk's size.
func TestRoundTrip(t *testing.T) {
	r := repository.TestRepository(t)
	raw := makeImage(t, 32<<20, 1, [2]int64{0, 3 << 20}, [2]int64{20 << 20, 1 << 20})
	images := []string{raw}
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Log("LOUD: qemu-img is absent (Makefile TEST_TOOLS installs it): the VMDK case is not run")
	} else {
		vmdk := filepath.Join(t.TempDir(), "disk.vmdk")
		if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "vmdk", "-o", "subformat=streamOptimized", raw, vmdk).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img: %v\n%s", err, out)
		}
		images = append(images, vmdk)
	}
	var mu sync.Mutex
	last := map[int]backup.Progress{}
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	res := backupOne(t, r, Request{VM: "vm1", Clock: clock.NewFake(now), Progress: func(i int, p backup.Progress) {
		mu.Lock()
		last[i] = p
		mu.Unlock()
	}}, images...)
	if res.RestorePoint == "" || len(res.Disks) != len(images) || res.VM != "vm1" || res.Parent != "" {
		t.Fatalf("result %+v", res)
	}
	for i, d := range res.Disks {
		if d.Mode != "allocated" || d.LogicalBytes != 32<<20 || d.BytesRead < 4<<20 || d.BytesRead >= 8<<20 {
			t.Errorf("disk %d: %+v (want the 4 MiB allocated read, not the 32 MiB disk)", i, d)
		}
		if p := last[i]; p.Done != p.Size || p.Size != 32<<20 {
			t.Errorf("disk %d: last progress %+v, want done == size", i, p)
		}
	}
	p, err := r.Point(context.Background(), res.RestorePoint)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Time.Equal(now) || p.Disks[0].Label != "disk.img" {
		t.Errorf("point time %v label %q", p.Time, p.Disks[0].Label)
	}
	for i := range images {
		out := restoreTo(t, r, res.RestorePoint, i)
		sameFile(t, raw, out)
		st, _ := os.Stat(out)
		if alloc := st.Sys().(*syscall.Stat_t).Blocks * 512; alloc > 8<<20 {
			t.Errorf("disk %d restored with %d bytes allocated: holes were written", i, alloc)
		}
	}
}

// TestUnchangedReused: an image not modified since the VM's last point is
// not read again (its disk map is reused and the last point becomes the
// parent); a write to it, or ForceRead, reads it again.
func TestUnchangedReused(t *testing.T) {
	r := repository.TestRepository(t)
	img := makeImage(t, 8<<20, 2, [2]int64{0, 2 << 20})
	first := backupOne(t, r, Request{VM: "vm1"}, img)
	second := backupOne(t, r, Request{VM: "vm1"}, img)
	if d := second.Disks[0]; d.Mode != "unchanged" || second.BytesRead != 0 || second.Parent != first.RestorePoint {
		t.Fatalf("unchanged image: %+v parent %q", d, second.Parent)
	}
	if other := backupOne(t, r, Request{VM: "vm2"}, img); other.Disks[0].Mode == "unchanged" {
		t.Error("another VM's point was reused")
	}
	forced := backupOne(t, r, Request{VM: "vm1", ForceRead: true}, img)
	if forced.Disks[0].Mode != "allocated" || forced.BytesRead == 0 {
		t.Errorf("ForceRead: %+v", forced.Disks[0])
	}
	time.Sleep(10 * time.Millisecond) // the ctime must move for the write to show
	overwrite(t, img, 1<<20, 4096, 3)
	changed := backupOne(t, r, Request{VM: "vm1"}, img)
	if changed.Disks[0].Mode == "unchanged" || changed.NewBytes == 0 {
		t.Fatalf("modified image not read again: %+v", changed.Disks[0])
	}
	sameFile(t, img, restoreTo(t, r, changed.RestorePoint, 0))
	before := restoreTo(t, r, second.RestorePoint, 0)
	if b, _ := os.ReadFile(before); bytes.Equal(b, mustRead(t, img)) {
		t.Error("the reused point restores the modified image")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIncremental: with a parent and the changed ranges only those bytes
// are read, and the result restores byte-identical; a parent whose disk
// has another size is refused with a warning and a full read.
func TestIncremental(t *testing.T) {
	r := repository.TestRepository(t)
	img := makeImage(t, 16<<20, 4, [2]int64{0, 6 << 20})
	base := backupOne(t, r, Request{VM: "vm1"}, img)
	overwrite(t, img, 1<<20, 64<<10, 5)
	overwrite(t, img, 10<<20, 128<<10, 6)
	parent, err := ResolveParent(context.Background(), r, base.RestorePoint[:10])
	if err != nil {
		t.Fatal(err)
	}
	changed, err := ParseChanged([]byte(`[{"offset":10485760,"length":131072},{"offset":1048576,"length":65536}]`), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	inc := backupOne(t, r, Request{VM: "vm1", Parent: parent, Changed: changed, HaveChanged: true}, img)
	if d := inc.Disks[0]; d.Mode != "incremental" || inc.BytesRead != 192<<10 || inc.Parent != base.RestorePoint {
		t.Fatalf("incremental: read %d, %+v", inc.BytesRead, d)
	}
	sameFile(t, img, restoreTo(t, r, inc.RestorePoint, 0))

	bigger := makeImage(t, 20<<20, 7, [2]int64{0, 1 << 20})
	var warned []string
	full := backupOne(t, r, Request{VM: "vm1", Parent: parent, Changed: nil, HaveChanged: true, Warn: func(w string) { warned = append(warned, w) }}, bigger)
	if full.Disks[0].Mode != "allocated" || len(warned) != 1 || !strings.Contains(warned[0], "changed size") || len(full.Warnings) != 1 {
		t.Fatalf("size mismatch: mode %q, warnings %q", full.Disks[0].Mode, warned)
	}
	if p, _ := r.Point(context.Background(), full.RestorePoint); len(p.Warnings) != 1 {
		t.Errorf("point warnings %q", p.Warnings)
	}
	sameFile(t, bigger, restoreTo(t, r, full.RestorePoint, 0))
}

// TestBadInputChangesNothing: contradictory requests, a bad parent, a
// cancelled context and a failing image commit nothing.
func TestBadInputChangesNothing(t *testing.T) {
	r := repository.TestRepository(t)
	img := makeImage(t, 4<<20, 8, [2]int64{0, 4 << 20})
	ims, err := Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer ims.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	fake := &repository.Point{ID: "0000", Disks: []repository.Disk{{Capacity: 4 << 20}}} // gone from the repository
	cases := []struct {
		name string
		ctx  context.Context
		req  Request
		want error
	}{
		{"no VM", context.Background(), Request{}, ErrBadRequest},
		{"changed without parent", context.Background(), Request{VM: "a", HaveChanged: true}, ErrBadRequest},
		{"cancelled", cancelled, Request{VM: "a"}, context.Canceled},
		{"unknown parent", context.Background(), Request{VM: "a", Parent: fake, HaveChanged: true}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Backup(c.ctx, r, ims, c.req)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
	if _, err := Backup(context.Background(), r, &Images{}, Request{VM: "a"}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("no image: %v", err)
	}
	if _, err := ResolveParent(context.Background(), r, "ffff"); err == nil {
		t.Error("unknown parent resolved")
	}
	if _, err := Open([]string{img, filepath.Join(t.TempDir(), "missing.img")}); err == nil || !strings.Contains(err.Error(), "missing.img") {
		t.Errorf("missing image: %v", err)
	}
	if pts, err := r.List(context.Background()); err != nil || len(pts) != 0 {
		t.Fatalf("bad input committed %d point(s): %v", len(pts), err)
	}
}

func TestParseChanged(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []dedup.Extent
		err  string
	}{
		{"merged and sorted", `[{"offset":8192,"length":4096},{"offset":0,"length":4096},{"offset":4096,"length":100},{"offset":9000,"length":10}]`,
			[]dedup.Extent{{Offset: 0, Length: 4196}, {Offset: 8192, Length: 4096}}, ""},
		{"empty dropped", `[{"offset":0,"length":0}]`, []dedup.Extent{}, ""},
		{"whole disk", `[{"offset":0,"length":65536}]`, []dedup.Extent{{Offset: 0, Length: 65536}}, ""},
		{"missing length", `[{"offset":0}]`, nil, "offset and length"},
		{"outside", `[{"offset":65536,"length":1}]`, nil, "outside"},
		{"negative", `[{"offset":-1,"length":1}]`, nil, "outside"},
		{"overflow", `[{"offset":1,"length":9223372036854775807}]`, nil, "outside"},
		{"not a list", `{"offset":0}`, nil, "JSON list"},
		{"garbage", `\x00`, nil, "JSON list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseChanged([]byte(c.in), 65536)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

// FuzzParseChanged: any input is refused or gives sorted, disjoint extents
// inside the disk; never a panic.
func FuzzParseChanged(f *testing.F) {
	for _, s := range []string{`[{"offset":0,"length":10}]`, `[{"offset":5,"length":10},{"offset":0,"length":6}]`, `[]`, `[{}]`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const size = 1 << 20
		exts, err := ParseChanged(b, size)
		if err != nil {
			return
		}
		var end int64
		for i, e := range exts {
			if e.Length <= 0 || e.Offset < 0 || e.Offset+e.Length > size || (i > 0 && e.Offset <= end) {
				t.Fatalf("bad extents %v", exts)
			}
			end = e.Offset + e.Length
		}
	})
}

// TestRestoreRefuses: an existing output without Force, a disk the point
// does not have and a cancelled restore leave the output as it was.
func TestRestoreRefuses(t *testing.T) {
	r := repository.TestRepository(t)
	img := makeImage(t, 4<<20, 9, [2]int64{0, 4 << 20})
	res := backupOne(t, r, Request{VM: "vm1"}, img)
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.img")
	os.WriteFile(existing, []byte("keep me"), 0o600)
	ctx := context.Background()
	if _, err := Restore(ctx, r, RestoreRequest{Point: res.RestorePoint, Out: existing}); !errors.Is(err, ErrOutputExists) {
		t.Errorf("existing output: %v", err)
	}
	if err := CheckOutput(existing, false); !errors.Is(err, ErrOutputExists) {
		t.Errorf("CheckOutput: %v", err)
	}
	if _, err := Restore(ctx, r, RestoreRequest{Point: res.RestorePoint, Disk: 1, Out: existing, Force: true}); !errors.Is(err, ErrNoDisk) {
		t.Errorf("disk 1 of 1: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Restore(cancelled, r, RestoreRequest{Point: res.RestorePoint, Out: existing, Force: true}); err == nil {
		t.Error("cancelled restore succeeded")
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Errorf("refused restores changed the output: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
	got, err := Restore(ctx, r, RestoreRequest{Point: res.RestorePoint, Out: existing, Force: true, Sync: true})
	if err != nil || got.Size != 4<<20 || got.Point != res.RestorePoint {
		t.Fatalf("forced restore: %+v %v", got, err)
	}
	sameFile(t, img, existing)
}

// TestRestoreBypassesPageCache: a restore writes the output with direct
// I/O, so its bytes are on the file system but not in the page cache
// (mincore), apart from the partial blocks at the edges of data regions.
func TestRestoreBypassesPageCache(t *testing.T) {
	r := repository.TestRepository(t)
	raw := makeImage(t, 48<<20, 3, [2]int64{0, 9 << 20}, [2]int64{20<<20 + 1000, 6<<20 + 5}, [2]int64{40 << 20, 8 << 20})
	res := backupOne(t, r, Request{VM: "vm1"}, raw)
	out := filepath.Join(t.TempDir(), "restored.img")
	var fs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(out), &fs); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(context.Background(), r, RestoreRequest{Point: res.RestorePoint, Out: out}); err != nil {
		t.Fatal(err)
	}
	if fs.Type == 0x01021994 { // tmpfs: its pages are the file, there is no cache to bypass
		t.Log("LOUD: the test directory is on tmpfs: page-cache residency cannot be checked, only the content")
	} else {
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		m, err := syscall.Mmap(int(f.Fd()), 0, 48<<20, syscall.PROT_READ, syscall.MAP_SHARED)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		vec := make([]byte, (48<<20)/os.Getpagesize())
		_, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
		syscall.Munmap(m)
		if e != 0 {
			t.Fatal(e)
		}
		var resident int
		for _, v := range vec {
			resident += int(v & 1)
		}
		if resident > 8 {
			t.Fatalf("%d pages of the restored file are in the page cache: it was not written with direct I/O", resident)
		}
	}
	sameFile(t, raw, out)
}
