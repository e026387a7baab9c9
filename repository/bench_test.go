package repository

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Kernel micro-benchmarks: what the primitives allow per core on this machine.

// benchData returns 1 MiB of either incompressible random bytes or a
// VM-disk-like mix (text, structured records, some random) that zstd
// fastest shrinks to roughly a third.
func benchData(compressible bool) []byte {
	b := make([]byte, 1<<20)
	src := rand.NewChaCha8([32]byte{1})
	src.Read(b)
	rng := rand.New(src)
	if !compressible {
		return b
	}
	words := []string{"kernel ", "usr/lib/x86_64-linux-gnu/", "libc.so.6 ", "systemd ", "0000 ", "config ", "\x00\x00", "vmvault "}
	for i := 0; i < len(b); {
		switch rng.IntN(4) {
		case 0: // leave 256 random bytes
			i += 256
		case 1: // structured little-endian records
			for j := 0; j < 64 && i+8 <= len(b); j++ {
				binary.LittleEndian.PutUint64(b[i:], uint64(j*4096))
				i += 8
			}
		default: // text
			for j := 0; j < 32 && i < len(b); j++ {
				i += copy(b[i:], words[rng.IntN(len(words))])
			}
		}
	}
	return b
}

// cpuTime is this process's user+system CPU time. Reporting bytes per
// CPU-second ("cpuMB/s") makes the figures robust on a machine shared with
// other jobs: it says what one core achieves, whatever the wall clock did.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, bytesPerOp int64, start time.Duration) {
	if cpu := cpuTime() - start; cpu > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/cpu.Seconds()/1e6, "cpuMB/s")
	}
}

func BenchmarkSHA256(b *testing.B) {
	data := benchData(false)
	b.SetBytes(int64(len(data)))
	start := cpuTime()
	for b.Loop() {
		sha256.Sum256(data)
	}
	reportCPU(b, int64(len(data)), start)
}

func BenchmarkHMACSHA256(b *testing.B) {
	data := benchData(false)
	h := hmac.New(sha256.New, make([]byte, 32))
	var out [32]byte
	b.SetBytes(int64(len(data)))
	start := cpuTime()
	for b.Loop() {
		h.Reset()
		h.Write(data)
		h.Sum(out[:0])
	}
	reportCPU(b, int64(len(data)), start)
}

// BenchmarkBlobID: the codec's id function per config id_mac, one core, on
// blobs of 1 MiB (the CDC average), 64 KiB and 4 KiB (an incremental's
// pieces).
func BenchmarkBlobID(b *testing.B) {
	key := make([]byte, 32)
	for _, size := range []int{1 << 20, 64 << 10, 4 << 10} {
		data := benchData(false)[:size]
		for _, f := range []string{IDMACBLAKE3, IDMACHMACSHA256, "sha256 (unencrypted)"} {
			benchBlobID(b, fmt.Sprintf("%s/%dKiB", f, size>>10), f, key, data)
		}
	}
}

func benchBlobID(b *testing.B, name, f string, key, data []byte) {
	b.Run(name, func(b *testing.B) {
		var c *codec
		var err error
		if f == "sha256 (unencrypted)" {
			c, err = newCodec(nil, nil, "", "fastest")
		} else {
			c, err = newCodec(key, key, f, "fastest")
		}
		if err != nil {
			b.Fatal(err)
		}
		defer c.close()
		b.SetBytes(int64(len(data)))
		start := cpuTime()
		for b.Loop() {
			c.id(data)
		}
		reportCPU(b, int64(len(data)), start)
	})
}

func BenchmarkAESGCMSeal(b *testing.B) {
	data := benchData(false)
	blk, _ := aes.NewCipher(make([]byte, 32))
	g, _ := cipher.NewGCM(blk)
	nonce := make([]byte, 12)
	dst := make([]byte, 0, len(data)+16)
	b.SetBytes(int64(len(data)))
	start := cpuTime()
	for b.Loop() {
		g.Seal(dst[:0], nonce, data, nil)
	}
	reportCPU(b, int64(len(data)), start)
}

func benchZstd(b *testing.B, level zstd.EncoderLevel, compressible bool) {
	data := benchData(compressible)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithWindowSize(1<<20))
	defer enc.Close()
	dst := make([]byte, 0, len(data)+1024)
	b.SetBytes(int64(len(data)))
	var n int
	start := cpuTime()
	for b.Loop() {
		n = len(enc.EncodeAll(data, dst[:0]))
	}
	reportCPU(b, int64(len(data)), start)
	b.ReportMetric(float64(n)/float64(len(data)), "ratio")
}

func BenchmarkZstdFastestCompressible(b *testing.B) { benchZstd(b, zstd.SpeedFastest, true) }
func BenchmarkZstdFastestRandom(b *testing.B)       { benchZstd(b, zstd.SpeedFastest, false) }
func BenchmarkZstdDefaultCompressible(b *testing.B) { benchZstd(b, zstd.SpeedDefault, true) }
func BenchmarkZstdDefaultRandom(b *testing.B)       { benchZstd(b, zstd.SpeedDefault, false) }

func BenchmarkZstdDecode(b *testing.B) {
	data := benchData(true)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	comp := enc.EncodeAll(data, nil)
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	defer dec.Close()
	dst := make([]byte, 0, len(data))
	b.SetBytes(int64(len(data)))
	start := cpuTime()
	for b.Loop() {
		dec.DecodeAll(comp, dst[:0])
	}
	reportCPU(b, int64(len(data)), start)
}

// BenchmarkPutChunk: 1 MiB chunks from parallel workers (GOMAXPROCS), each
// unique (no dedup), through the whole write path including pack fsyncs.
func BenchmarkPutChunk(b *testing.B) {
	for _, bc := range []struct {
		name         string
		compressible bool
		opts         []TestOption
		fsync        bool
	}{
		{"random/encrypted", false, nil, true},
		{"compressible/encrypted", true, nil, true},
		{"random/unencrypted", false, []TestOption{WithNoEncryption()}, true},
		{"random/encrypted/nofsync", false, nil, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			if err := Init(context.Background(), dir, []byte("x"), InitOptions{Chunker: TestChunker, KDF: TestKDF, NoEncryption: len(bc.opts) > 0}); err != nil {
				b.Fatal(err)
			}
			r, err := Open(context.Background(), dir, []byte("x"), OpenOptions{NoFsync: !bc.fsync})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			s, _ := r.NewSession(context.Background())
			defer s.Abort()
			base := benchData(bc.compressible)
			var ctr atomic.Uint64
			b.SetBytes(int64(len(base)))
			b.ResetTimer()
			start := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				data := append([]byte(nil), base...)
				for pb.Next() {
					binary.LittleEndian.PutUint64(data, ctr.Add(1))
					if _, _, _, err := s.PutChunk(context.Background(), data); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if err := s.flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			reportCPU(b, int64(len(base)), start)
		})
	}
}

// BenchmarkStream restores a 256 MiB disk (half random, a quarter
// compressible, a quarter holes) to a sparse file.
func BenchmarkStream(b *testing.B) {
	r := TestRepository(b)
	ctx := context.Background()
	const size = 256 << 20
	s, _ := r.NewSession(ctx)
	var ext []Extent
	rnd, cmp := benchData(false), benchData(true)
	for off := int64(0); off < size; off += 1 << 20 {
		i := off >> 20
		var data []byte
		switch i % 4 {
		case 0, 1:
			data = append([]byte(nil), rnd...)
		case 2:
			data = append([]byte(nil), cmp...)
		case 3:
			ext = append(ext, Extent{Offset: off, Length: 1 << 20, Zero: true})
			continue
		}
		binary.LittleEndian.PutUint64(data, uint64(i))
		id, _, _, err := s.PutChunk(ctx, data)
		if err != nil {
			b.Fatal(err)
		}
		ext = append(ext, Extent{Offset: off, Length: 1 << 20, ID: id})
	}
	root, err := s.PutDisk(ctx, size, ext)
	if err != nil {
		b.Fatal(err)
	}
	p, err := s.Commit(ctx, NewPoint{Time: testTime, Disks: []NewDisk{{Capacity: size, Map: root}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("WriteTo", func(b *testing.B) {
		b.SetBytes(size)
		start := cpuTime()
		for b.Loop() {
			d, _ := r.OpenDisk(ctx, p.ID, 0)
			if _, err := d.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, size, start)
	})
	out := filepath.Join(b.TempDir(), "out")
	b.Run("sparse-file", func(b *testing.B) {
		b.SetBytes(size)
		start := cpuTime()
		for b.Loop() {
			f, _ := os.Create(out)
			f.Truncate(size)
			d, err := r.OpenDisk(ctx, p.ID, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Stream(ctx, f, nil); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		reportCPU(b, size, start)
	})
}
