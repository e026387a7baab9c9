package benchstage

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/vmvault/vmvault/backup/imagebackup"
	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/disk/imagefile"
	"github.com/vmvault/vmvault/internal/directio"
	"github.com/vmvault/vmvault/repository"
)

// The appliance's heap limit (cmd/appliance/main.go), applied around the
// pipeline runs so that the GC behaves as in `appliance image backup`.
const applianceMemoryLimit = 160 << 20

var classes = []struct{ file, name string }{
	{"os.img", "OS binaries"},
	{"vm.img", "text and documents"},
	{"random.img", "dense random"},
}

// classResult is one disk class's figures, CPU seconds.
type classResult struct {
	name      string
	alloc     int64 // allocated bytes of the image
	kernel    map[string]time.Duration
	backup    map[string]time.Duration // pipeline, profile-attributed, scaled to rusage
	backupCPU time.Duration
	backupGC  float64 // runtime/metrics GC CPU seconds
	backupW   time.Duration
	stored    int64
	restore   map[string]map[string]time.Duration // I/O mode -> stage
	restCPU   map[string]time.Duration
	restW     map[string]time.Duration
	notes     []string
}

// BenchmarkStages prints the stage table (docs/PERFORMANCE.md): run it with
// `make bench-stages` (the images of `make bench`, BENCH_ONLY=data
// scripts/bench.sh). VMVAULT_BENCH_IMG names the image directory,
// VMVAULT_STAGE_CLASSES picks classes (os vm random), VMVAULT_STAGE_OUT
// also writes the table to a file.
func BenchmarkStages(b *testing.B) {
	dir := os.Getenv("VMVAULT_BENCH_IMG")
	if dir == "" {
		dir = filepath.Join("..", "..", ".bench", "img")
	}
	pick := os.Getenv("VMVAULT_STAGE_CLASSES")
	var res []*classResult
	load0 := loadavg()
	for _, c := range classes {
		if pick != "" && !strings.Contains(" "+pick+" ", " "+strings.TrimSuffix(c.file, ".img")+" ") {
			continue
		}
		path := filepath.Join(dir, c.file)
		if _, err := os.Stat(path); err != nil {
			b.Fatalf("%s: %v (make the images with `BENCH_ONLY=data scripts/bench.sh`, or `make bench-stages`)", path, err)
		}
		for i := 0; i < b.N; i++ {
			r, err := measureClass(b, path, c.name)
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			if i == b.N-1 {
				res = append(res, r)
			}
		}
	}
	table := render(res, load0, loadavg())
	fmt.Print(table)
	if out := os.Getenv("VMVAULT_STAGE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

var profileSeq int

// profiledKey holds, in a pipeline's stage map, the CPU the profile sampled.
const profiledKey = "_profiled"

func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// profiled runs fn under the appliance's memory limit with a CPU profile
// and returns the process CPU it used, the wall time, the GC CPU and the
// profile split into stages (scaled so that the stages sum to the CPU).
func profiled(b *testing.B, restore bool, fn func() error) (map[string]time.Duration, time.Duration, time.Duration, float64, error) {
	runtime.GC()
	old := debug.SetMemoryLimit(applianceMemoryLimit)
	defer debug.SetMemoryLimit(old)
	pf := filepath.Join(b.TempDir(), "cpu.pprof")
	if d := os.Getenv("VMVAULT_STAGE_PROFILES"); d != "" {
		// Keep the profiles, for go tool pprof when a row needs explaining.
		profileSeq++
		pf = filepath.Join(d, fmt.Sprintf("stage-%d.pprof", profileSeq))
	}
	f, err := os.Create(pf)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	var ru0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	g0, c0, w0 := gcCPU(), ProcessCPU(), time.Now()
	// 250 Hz instead of pprof's 100 (StartCPUProfile keeps a rate set
	// before it and says so on stderr): the kernel tick here (CONFIG_HZ=250)
	// bounds the per-thread CPU timers, so a faster rate loses samples.
	runtime.SetCPUProfileRate(250)
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, 0, 0, 0, err
	}
	err = fn()
	pprof.StopCPUProfile()
	cpu, wall, gc := ProcessCPU()-c0, time.Since(w0), gcCPU()-g0
	f.Close()
	if err != nil {
		return nil, 0, 0, 0, err
	}
	out, err := exec.Command("go", "tool", "pprof", "-traces", pf).Output()
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("go tool pprof -traces: %w", err)
	}
	st, err := ParseTraces(bytes.NewReader(out), restore)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	var sum time.Duration
	for _, v := range st {
		sum += v
	}
	if os.Getenv("VMVAULT_STAGE_DEBUG") != "" {
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru)
		fmt.Fprintf(os.Stderr, "profile %v of cpu %v: user %v sys %v\n", sum, cpu,
			time.Duration(ru.Utime.Nano()-ru0.Utime.Nano()), time.Duration(ru.Stime.Nano()-ru0.Stime.Nano()))
	}
	if sum > 0 {
		for k, v := range st {
			st[k] = time.Duration(float64(v) * float64(cpu) / float64(sum))
		}
	}
	st[profiledKey] = sum // the samples' own total, for the coverage row
	return st, cpu, wall, gc, nil
}

func measureClass(b *testing.B, path, name string) (*classResult, error) {
	ctx := context.Background()
	res := &classResult{name: name, kernel: map[string]time.Duration{}, restore: map[string]map[string]time.Duration{},
		restCPU: map[string]time.Duration{}, restW: map[string]time.Duration{}}
	im, err := imagefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer im.Close()
	alloc, err := im.Allocated()
	if err != nil {
		return nil, err
	}
	exts := make([]dedup.Extent, len(alloc))
	for i, a := range alloc {
		exts[i] = dedup.Extent{Offset: a.Offset, Length: a.Length}
		res.alloc += a.Length
	}
	p, err := dedup.DefaultParams()
	if err != nil {
		return nil, err
	}
	p.Algorithm = dedup.AlgorithmCDC
	chunker, err := dedup.New(p)
	if err != nil {
		return nil, err
	}

	// 1. read and chunk kernels (also warms the page cache, as make bench's runs are warm).
	const window = 64 << 20
	win := make([]byte, window)
	n := 0
	flushCut := func() error {
		if n == 0 {
			return nil
		}
		t, err := OnThread(func() error { _, err := dedup.CutKernel(chunker, win[:n]); return err })
		res.kernel[Chunk] += t
		n = 0
		return err
	}
	for _, x := range exts {
		for off := x.Offset; off < x.Offset+x.Length; {
			k := int(min(int64(window-n), x.Offset+x.Length-off, 8<<20))
			t, err := OnThread(func() error { _, err := im.ReadAt(win[n:n+k], off); return err })
			if err != nil {
				return nil, fmt.Errorf("read kernel: %w", err)
			}
			res.kernel[Read] += t
			n, off = n+k, off+int64(k)
			if n == window {
				if err := flushCut(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := flushCut(); err != nil {
		return nil, err
	}
	win = nil

	// 2. the pipeline: imagebackup.Backup into a new encrypted repository
	// (repository defaults, as `appliance repo init`), then restores.
	work := b.TempDir()
	repoDir := filepath.Join(work, "repo")
	pw := []byte("bench-password")
	if err := repository.Init(ctx, repoDir, pw, repository.InitOptions{
		Chunker: repository.ChunkerConfig{Algorithm: p.Algorithm, Polynomial: p.Polynomial, MinSize: p.MinSize, AvgSize: p.AvgSize, MaxSize: p.MaxSize},
		KDF:     repository.DefaultKDF,
	}); err != nil {
		return nil, err
	}
	r, err := repository.Open(ctx, repoDir, pw, repository.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ims, err := imagebackup.Open([]string{path})
	if err != nil {
		return nil, err
	}
	defer ims.Close()
	var out imagebackup.Result
	res.backup, res.backupCPU, res.backupW, res.backupGC, err = profiled(b, false, func() error {
		var err error
		out, err = imagebackup.Backup(ctx, r, ims, imagebackup.Request{VM: "bench"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	res.stored = out.StoredBytesAdded
	// Restore as `appliance image restore` does (direct I/O on ext4/xfs),
	// then through the page cache (DiskReader.Stream into the file).
	outDir := filepath.Dir(path) // the images' file system, like bench.sh's restores
	for _, mode := range []string{"direct", "page cache"} {
		dst := filepath.Join(outDir, ".stage-restore.img")
		os.Remove(dst)
		syncFS()
		st, cpu, wall, _, err := profiled(b, true, func() error {
			if mode == "direct" {
				_, err := imagebackup.Restore(ctx, r, imagebackup.RestoreRequest{Point: out.RestorePoint, Out: dst})
				return err
			}
			return restorePageCache(ctx, r, out.RestorePoint, dst)
		})
		if err != nil {
			return nil, fmt.Errorf("restore (%s): %w", mode, err)
		}
		if mode != "direct" {
			// the same Stream as the direct run, which cmp checked
		} else if err := sameFile(dst, path); err != nil {
			return nil, fmt.Errorf("restore (%s): %w", mode, err)
		}
		os.Remove(dst)
		res.restore[mode], res.restCPU[mode], res.restW[mode] = st, cpu, wall
	}

	// 3. read-pack kernel: the packs this backup wrote, 8 MiB preads.
	packs, _ := filepath.Glob(filepath.Join(repoDir, "packs", "*", "*"))
	buf := make([]byte, 8<<20)
	for _, pk := range packs {
		f, err := os.Open(pk)
		if err != nil {
			return nil, err
		}
		t, err := OnThread(func() error {
			for off := int64(0); ; off += int64(len(buf)) {
				k, err := f.ReadAt(buf, off)
				if k < len(buf) || err != nil {
					return nil
				}
			}
		})
		f.Close()
		if err != nil {
			return nil, err
		}
		res.kernel[ReadPack] += t
	}

	// 4. the per-chunk kernels on the same chunks (Split's), a window at a time.
	if err := chunkKernels(ctx, res, im, chunker, exts, work); err != nil {
		return nil, err
	}
	return res, nil
}

func prefault(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b[:0]
}

func syncFS() { exec.Command("sync").Run() }

func restorePageCache(ctx context.Context, r *repository.Repository, point, dst string) error {
	dr, err := r.OpenDisk(ctx, point, 0)
	if err != nil {
		return err
	}
	defer dr.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(dr.Size()); err != nil {
		return err
	}
	return dr.Stream(ctx, f, nil)
}

// sameFile compares the restored file with the image (cmp).
func sameFile(a, b string) error {
	if out, err := exec.Command("cmp", a, b).CombinedOutput(); err != nil {
		return fmt.Errorf("restored image differs: %s %v", out, err)
	}
	return nil
}

type kchunk struct {
	off            int64
	data, comp, st []byte
	zstd           bool
	id             [32]byte
}

func chunkKernels(ctx context.Context, res *classResult, im imagefile.Image, chunker dedup.Chunker, exts []dedup.Extent, work string) error {
	key := make([]byte, 32)
	rand.Read(key)
	h, err := blake3.NewKeyed(key)
	if err != nil {
		return err
	}
	opts := []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true), zstd.WithWindowSize(1 << 20)}
	enc, _ := zstd.NewWriter(nil, append(opts, zstd.WithEncoderLevel(zstd.SpeedDefault))...)
	encSmall, _ := zstd.NewWriter(nil, append(opts, zstd.WithEncoderLevel(zstd.SpeedFastest))...)
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(repository.MaxBlobSize))
	defer enc.Close()
	defer encSmall.Close()
	defer dec.Close()
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	db, err := bolt.Open(filepath.Join(work, "kernel.db"), 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	packDir := filepath.Join(work, "kpacks")
	os.MkdirAll(packDir, 0o755)
	outPC, err := os.Create(filepath.Join(work, "kout-pc.img"))
	if err != nil {
		return err
	}
	defer outPC.Close()
	outPC.Truncate(im.Size())
	outD, err := os.Create(filepath.Join(filepath.Dir(work), "kout-direct.img"))
	if err != nil {
		return err
	}
	defer os.Remove(outD.Name())
	defer outD.Close()
	outD.Truncate(im.Size())
	dw, derr := directio.Open(outD)
	if derr != nil {
		res.notes = append(res.notes, fmt.Sprintf("direct write kernel not run: %v", derr))
	}
	var pack *os.File
	var packN int64
	packs := 0
	plain := make([]byte, 0, repository.MaxBlobSize)
	var win, slots []*kchunk // slots keep their comp and st buffers from window to window
	var winBytes int
	process := func() error {
		var err error
		add := func(stage string, fn func() error) {
			if err != nil {
				return
			}
			var t time.Duration
			t, err = OnThread(fn)
			res.kernel[stage] += t
		}
		add(ID, func() error {
			for _, c := range win {
				h.Reset()
				h.Write(c.data)
				h.Sum(c.id[:0])
			}
			return nil
		})
		add(Compress, func() error {
			for _, c := range win {
				e := enc
				if len(c.data) <= 64<<10 {
					e = encSmall
				}
				c.comp = e.EncodeAll(c.data, c.comp[:0])
				c.zstd = len(c.comp) < len(c.data)
			}
			return nil
		})
		add(Seal, func() error {
			for _, c := range win {
				payload := c.data
				if c.zstd {
					payload = c.comp
				}
				c.st = c.st[:12]
				rand.Read(c.st)
				c.st = aead.Seal(c.st, c.st[:12], payload, c.id[:])
			}
			return nil
		})
		add(PackW, func() error {
			for _, c := range win {
				if pack == nil {
					var err error
					if pack, err = os.Create(filepath.Join(packDir, fmt.Sprintf("tmp-%d", packs))); err != nil {
						return err
					}
				}
				if _, err := pack.Write(c.st); err != nil {
					return err
				}
				packN += int64(len(c.st))
				if packN >= repository.DefaultPackSize {
					if err := closePack(pack, packDir, packs); err != nil {
						return err
					}
					pack, packN, packs = nil, 0, packs+1
				}
			}
			return nil
		})
		add(Catalog, func() error {
			// One transaction per 32 MiB pack, as the repository indexes a
			// pack: key the id, value the location (pack, offset, lengths).
			return db.Update(func(tx *bolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte("blobs"))
				if err != nil {
					return err
				}
				v := make([]byte, 48)
				for _, c := range win {
					if err := bk.Put(c.id[:], v); err != nil {
						return err
					}
				}
				return nil
			})
		})
		add(Open, func() error {
			for _, c := range win {
				if _, err := aead.Open(c.st[12:12], c.st[:12], c.st[12:], c.id[:]); err != nil {
					return err
				}
			}
			return nil
		})
		add(Decompress, func() error {
			for _, c := range win {
				if c.zstd {
					if _, err := dec.DecodeAll(c.comp, plain[:0]); err != nil {
						return err
					}
				}
			}
			return nil
		})
		add(Verify, func() error {
			var id [32]byte
			for _, c := range win {
				h.Reset()
				h.Write(c.data)
				h.Sum(id[:0])
				if id != c.id {
					return fmt.Errorf("verify kernel: id mismatch")
				}
			}
			return nil
		})
		add(Write+" (page cache)", func() error {
			for _, c := range win {
				if _, err := outPC.WriteAt(c.data, c.off); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil && dw != nil {
			// The direct writer's own goroutines do the writes: process CPU.
			c0 := ProcessCPU()
			for _, c := range win {
				if _, err = dw.WriteAt(c.data, c.off); err != nil {
					break
				}
			}
			res.kernel[Write+" (direct)"] += ProcessCPU() - c0
		}
		for _, c := range win {
			dedup.ReleaseBuffer(c.data)
		}
		win, winBytes = win[:0], 0
		return err
	}
	const window = 32 << 20 // one pack's worth: the catalog kernel indexes a window in one transaction
	err = chunker.Split(ctx, im, im.Size(), exts, func(c dedup.Chunk) error {
		if c.Zero || c.Data == nil {
			return nil
		}
		if len(win) == len(slots) {
			// Prefaulted, as the pipeline's pooled buffers are after the first packs.
			slots = append(slots, &kchunk{comp: prefault(repository.MaxBlobSize), st: prefault(repository.MaxBlobSize + 64)})
		}
		k := slots[len(win)]
		k.off, k.data, k.zstd = c.Offset, c.Data, false
		win = append(win, k)
		winBytes += len(c.Data)
		if winBytes >= window {
			return process()
		}
		return nil
	})
	if err == nil {
		err = process()
	}
	if pack != nil && err == nil {
		err = closePack(pack, packDir, packs)
	}
	if dw != nil {
		c0 := ProcessCPU()
		if cerr := dw.Close(); err == nil {
			err = cerr
		}
		res.kernel[Write+" (direct)"] += ProcessCPU() - c0
	}
	return err
}

// closePack: fsync, rename, fsync dir, as a pack is finalised.
func closePack(f *os.File, dir string, n int) error {
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, fmt.Sprintf("pack-%d", n))); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// render prints the stage tables (CPU seconds per GB of allocated bytes).
func render(res []*classResult, load0, load1 string) string {
	var s strings.Builder
	perGB := func(d time.Duration, alloc int64) string {
		return fmt.Sprintf("%.2f", d.Seconds()/(float64(alloc)/1e9))
	}
	fmt.Fprintf(&s, "Load average before: %s, after: %s. %d cores, %s. CPU-seconds per GB of allocated image bytes; kernel = the stage alone on one thread (thread CPU) on the same data; pipeline = imagebackup.Backup/Restore's process CPU (getrusage) split by a CPU profile.\n\n",
		load0, load1, runtime.NumCPU(), runtime.Version())
	head := func(title string) {
		fmt.Fprintf(&s, "| %s |", title)
		for _, r := range res {
			fmt.Fprintf(&s, " %s (%d MB): kernel | pipeline |", r.name, r.alloc/1e6)
		}
		s.WriteString("\n|---|")
		for range res {
			s.WriteString("---|---|")
		}
		s.WriteString("\n")
	}
	row := func(label string, k func(*classResult) string, p func(*classResult) string) {
		fmt.Fprintf(&s, "| %s |", label)
		for _, r := range res {
			fmt.Fprintf(&s, " %s | %s |", k(r), p(r))
		}
		s.WriteString("\n")
	}
	dash := func(*classResult) string { return "" }
	kern := func(stage string) func(*classResult) string {
		return func(r *classResult) string {
			if v, ok := r.kernel[stage]; ok {
				return perGB(v, r.alloc)
			}
			return ""
		}
	}
	sumOf := func(m map[string]time.Duration, keys []string) time.Duration {
		var t time.Duration
		for _, k := range keys {
			t += m[k]
		}
		return t
	}
	head("backup stage")
	for _, st := range BackupStages {
		row(st, kern(st), func(r *classResult) string { return perGB(r.backup[st], r.alloc) })
	}
	row("**sum of stages**", func(r *classResult) string { return perGB(sumOf(r.kernel, BackupStages), r.alloc) },
		func(r *classResult) string { return perGB(sumOf(r.backup, BackupStages), r.alloc) })
	for _, st := range OverheadStages {
		row("overhead: "+st, dash, func(r *classResult) string { return perGB(r.backup[st], r.alloc) })
	}
	row("**overhead (total − stages)**", dash, func(r *classResult) string {
		return perGB(r.backupCPU-sumOf(r.backup, BackupStages), r.alloc)
	})
	row("**total** (getrusage)", dash, func(r *classResult) string { return "**" + perGB(r.backupCPU, r.alloc) + "**" })
	row("total / kernels' sum", dash, func(r *classResult) string {
		return fmt.Sprintf("%.2fx", r.backupCPU.Seconds()/sumOf(r.kernel, BackupStages).Seconds())
	})
	row("profile samples / getrusage", dash, func(r *classResult) string {
		return fmt.Sprintf("%.0f%%", 100*r.backup[profiledKey].Seconds()/r.backupCPU.Seconds())
	})
	row("wall s / CPU s / stored MB", dash, func(r *classResult) string {
		return fmt.Sprintf("%.2f / %.2f / %.1f", r.backupW.Seconds(), r.backupCPU.Seconds(), float64(r.stored)/1e6)
	})
	s.WriteString("\n")
	for _, mode := range []string{"direct", "page cache"} {
		head("restore stage, " + mode + " writes")
		rstages := append([]string(nil), RestoreStages...)
		for _, st := range rstages {
			kst := st
			if st == Write {
				kst = Write + " (" + mode + ")"
			}
			row(st, kern(kst), func(r *classResult) string { return perGB(r.restore[mode][st], r.alloc) })
		}
		ksum := func(r *classResult) time.Duration {
			return sumOf(r.kernel, []string{ReadPack, Open, Decompress, Verify, Write + " (" + mode + ")"})
		}
		row("**sum of stages**", func(r *classResult) string { return perGB(ksum(r), r.alloc) },
			func(r *classResult) string { return perGB(sumOf(r.restore[mode], rstages), r.alloc) })
		for _, st := range OverheadStages {
			row("overhead: "+st, dash, func(r *classResult) string { return perGB(r.restore[mode][st], r.alloc) })
		}
		row("**overhead (total − stages)**", dash, func(r *classResult) string {
			return perGB(r.restCPU[mode]-sumOf(r.restore[mode], rstages), r.alloc)
		})
		row("**total** (getrusage)", dash, func(r *classResult) string { return "**" + perGB(r.restCPU[mode], r.alloc) + "**" })
		row("total / kernels' sum", dash, func(r *classResult) string {
			return fmt.Sprintf("%.2fx", r.restCPU[mode].Seconds()/ksum(r).Seconds())
		})
		row("profile samples / getrusage", dash, func(r *classResult) string {
			return fmt.Sprintf("%.0f%%", 100*r.restore[mode][profiledKey].Seconds()/r.restCPU[mode].Seconds())
		})
		row("wall s / CPU s", dash, func(r *classResult) string {
			return fmt.Sprintf("%.2f / %.2f", r.restW[mode].Seconds(), r.restCPU[mode].Seconds())
		})
		s.WriteString("\n")
	}
	var notes []string
	for _, r := range res {
		for _, n := range r.notes {
			notes = append(notes, r.name+": "+n)
		}
	}
	sort.Strings(notes)
	for _, n := range notes {
		fmt.Fprintf(&s, "- %s\n", n)
	}
	return s.String()
}
