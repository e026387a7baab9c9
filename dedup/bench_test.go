package dedup

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/restic/chunker"
)

func defaultTestParams(alg string) Params {
	return Params{Algorithm: alg, Polynomial: testPol, MinSize: DefaultMinSize, AvgSize: DefaultAvgSize, MaxSize: DefaultMaxSize}
}

var benchData = func() []byte {
	b := make([]byte, 64<<20)
	rand.New(rand.NewSource(42)).Read(b)
	return b
}()

func benchSplit(b *testing.B, alg string) {
	c := newChunker(b, defaultTestParams(alg), 0)
	r := bytes.NewReader(benchData)
	b.SetBytes(int64(len(benchData)))
	m := meterCPU(b)
	for range b.N {
		err := c.Split(context.Background(), r, int64(len(benchData)), nil, func(ch Chunk) error {
			ReleaseBuffer(ch.Data)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	m.stop(int64(len(benchData)))
}

// BenchmarkSplit: CDC over 64 MiB of random data, read from memory, chunk data copied out.
func BenchmarkSplit(b *testing.B)      { benchSplit(b, AlgorithmCDC) }
func BenchmarkSplitFixed(b *testing.B) { benchSplit(b, AlgorithmFixed) }

// BenchmarkResticChunker is the baseline: restic/chunker's own loop over the same bytes.
func BenchmarkResticChunker(b *testing.B) {
	buf := make([]byte, chunker.MaxSize)
	b.SetBytes(int64(len(benchData)))
	m := meterCPU(b)
	defer m.stop(int64(len(benchData)))
	for range b.N {
		ck := chunker.New(bytes.NewReader(benchData), testPol)
		for {
			_, err := ck.Next(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// repeatSource serves a 64 MiB random pattern at every offset (no memory for big disks).
type repeatSource struct{}

func (repeatSource) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		o := int((off + int64(n)) % int64(len(benchData)))
		n += copy(p[n:], benchData[o:])
	}
	return n, nil
}

// sparseLayout places ~250 MB of data on a 4 GiB disk in extents of 4 KiB to 4 MiB, like the
// allocation map of a freshly installed root file system.
func sparseLayout() (size int64, alloc []Extent) {
	size = 4 << 30
	rng := rand.New(rand.NewSource(9))
	var off, total int64
	for total < 250e6 {
		off += rng.Int63n(24 << 20)
		n := 4096 * (1 + rng.Int63n(1024))
		if off+n > size {
			break
		}
		alloc = append(alloc, Extent{off, n})
		off += n
		total += n
	}
	return size, alloc
}

// BenchmarkSplitSparse: the 4 GiB disk of sparseLayout; SetBytes is the allocated size, so MB/s
// compares with BenchmarkSplit (the holes should cost nothing).
func BenchmarkSplitSparse(b *testing.B) {
	c := newChunker(b, defaultTestParams(AlgorithmCDC), 0)
	size, alloc := sparseLayout()
	allocated := sumExtents(alloc)
	b.SetBytes(allocated)
	m := meterCPU(b)
	defer m.stop(allocated)
	var chunks, zero int
	for range b.N {
		chunks, zero = 0, 0
		err := c.Split(context.Background(), repeatSource{}, size, alloc, func(ch Chunk) error {
			chunks++
			if ch.Zero {
				zero++
			}
			ReleaseBuffer(ch.Data)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(chunks), "chunks")
	b.ReportMetric(float64(zero), "zero-chunks")
	b.ReportMetric(float64(len(alloc)), "extents")
}

// BenchmarkRechunk: a 1 GiB disk (from the repeated pattern) with 1% changed in 64 writes of 160 KiB;
// SetBytes is the disk size.
func BenchmarkRechunk(b *testing.B) {
	c := newChunker(b, defaultTestParams(AlgorithmCDC), 0)
	const size = 1 << 30
	var spans []span
	err := c.Split(context.Background(), repeatSource{}, size, nil, func(ch Chunk) error {
		spans = append(spans, span{ch.Offset, int64(ch.Length), ch.Zero})
		ReleaseBuffer(ch.Data)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	parent := parentList(spans, func() bool { return true })
	var changed []Extent
	for i := range 64 {
		changed = append(changed, Extent{int64(i)*(size/64) + 12345, 160 << 10})
	}
	b.SetBytes(size)
	m := meterCPU(b)
	defer m.stop(size)
	var st Stats
	for range b.N {
		st = Stats{}
		err := c.Rechunk(WithStats(context.Background(), &st), repeatSource{}, repeatSource{}, size, parent, changed, func(ch Chunk) error {
			ReleaseBuffer(ch.Data)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.SourceBytesRead), "src-bytes")
	b.ReportMetric(float64(st.ParentBytesRead), "parent-bytes")
}

// cpuMeter reports throughput per CPU second as well: on a shared machine wall time also counts
// the time other processes held the cores.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func meterCPU(b *testing.B) *cpuMeter {
	b.ResetTimer()
	return &cpuMeter{b: b, start: cpuNow()}
}

func (m *cpuMeter) stop(bytesPerOp int64) {
	m.b.StopTimer()
	if d := cpuNow() - m.start; d > 0 {
		m.b.ReportMetric(float64(bytesPerOp)*float64(m.b.N)/1e6/d.Seconds(), "MB/cpu-s")
	}
}
