package vmdk

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

const benchSize = 256 << 20

// cpuTimer reports MB per CPU-second next to MB/s: this 2-core machine is
// shared, so wall-clock throughput varies with the load while CPU cost
// does not.
type cpuTimer struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) *cpuTimer {
	b.ResetTimer()
	return &cpuTimer{b, cpuTime()}
}

func (c *cpuTimer) stop() {
	c.b.StopTimer()
	if d := cpuTime() - c.start; d > 0 {
		c.b.ReportMetric(float64(benchSize)*float64(c.b.N)/1e6/d.Seconds(), "MB/cpu-s")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchImage writes a 256 MiB raw image shaped like a used VM disk: per
// MiB, a quarter random (compressed files), half text-like, a quarter zeros.
func benchImage(b *testing.B, dir string) string {
	b.Helper()
	r := rand.New(rand.NewPCG(11, 12))
	img := make([]byte, benchSize)
	text := bytes.Repeat([]byte("Nov 29 17:40:03 vmvault kernel: [ 1.234] eth0: link up, 1000Mbps "), 20000)
	for off := 0; off < benchSize; off += 1 << 20 {
		for i := off; i < off+256<<10; i += 8 {
			v := r.Uint64()
			for k := 0; k < 8; k++ {
				img[i+k] = byte(v >> (8 * k))
			}
		}
		copy(img[off+256<<10:off+768<<10], text[off%4096:])
	}
	p := filepath.Join(dir, "bench.raw")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

func benchReadAt(b *testing.B, sub string) {
	dir := b.TempDir()
	raw := benchImage(b, dir)
	p := filepath.Join(dir, sub+".vmdk")
	qemuConvert(b, raw, p, sub)
	d, err := Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	buf := make([]byte, 8<<20)
	b.SetBytes(benchSize)
	ct := startCPU(b)
	defer ct.stop()
	for b.Loop() {
		for off := int64(0); off < benchSize; off += int64(len(buf)) {
			if _, err := d.ReadAt(buf, off); err != nil && err != io.EOF {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkReadAtSparse256MiB: sequential 8 MiB ReadAt over qemu-img's
// monolithicSparse (uncompressed grains).
func BenchmarkReadAtSparse256MiB(b *testing.B) { benchReadAt(b, "monolithicSparse") }

// BenchmarkReadAtStreamOptimized256MiB: the same over streamOptimized
// (every grain inflated once).
func BenchmarkReadAtStreamOptimized256MiB(b *testing.B) { benchReadAt(b, "streamOptimized") }

// BenchmarkStreamReader256MiB: sequential decode, as for an NFC export.
func BenchmarkStreamReader256MiB(b *testing.B) {
	dir := b.TempDir()
	raw := benchImage(b, dir)
	p := filepath.Join(dir, "s.vmdk")
	qemuConvert(b, raw, p, "streamOptimized")
	data, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSize)
	ct := startCPU(b)
	defer ct.stop()
	for b.Loop() {
		s, err := NewStreamReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, _, err := s.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkStreamWriter256MiB: encoding (zlib level 1) to io.Discard.
func BenchmarkStreamWriter256MiB(b *testing.B) {
	dir := b.TempDir()
	img, err := os.ReadFile(benchImage(b, dir))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSize)
	ct := startCPU(b)
	defer ct.stop()
	for b.Loop() {
		w, err := NewStreamWriter(io.Discard, benchSize, StreamWriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < benchSize; off += 8 << 20 {
			if err := w.WriteGrainsAt(img[off:off+8<<20], int64(off)); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
