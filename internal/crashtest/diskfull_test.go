package crashtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vmvault/vmvault/repository"
)

// smallExt4 makes a size-byte ext4 file system image, attaches it to a
// loop device and mounts it; everything is undone in t.Cleanup, also when
// the test fails. Without root or a loop device the test is skipped, and
// says so.
func smallExt4(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (needs root): a full disk is tested on a loop-mounted ext4, which only root can mount")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("SKIP: mkfs.ext4 is not installed (e2fsprogs; `make test-deps` installs it)")
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// -m 0: no blocks reserved for root (the test runs as root and would
	// otherwise see a different free space than df shows).
	if out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("SKIP: no loop device (losetup --find: %v: %s): a full disk cannot be tested here", err, strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	if out, err := exec.Command("mount", "-t", "ext4", dev, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v: %s", dev, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s (retrying lazily)", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

// randomImage writes size incompressible bytes (a disk zstd cannot shrink,
// so the stored size is the image size).
func randomImage(t *testing.T, path string, size int, seed uint64) ([]byte, [32]byte) {
	t.Helper()
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)}).Read(data)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data, sha256.Sum256(data)
}

// fill writes 1 MiB files under dir until the file system is full, then
// removes keep of them, and returns a function that removes the rest.
func fill(t *testing.T, dir string, keep int) func() {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var files []string
	for i := 0; ; i++ {
		name := filepath.Join(dir, fmt.Sprintf("fill-%03d", i))
		err := os.WriteFile(name, buf, 0o600)
		files = append(files, name)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 1000 {
			t.Fatal("the file system never filled up")
		}
	}
	for i := 0; i < keep && len(files) > 0; i++ {
		os.Remove(files[len(files)-1])
		files = files[:len(files)-1]
	}
	syscall.Sync()
	return func() {
		for _, f := range files {
			os.Remove(f)
		}
		syscall.Sync()
	}
}

func wantDiskFull(t *testing.T, what string, err error) {
	t.Helper()
	var dfe *repository.DiskFullError
	switch {
	case err == nil:
		t.Fatalf("%s on a full disk succeeded", what)
	case !errors.Is(err, syscall.ENOSPC):
		t.Fatalf("%s on a full disk: %v is not ENOSPC", what, err)
	case !errors.As(err, &dfe) || !strings.Contains(err.Error(), "the repository's disk is full"):
		t.Fatalf("%s on a full disk: %q does not say that the repository's disk is full", what, err)
	}
	t.Logf("%s on a full disk: %v", what, err)
}

// TestDiskFull fills a real 48 MiB ext4 during a backup and during a
// reclaim: each fails with an error that is ENOSPC and says the
// repository's disk is full, nothing is committed half (check --read-data
// clean, every point restores byte-identical, the failed backup left no
// point), and once space is freed reclaim and the next backup work.
func TestDiskFull(t *testing.T) {
	mnt := smallExt4(t, 48<<20)
	ctx := context.Background()
	repo := filepath.Join(mnt, "repo")
	if err := repository.Init(ctx, repo, password, repository.InitOptions{
		Chunker:  repository.ChunkerConfig{Algorithm: "cdc", Polynomial: 0x3DA3358B4DC173, MinSize: 16 << 10, AvgSize: 64 << 10, MaxSize: 256 << 10},
		KDF:      repository.TestKDF,
		PackSize: 1 << 20, CompressionLevel: "fastest"}); err != nil {
		t.Fatal(err)
	}
	// An operator's reserve, removed later to free space.
	if err := os.WriteFile(filepath.Join(mnt, "ballast"), make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir() // images live off the small file system
	v := newVerifier()
	// Every repository opened here is closed before the unmount, also when
	// the test stops early (Close is idempotent; cleanups run last first).
	openRepo := func(ctx context.Context, dir string) (*repository.Repository, error) {
		r, err := openRepo(ctx, dir)
		if err == nil {
			t.Cleanup(func() { r.Close() })
		}
		return r, err
	}
	backupOK := func(vm string, data []byte, sum [32]byte) string {
		t.Helper()
		path := filepath.Join(src, vm+".img")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := openRepo(ctx, repo)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		v.byVM[vm] = sum
		id, err := backupImage(ctx, r, path, vm)
		if err != nil {
			t.Fatalf("backup %s: %v", vm, err)
		}
		v.points[id] = sum
		return id
	}
	verify := func(when string) {
		t.Helper()
		if err := v.verify(ctx, repo, "", when); err != nil || v.losses > 0 {
			t.Fatalf("%s: %v %v", when, err, v.lossLog)
		}
	}
	dataA, sumA := randomImage(t, filepath.Join(src, "a"), 6<<20, 1)
	backupOK("vm-a", dataA, sumA)

	// 1. A backup larger than the free space.
	bigPath := filepath.Join(src, "big.img")
	_, sumBig := randomImage(t, bigPath, 64<<20, 2)
	v.byVM["vm-big"] = sumBig // a point committed whole would be fine; half is not
	r, err := openRepo(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	_, err = backupImage(ctx, r, bigPath, "vm-big")
	wantDiskFull(t, "backup", err)
	r.Close()
	verify("after the failed backup, disk still full")
	if len(v.points) != 1 {
		t.Fatalf("points after the failed backup: %d, want 1", len(v.points))
	}

	// Reclaim on the full disk: it may free the failed run's packs or fail
	// cleanly; either way nothing is lost.
	r, err = openRepo(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reclaim(ctx, nil); err != nil {
		wantDiskFull(t, "reclaim of a full repository", err)
	}
	r.Close()
	verify("after reclaim on the full disk")

	// Free space: reclaim and the next backup work.
	if err := os.Remove(filepath.Join(mnt, "ballast")); err != nil {
		t.Fatal(err)
	}
	r, err = openRepo(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reclaim(ctx, nil); err != nil {
		t.Fatalf("reclaim after space was freed: %v", err)
	}
	r.Close()
	dataX, sumX := randomImage(t, filepath.Join(src, "x"), 12<<20, 3)
	idX := backupOK("vm-x", dataX, sumX)
	verify("after the next backup")

	// 2. A reclaim that must repack: Y rewrites 70% of X, so X's packs are
	// mostly dead once X is deleted, and their live bytes are copied to new
	// packs before the old ones go. The disk is filled first.
	dataY := append([]byte(nil), dataX...)
	rng := rand.New(rand.NewPCG(4, 4))
	for off := 0; off+(256<<10) <= len(dataY); off += 256 << 10 {
		if rng.IntN(10) < 7 {
			for i := off; i < off+(256<<10); i++ {
				dataY[i] = byte(rng.Uint32())
			}
		}
	}
	backupOK("vm-y", dataY, sha256.Sum256(dataY))
	r, err = openRepo(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, idX); err != nil {
		t.Fatal(err)
	}
	delete(v.points, idX)
	r.Close()
	unfill := fill(t, filepath.Join(mnt, "filler"), 1)
	r, err = openRepo(ctx, repo)
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	rep, err := r.Reclaim(ctx, nil)
	wantDiskFull(t, "reclaim", err)
	r.Close()
	verify("after the failed reclaim, disk still full")

	unfill()
	r, err = openRepo(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = r.Reclaim(ctx, nil)
	if err != nil {
		t.Fatalf("reclaim after space was freed: %v", err)
	}
	if rep.PacksRepacked == 0 {
		t.Errorf("reclaim repacked nothing (%+v): the full-disk reclaim above tested the wrong step", rep)
	}
	r.Close()
	dataZ, sumZ := randomImage(t, filepath.Join(src, "z"), 4<<20, 5)
	backupOK("vm-z", dataZ, sumZ)
	verify("after reclaim and backup with space freed")
}
