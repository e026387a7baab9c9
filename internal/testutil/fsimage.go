package testutil

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchSize returns the disk size benchmarks use: VMVAULT_BENCH_GIB GiB,
// default 1 GiB.
func BenchSize() int64 {
	if g, err := strconv.Atoi(os.Getenv("VMVAULT_BENCH_GIB")); err == nil && g > 0 {
		return int64(g) << 30
	}
	return 1 << 30
}

// MakeExt4 builds a sparse raw image of size bytes holding an ext4 file
// system made by mkfs.ext4 -d, with about fill bytes of files: half random
// (incompressible), half text-like. It fails (never skips) without
// e2fsprogs, which `make test` installs.
func MakeExt4(tb testing.TB, dir string, size, fill int64) string {
	tb.Helper()
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		tb.Fatalf("install e2fsprogs (mkfs.ext4): make test does: %v", err)
	}
	root := filepath.Join(dir, "root")
	rng := rand.New(rand.NewPCG(42, 42))
	words := []string{"vmvault", "backup", "restore", "snapshot", "extent", "chunk", "pack", "index", "the", "a", "of", "disk\n"}
	var total int64
	for i := 0; total < fill; i++ {
		sub := filepath.Join(root, fmt.Sprintf("d%02d", i%37))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			tb.Fatal(err)
		}
		n := 4096 + rng.IntN(4<<20)
		buf := make([]byte, n)
		if i%2 == 0 {
			for k := range buf {
				buf[k] = byte(rng.Uint32())
			}
		} else {
			var sb strings.Builder
			for sb.Len() < n {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			copy(buf, sb.String())
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d", i)), buf, 0o644); err != nil {
			tb.Fatal(err)
		}
		total += int64(n)
	}
	img := filepath.Join(dir, "disk.img")
	if out, err := exec.Command(mkfs, "-q", "-F", "-d", root, img, strconv.FormatInt(size>>20, 10)+"M").CombinedOutput(); err != nil {
		tb.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	if err := os.RemoveAll(root); err != nil {
		tb.Fatal(err)
	}
	return img
}
