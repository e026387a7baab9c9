package vmdk

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// needTool fails (never skips) when a tool the tests rely on is missing.
func needTool(t testing.TB, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} { // not always on a user's PATH
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	t.Fatalf("%s not found: install %s (make test does)", name, pkg)
	return ""
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// makeRandomImage writes a raw image of size bytes with random data in some
// ranges (unaligned, some spanning grains) and holes elsewhere.
func makeRandomImage(t testing.TB, path string, size int64, seed uint64) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	img := make([]byte, size)
	put := func(off, n int64) {
		for i := off; i < off+n && i < size; i++ {
			img[i] = byte(r.Uint32())
		}
	}
	put(0, 4096)             // first sector / "partition table"
	put(65536-100, 300)      // across a grain boundary
	put(size/3, 3*65536+17)  // several grains, unaligned end
	put(size-512, 512)       // last sector
	put(size/2+12345, 1)     // a single byte
	for i := 0; i < 8; i++ { // some text-like compressible data
		off := r.Int64N(size - 8192)
		copy(img[off:], bytes.Repeat([]byte("vmvault compressible text "), 300))
	}
	writeSparse(t, path, img)
	return img
}

// writeSparse writes img to path leaving 4 KiB runs of zeros as holes.
func writeSparse(t testing.TB, path string, img []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(len(img))); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(img); off += 4096 {
		b := img[off:min(off+4096, len(img))]
		if isZero(b) {
			continue
		}
		if _, err := f.WriteAt(b, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
}

// makeExt4Image builds a real ext4 file system image holding a few files.
func makeExt4Image(t testing.TB, dir string, size string) []byte {
	t.Helper()
	mkfs := needTool(t, "mkfs.ext4", "e2fsprogs")
	src := filepath.Join(dir, "fsroot")
	must(t, os.MkdirAll(filepath.Join(src, "etc", "sub"), 0o755))
	r := rand.New(rand.NewPCG(1, 2))
	rnd := make([]byte, 700_000)
	for i := range rnd {
		rnd[i] = byte(r.Uint32())
	}
	must(t, os.WriteFile(filepath.Join(src, "random.bin"), rnd, 0o644))
	must(t, os.WriteFile(filepath.Join(src, "etc", "hostname"), []byte("vmvault-test\n"), 0o644))
	var txt bytes.Buffer
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&txt, "line %d of a log file that compresses well\n", i)
	}
	must(t, os.WriteFile(filepath.Join(src, "etc", "sub", "log.txt"), txt.Bytes(), 0o644))
	img := filepath.Join(dir, "ext4.raw")
	run(t, mkfs, "-q", "-F", "-E", "root_owner=0:0", "-d", src, img, size)
	b, err := os.ReadFile(img)
	must(t, err)
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func qemuConvert(t testing.TB, src, dst, subformat string) {
	t.Helper()
	needTool(t, "qemu-img", "qemu-utils")
	run(t, "qemu-img", "convert", "-f", "raw", "-O", "vmdk", "-o", "subformat="+subformat, src, dst)
}

// readDisk reads the whole disk with 8 MiB ReadAt calls.
func readDisk(t testing.TB, r io.ReaderAt, size int64) []byte {
	t.Helper()
	out := make([]byte, size)
	for off := int64(0); off < size; off += 8 << 20 {
		end := min(off+8<<20, size)
		if n, err := r.ReadAt(out[off:end], off); err != nil && !(err == io.EOF && off+int64(n) == size) {
			t.Fatalf("ReadAt(%d, %d): n=%d %v", off, end-off, n, err)
		}
	}
	return out
}

// sameBytes fails with the first differing offset.
func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	if bytes.Equal(got, want) {
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: first difference at byte %d: got %#x want %#x (sha %x vs %x)", what, i, got[i], want[i], sha256.Sum256(got), sha256.Sum256(want))
		}
	}
}

// coversNonZero fails if some non-zero byte of img lies outside ext.
func coversNonZero(t testing.TB, what string, img []byte, ext []Extent) {
	t.Helper()
	var prev int64
	for _, e := range ext {
		if e.Offset < prev || e.Length <= 0 || e.Offset+e.Length > int64(len(img)) {
			t.Fatalf("%s: bad extent %+v after %d (size %d)", what, e, prev, len(img))
		}
		if !isZero(img[prev:e.Offset]) {
			t.Fatalf("%s: non-zero data in [%d,%d) outside Allocated", what, prev, e.Offset)
		}
		prev = e.Offset + e.Length
	}
	if !isZero(img[prev:]) {
		t.Fatalf("%s: non-zero data after %d outside Allocated", what, prev)
	}
}

func allocatedBytes(ext []Extent) int64 {
	var n int64
	for _, e := range ext {
		n += e.Length
	}
	return n
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
