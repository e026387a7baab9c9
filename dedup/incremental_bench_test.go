package dedup

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkIncremental measures, on a real ext4 image (4 GiB, /usr/bin copied in by mkfs.ext4 -d)
// changed in place like a guest would (debugfs writes ~50 MB of new files; three large files are
// rewritten in place block by block), what an incremental backup costs for each chunking choice:
// bytes read from the source (must equal the changed bytes), bytes read from the parent, and the
// new unique chunk bytes that would be stored (storage amplification = stored / changed).
// It needs mkfs.ext4 and debugfs (Debian e2fsprogs).
func BenchmarkIncremental(b *testing.B) {
	for _, tool := range []string{"mkfs.ext4", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err2 := os.Stat("/usr/sbin/" + tool); err2 != nil {
				b.Fatalf("%s not found: install e2fsprogs (make test does)", tool)
			}
		}
	}
	dir := b.TempDir()
	oldImg := filepath.Join(dir, "old.img")
	run(b, "mkfs.ext4", "-q", "-F", "-d", "/usr/bin", "-E", "root_owner=0:0", oldImg, "4G")
	old := readSparse(b, oldImg)
	scenarios := []struct {
		name   string
		change func(b *testing.B, dir, img string, alloc []Extent)
	}{
		{"guest-files", guestChange},
		{"random-4k-1pct", randomBlockWrites},
	}
	for _, sc := range scenarios {
		newImg := filepath.Join(dir, sc.name+".img")
		run(b, "cp", "--sparse=always", oldImg, newImg)
		sc.change(b, dir, newImg, old.alloc)
		cur := readSparse(b, newImg)
		changed := diffBlocks(old.data, cur.data, 64<<10) // CBT reports 64 KiB areas
		b.Logf("%s: image %d bytes, %d allocated, %d changed in %d extents", sc.name, len(old.data), sumExtents(old.alloc), sumExtents(changed), len(changed))
		incremental(b, sc.name, old, cur, changed)
	}
}

func incremental(b *testing.B, scenario string, old, cur *sparseImage, changed []Extent) {
	pol := uint64(testPol)
	cdc := func(avg int) Params {
		return Params{Algorithm: AlgorithmCDC, Polynomial: pol, MinSize: avg / 2, AvgSize: avg, MaxSize: avg * 8}
	}
	for _, p := range []Params{
		cdc(256 << 10), cdc(512 << 10), defaultTestParams(AlgorithmCDC),
		{Algorithm: AlgorithmFixed, AvgSize: 64 << 10}, {Algorithm: AlgorithmFixed, AvgSize: 256 << 10}, {Algorithm: AlgorithmFixed, AvgSize: 1 << 20},
	} {
		name := fmt.Sprintf("%s/%s-min%dK-avg%dK", scenario, p.Algorithm, p.MinSize>>10, p.AvgSize>>10)
		b.Run(name, func(b *testing.B) {
			c := newChunker(b, p, 0)
			known := map[[32]byte]bool{}
			var parent []span
			var stored0 int64
			err := c.Split(context.Background(), old, int64(len(old.data)), old.alloc, func(ch Chunk) error {
				parent = append(parent, span{ch.Offset, int64(ch.Length), ch.Zero})
				if !ch.Zero {
					h := sha256.Sum256(ch.Data)
					if !known[h] {
						known[h] = true
						stored0 += int64(ch.Length)
					}
				}
				ReleaseBuffer(ch.Data)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			pcs := parentList(parent, func() bool { return true })
			var st Stats
			var added int64
			b.SetBytes(int64(len(cur.data)))
			b.ResetTimer()
			for range b.N {
				st, added = Stats{}, 0
				seen := map[[32]byte]bool{}
				err := c.Rechunk(WithStats(context.Background(), &st), cur, old, int64(len(cur.data)), pcs, changed, func(ch Chunk) error {
					if ch.Data != nil {
						h := sha256.Sum256(ch.Data)
						if !known[h] && !seen[h] {
							seen[h] = true
							added += int64(ch.Length)
						}
					}
					ReleaseBuffer(ch.Data)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			ch := float64(sumExtents(changed))
			b.ReportMetric(float64(stored0)/1e6, "full-stored-MB")
			b.ReportMetric(float64(st.SourceBytesRead)/ch, "src-read/changed")
			b.ReportMetric(float64(st.ParentBytesRead)/1e6, "parent-read-MB")
			b.ReportMetric(float64(added)/1e6, "stored-MB")
			b.ReportMetric(float64(added)/ch, "stored/changed")
			if p != defaultTestParams(AlgorithmCDC) {
				return
			}
			// The slice method on the same change: only the changed bytes are new.
			m := make([]MapExtent, len(parent))
			for i, x := range parent {
				m[i] = MapExtent{Offset: x.Off, Length: x.Len, Zero: x.Zero, Blob: i, BlobLen: x.Len}
			}
			seen := map[[32]byte]bool{}
			added = 0
			ist, err := Incremental(context.Background(), c, cur, old, int64(len(cur.data)), m, changed, IncrementalOptions{}, func(ch Chunk) error {
				if ch.Data != nil {
					h := sha256.Sum256(ch.Data)
					if !known[h] && !seen[h] {
						seen[h] = true
						added += int64(ch.Length)
					}
				}
				ReleaseBuffer(ch.Data)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(ist.ParentBytes)/1e6, "slices-parent-read-MB")
			b.ReportMetric(float64(added)/ch, "slices-stored/changed")
		})
	}
}

func run(b *testing.B, name string, args ...string) string {
	b.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// randomBlockWrites rewrites 1% of the allocated bytes in random 4 KiB blocks, in place.
func randomBlockWrites(b *testing.B, dir, img string, alloc []Extent) {
	b.Helper()
	fh, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	rng := rand.New(rand.NewSource(22))
	buf := make([]byte, 4096)
	for range sumExtents(alloc) / 100 / 4096 {
		x := alloc[rng.Intn(len(alloc))]
		if x.Length < 4096 {
			continue
		}
		off := x.Offset + rng.Int63n(x.Length/4096)*4096
		rng.Read(buf)
		if _, err := fh.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
	}
}

// guestChange writes new files through debugfs and rewrites three large files' blocks in place.
func guestChange(b *testing.B, dir, img string, _ []Extent) {
	b.Helper()
	rng := rand.New(rand.NewSource(21))
	var cmds strings.Builder
	for i := range 25 {
		f := filepath.Join(dir, fmt.Sprintf("new%d", i))
		data := make([]byte, 2<<20)
		rng.Read(data)
		if err := os.WriteFile(f, data, 0o644); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&cmds, "write %s new%d\n", f, i)
	}
	cmdFile := filepath.Join(dir, "cmds")
	if err := os.WriteFile(cmdFile, []byte(cmds.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	run(b, "debugfs", "-w", "-f", cmdFile, img)
	fh, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	for _, name := range []string{"gdb", "perf", "restic"} {
		out := run(b, "debugfs", "-R", "blocks /"+name, img)
		blocks := strings.Fields(out)
		buf := make([]byte, 4096)
		for i, s := range blocks {
			if i%3 != 0 { // rewrite one block in three
				continue
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				continue
			}
			rng.Read(buf)
			if _, err := fh.WriteAt(buf, n*4096); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// sparseImage is an image in memory with its allocation map (SEEK_DATA/SEEK_HOLE).
type sparseImage struct {
	data  []byte
	alloc []Extent
}

func (s *sparseImage) ReadAt(p []byte, off int64) (int, error) {
	return copy(p, s.data[off:]), nil
}

func readSparse(b *testing.B, path string) *sparseImage {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	img := &sparseImage{data: make([]byte, fi.Size())}
	const seekData, seekHole = 3, 4
	for off := int64(0); off < fi.Size(); {
		d, err := syscall.Seek(int(f.Fd()), off, seekData)
		if err != nil {
			break // ENXIO: no data after off
		}
		h, err := syscall.Seek(int(f.Fd()), d, seekHole)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.ReadAt(img.data[d:h], d); err != nil {
			b.Fatal(err)
		}
		img.alloc = append(img.alloc, Extent{d, h - d})
		off = h
	}
	return img
}

// diffBlocks lists the blocks of size bs that differ, as CBT would report them.
func diffBlocks(a, b []byte, bs int) []Extent {
	var out []Extent
	for off := 0; off < len(a); off += bs {
		end := min(off+bs, len(a))
		if string(a[off:end]) == string(b[off:end]) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Offset+out[n-1].Length == int64(off) {
			out[n-1].Length += int64(end - off)
		} else {
			out = append(out, Extent{int64(off), int64(end - off)})
		}
	}
	return out
}
