package backup

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
)

// guest is a disk image holding a real ext4 (mkfs.ext4 -d) that tests change
// the way a guest does: debugfs -w writes and removes files, and its own
// allocator places them (issue 15: identical new files land at different
// offsets on different VMs).
type guest struct {
	t    testing.TB
	dir  string
	path string
}

// newGuestTree writes a small system-like tree (text and binary-like files)
// under dir/tree and returns its root.
func newGuestTree(t testing.TB, dir string, seed uint64, files int) string {
	t.Helper()
	root := filepath.Join(dir, "tree")
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range files {
		sub := filepath.Join(root, fmt.Sprintf("usr/lib/d%d", i%5))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("lib%03d.so", i)), fileContent(rng, 8<<10+rng.IntN(96<<10)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("template\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// fileContent is n bytes half text-like, half binary-like (random runs with
// repeated structure), so both compress differently, like a guest's files.
func fileContent(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n)
	words := []string{"lib", "symbol", "section", "debug", "the", "of", "init", "\n", "0x7f", "ELF"}
	for len(b) < n {
		if rng.IntN(2) == 0 {
			for range 64 {
				b = append(b, words[rng.IntN(len(words))]...)
				b = append(b, ' ')
			}
		} else {
			for range 256 {
				b = append(b, byte(rng.Uint32()))
			}
		}
	}
	return b[:n]
}

// mkfsGuest makes a size-byte ext4 image from tree.
func mkfsGuest(t testing.TB, dir, tree string, size int64) *guest {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Fatalf("install e2fsprogs (mkfs.ext4): make test does: %v", err)
	}
	img := filepath.Join(dir, "base.img")
	if out, err := exec.Command(mkfs, "-q", "-F", "-b", "4096", "-E", "root_owner=0:0", "-U", "11111111-2222-4333-8444-555555555555",
		"-d", tree, img, fmt.Sprintf("%dM", size>>20)).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	return &guest{t: t, dir: dir, path: img}
}

// clone copies the image (a VM cloned from the template).
func (g *guest) clone(name string) *guest {
	g.t.Helper()
	data, err := os.ReadFile(g.path)
	if err != nil {
		g.t.Fatal(err)
	}
	p := filepath.Join(g.dir, name+".img")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		g.t.Fatal(err)
	}
	return &guest{t: g.t, dir: g.dir, path: p}
}

func (g *guest) bytes() []byte {
	g.t.Helper()
	data, err := os.ReadFile(g.path)
	if err != nil {
		g.t.Fatal(err)
	}
	return data
}

// debugfs runs commands against the image; write commands take host files
// that put creates.
func (g *guest) debugfs(cmds ...string) {
	g.t.Helper()
	bin, err := exec.LookPath("debugfs")
	if err != nil {
		g.t.Fatalf("install e2fsprogs (debugfs): make test does: %v", err)
	}
	f := filepath.Join(g.dir, "cmds")
	if err := os.WriteFile(f, []byte(strings.Join(cmds, "\n")+"\n"), 0o600); err != nil {
		g.t.Fatal(err)
	}
	out, err := exec.Command(bin, "-w", "-f", f, g.path).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("No free space")) || bytes.Contains(out, []byte("Could not allocate")) {
		g.t.Fatalf("debugfs: %v\n%s", err, out)
	}
}

// put stores data as a host file for debugfs write and returns its path.
func (g *guest) put(name string, data []byte) string {
	g.t.Helper()
	p := filepath.Join(g.dir, "host-"+strings.ReplaceAll(name, "/", "_"))
	if err := os.WriteFile(p, data, 0o600); err != nil {
		g.t.Fatal(err)
	}
	return p
}

// blockDiff is what CBT reports for a guest change: the 4 KiB blocks that
// differ, merged.
func blockDiff(a, b []byte) []dedup.Extent {
	var out []dedup.Extent
	for off := 0; off < len(a); off += 4096 {
		end := min(off+4096, len(a))
		if bytes.Equal(a[off:end], b[off:end]) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Offset+out[n-1].Length == int64(off) {
			out[n-1].Length += int64(end - off)
			continue
		}
		out = append(out, dedup.Extent{Offset: int64(off), Length: int64(end - off)})
	}
	return out
}

// vmChain is one VM's chain in one repository.
type vmChain struct {
	last string // last point
	img  []byte // its image
}

// dedupRepos backs up the same VMs into two repositories: "cbt" takes
// incrementals from the changed blocks (the appliance), "full" reads every
// image whole and chunks it (what restic does, with the same chunker), the
// reference the stored bytes are held against.
type dedupRepos struct {
	t          testing.TB
	c          dedup.Chunker
	cbt, full  *repository.Repository
	cbtV, fulV map[string]*vmChain
}

func newDedupRepos(t testing.TB) *dedupRepos {
	return &dedupRepos{t: t, c: newChunker(t, testChunker),
		cbt:  repository.TestRepository(t, repository.WithChunker(testChunker), repository.WithPackSize(1<<20)),
		full: repository.TestRepository(t, repository.WithChunker(testChunker), repository.WithPackSize(1<<20)),
		cbtV: map[string]*vmChain{}, fulV: map[string]*vmChain{}}
}

// backup backs up vm's current image into both repositories and returns the
// bytes each stored. The first backup of a VM is a full one in both.
func (d *dedupRepos) backup(vm string, g *guest) (cbt, full int64) {
	d.t.Helper()
	ctx := context.Background()
	img := g.bytes()
	size := int64(len(img))
	if prev := d.fulV[vm]; prev != nil {
		p, res := backupAndCommit(d.t, d.full, d.c, DiskInput{Source: bytes.NewReader(img), Size: size}, prev.last)
		d.fulV[vm] = &vmChain{last: p.ID, img: img}
		full = res.StoredBytes
	} else {
		p, res := backupAndCommit(d.t, d.full, d.c, DiskInput{Source: bytes.NewReader(img), Size: size}, "")
		d.fulV[vm] = &vmChain{last: p.ID, img: img}
		full = res.StoredBytes
	}
	prev := d.cbtV[vm]
	if prev == nil {
		p, res := backupAndCommit(d.t, d.cbt, d.c, DiskInput{Source: bytes.NewReader(img), Size: size}, "")
		d.cbtV[vm] = &vmChain{last: p.ID, img: img}
		return res.StoredBytes, full
	}
	changed := blockDiff(prev.img, img)
	pr, err := d.cbt.OpenDisk(ctx, prev.last, 0)
	if err != nil {
		d.t.Fatal(err)
	}
	defer pr.Close()
	_, exts, err := d.cbt.DiskExtents(ctx, prev.last, 0)
	if err != nil {
		d.t.Fatal(err)
	}
	p, res := backupAndCommit(d.t, d.cbt, d.c, DiskInput{Source: bytes.NewReader(img), Size: size,
		Parent: &ParentDisk{Reader: pr, Extents: exts, Changed: changed, Method: dedup.MethodSlices}}, prev.last)
	var want int64
	for _, e := range changed {
		want += e.Length
	}
	if res.BytesRead != want {
		d.t.Fatalf("%s: the incremental read %d source bytes, CBT reported %d", vm, res.BytesRead, want)
	}
	if got := readBack(d.t, d.cbt, p.ID); !bytes.Equal(got, img) {
		d.t.Fatalf("%s: the incremental point restores different bytes", vm)
	}
	streamCheck(d.t, d.cbt, p.ID, img)
	d.cbtV[vm] = &vmChain{last: p.ID, img: img}
	d.t.Logf("%s: changed %d bytes in %d runs; stored %d (reads whole images: %d); runs cut by CDC %d (%d chunks), pieces %d",
		vm, want, len(changed), res.StoredBytes, full, res.Slices.Runs, res.Slices.RunChunks, res.Slices.NewPieces)
	return res.StoredBytes, full
}

// updateFiles is a set of new files (a package update): the same bytes on
// every VM.
func updateFiles(seed uint64, n int) map[string][]byte {
	rng := rand.New(rand.NewPCG(seed, 99))
	out := map[string][]byte{}
	for i := range n {
		out[fmt.Sprintf("opt/update/f%03d.so", i)] = fileContent(rng, 16<<10+rng.IntN(160<<10))
	}
	return out
}

// writeFiles writes files into the guest in name order (debugfs allocates
// them where the guest's free space is).
func (g *guest) writeFiles(files map[string][]byte) {
	g.t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	cmds := []string{"mkdir opt", "mkdir opt/update"}
	for _, n := range names {
		cmds = append(cmds, fmt.Sprintf("write %s %s", g.put(n, files[n]), n))
	}
	g.debugfs(cmds...)
}

// TestDedupUpdateOnClones: the same update (about 2.5 MB of new files) is
// installed on four clones of one VM, whose allocators put it at different
// offsets because each clone wrote different files before. Backed up as CBT
// incrementals, VM 1 stores at most 1.05x what a whole-image backup (restic's
// way) stores for it, VMs 2..4 at most 1.5x; every point restores
// byte-identical and the incrementals read exactly the changed blocks.
// Before the changed runs were cut with CDC from their own bytes, VMs 2..4
// stored the whole update again (a failing 19x the reference).
func TestDedupUpdateOnClones(t *testing.T) {
	dir := t.TempDir()
	tmpl := mkfsGuest(t, dir, newGuestTree(t, dir, 1, 40), 32<<20)
	d := newDedupRepos(t)
	update := updateFiles(2, 24)
	var updBytes int
	for _, b := range update {
		updBytes += len(b)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	var cbt, full [4]int64
	runAt := map[int64]string{} // where each VM's longest changed run starts
	for i := range 4 {
		vm := fmt.Sprintf("vm%d", i+1)
		g := tmpl.clone(vm)
		// Each clone lived on its own for a while: logs of different sizes
		// move where its allocator puts the update.
		g.debugfs("mkdir var", fmt.Sprintf("write %s var/boot.log", g.put(vm+"-log", fileContent(rng, 4096*(1+3*i)+100))),
			fmt.Sprintf("write %s etc/machine-id", g.put(vm+"-id", []byte(vm+"\n"))))
		d.backup(vm, g)
		before := g.bytes()
		g.writeFiles(update)
		var longest dedup.Extent
		for _, e := range blockDiff(before, g.bytes()) {
			if e.Length > longest.Length {
				longest = e
			}
		}
		if other, ok := runAt[longest.Offset]; ok {
			t.Fatalf("%s's allocator put the update where %s's did (%d): the case needs different offsets", vm, other, longest.Offset)
		}
		runAt[longest.Offset] = vm
		cbt[i], full[i] = d.backup(vm, g)
	}
	t.Logf("update %d bytes; VM 1 stored %d (whole-image reference %d), VMs 2-4 stored %d, %d, %d (reference %d, %d, %d)",
		updBytes, cbt[0], full[0], cbt[1], cbt[2], cbt[3], full[1], full[2], full[3])
	if float64(cbt[0]) > 1.05*float64(full[0]) {
		t.Errorf("VM 1 stored %d bytes, more than 1.05x the whole-image reference %d", cbt[0], full[0])
	}
	rest, restFull := cbt[1]+cbt[2]+cbt[3], full[1]+full[2]+full[3]
	if float64(rest) > 1.5*float64(restFull) {
		t.Errorf("VMs 2-4 stored %d bytes, more than 1.5x the whole-image reference %d (%.1fx)", rest, restFull, float64(rest)/float64(restFull))
	}
	requireCheckClean(t, d.cbt)
}

// TestDedupFileMovedInGuest: a guest copies a file to another place and
// removes the original (mv across directories of different block groups, a
// package manager's write-then-rename). The incremental stores little of it:
// the copy's blocks are cut by content and match the chunks of the full
// backup. Before, every byte of the copy was stored again.
func TestDedupFileMovedInGuest(t *testing.T) {
	dir := t.TempDir()
	tree := newGuestTree(t, dir, 4, 30)
	rng := rand.New(rand.NewPCG(5, 5))
	big := fileContent(rng, 1<<20+12345)
	if err := os.WriteFile(filepath.Join(tree, "usr/lib/big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	g := mkfsGuest(t, dir, tree, 32<<20)
	d := newDedupRepos(t)
	d.backup("vm", g)
	g.debugfs("mkdir srv", fmt.Sprintf("write %s srv/big.bin", g.put("big", big)), "rm usr/lib/big.bin")
	cbt, full := d.backup("vm", g)
	t.Logf("moved a %d-byte file: stored %d (whole-image reference %d)", len(big), cbt, full)
	if cbt > int64(len(big))/5 {
		t.Errorf("the incremental stored %d bytes for a moved %d-byte file, more than a fifth of it", cbt, len(big))
	}
	if float64(cbt) > 1.5*float64(full)+16<<10 {
		t.Errorf("the incremental stored %d bytes, the whole-image reference %d", cbt, full)
	}
}

// TestDedupClonedThenPatched: a VM is cloned (the clone's first backup stores
// next to nothing), then both are patched: new versions of existing files
// (mostly the old bytes, written as new files over the old names) and small
// in-place writes. The clone's patch, at other offsets, dedups with the
// original's; the original's patched files dedup with their old versions.
func TestDedupClonedThenPatched(t *testing.T) {
	dir := t.TempDir()
	tree := newGuestTree(t, dir, 6, 40)
	g := mkfsGuest(t, dir, tree, 32<<20)
	d := newDedupRepos(t)
	a := g.clone("a")
	d.backup("a", a)
	b := a.clone("b")
	b.debugfs("rm etc/hostname", fmt.Sprintf("write %s etc/hostname", b.put("b-host", []byte("clone-b\n"))))
	if cbt, _ := d.backup("b", b); cbt > 64<<10 {
		t.Errorf("the clone's first backup stored %d bytes", cbt)
	}
	// The patch: four libraries get new versions, each the old one with a
	// byte changed and 8 KiB appended.
	rng := rand.New(rand.NewPCG(7, 7))
	patch := map[string][]byte{}
	var patchBytes int
	for _, i := range []int{3, 11, 17, 29} {
		name := fmt.Sprintf("usr/lib/d%d/lib%03d.so", i%5, i)
		old, err := os.ReadFile(filepath.Join(tree, name))
		if err != nil {
			t.Fatal(err)
		}
		nv := append(append([]byte(nil), old...), fileContent(rng, 8<<10)...)
		nv[rng.IntN(len(old))] ^= 0xff
		patch[name] = nv
		patchBytes += len(nv)
	}
	apply := func(g *guest, extra int) {
		cmds := []string{"mkdir var", fmt.Sprintf("write %s var/dpkg.log", g.put("log", fileContent(rng, 4096*extra+10)))}
		for _, name := range []string{"usr/lib/d3/lib003.so", "usr/lib/d1/lib011.so", "usr/lib/d2/lib017.so", "usr/lib/d4/lib029.so"} {
			cmds = append(cmds, fmt.Sprintf("write %s %s.new", g.put(name, patch[name]), name), "rm "+name, fmt.Sprintf("ln %s.new %s", name, name), "unlink "+name+".new")
		}
		g.debugfs(cmds...)
	}
	apply(a, 1)
	ca, fa := d.backup("a", a)
	apply(b, 5)
	cb, fb := d.backup("b", b)
	t.Logf("patch %d bytes: original stored %d (reference %d), clone %d (reference %d)", patchBytes, ca, fa, cb, fb)
	if float64(ca) > 1.05*float64(fa)+16<<10 {
		t.Errorf("the original's patch stored %d bytes, the whole-image reference %d", ca, fa)
	}
	if float64(cb) > 1.5*float64(fb)+16<<10 {
		t.Errorf("the clone's patch stored %d bytes, the whole-image reference %d", cb, fb)
	}
	if ca > int64(patchBytes)/2 {
		t.Errorf("the patch (%d bytes, mostly old content) stored %d bytes", patchBytes, ca)
	}
}

// TestIncrementalRunsOnV10Repository: a repository written by format v1.0
// (repository/testdata/repo-v1.0) takes an incremental whose long changed run
// is cut by content and whose small writes are slices of a coalesced blob;
// both points restore byte-identical and check --read-data is clean. Runs
// need no format change (whole data extents), slices are v1.1 segments.
func TestIncrementalRunsOnV10Repository(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "repository", "testdata", "repo-v1.0"))); err != nil {
		t.Fatal(err)
	}
	r, err := repository.Open(ctx, dir, []byte("golden"), repository.OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v := r.Config().Version; v.Major != 1 || v.Minor != 0 {
		t.Fatalf("the fixture is version %d.%d, want 1.0", v.Major, v.Minor)
	}
	pts, err := r.List(ctx)
	if err != nil || len(pts) != 1 {
		t.Fatalf("points %v %v", pts, err)
	}
	old := readBack(t, r, pts[0].ID)
	cur := append([]byte(nil), old...)
	rng := rand.New(rand.NewPCG(9, 9))
	copy(cur[160<<10:], fileContent(rng, 128<<10))
	copy(cur[4<<10:], fileContent(rng, 4096))
	copy(cur[12<<10:], fileContent(rng, 4096))
	cc := r.Config().Chunker
	c, err := dedup.New(dedup.Params{Algorithm: cc.Algorithm, Polynomial: cc.Polynomial, MinSize: cc.MinSize, AvgSize: cc.AvgSize, MaxSize: cc.MaxSize})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := r.OpenDisk(ctx, pts[0].ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	_, exts, err := r.DiskExtents(ctx, pts[0].ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	changed := blockDiff(old, cur)
	p, res := backupAndCommit(t, r, c, DiskInput{Source: bytes.NewReader(cur), Size: int64(len(cur)),
		Parent: &ParentDisk{Reader: pr, Extents: exts, Changed: changed, Method: dedup.MethodSlices,
			Options: dedup.IncrementalOptions{Window: 16 << 10, RunCDC: 64 << 10}}}, pts[0].ID)
	if res.Slices.Runs != 1 || res.Slices.Groups != 1 {
		t.Fatalf("runs %d, group blobs %d; want one of each (changed %v)", res.Slices.Runs, res.Slices.Groups, changed)
	}
	if got := readBack(t, r, p.ID); !bytes.Equal(got, cur) {
		t.Fatal("the incremental restores different bytes")
	}
	if got := readBack(t, r, pts[0].ID); !bytes.Equal(got, old) {
		t.Fatal("the v1.0 point restores different bytes")
	}
	requireCheckClean(t, r)
}
