package s3suite

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/s3store"
)

// run is one appliance command's cost.
type run struct {
	wall, cpu, gwCPU float64 // seconds
	rssMiB           float64 // peak RSS of the appliance
}

func (c *cli) timed(b *testing.B, gwPID int, args ...string) (run, string) {
	b.Helper()
	var gw0 float64
	if gwPID > 0 {
		gw0 = s3store.ProcessCPU(b, gwPID)
	}
	cmd := c.cmd(args...)
	var out strings.Builder
	cmd.Stdout = &out
	var errb strings.Builder
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("appliance %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	r := run{wall: time.Since(start).Seconds()}
	ps := cmd.ProcessState
	r.cpu = (ps.UserTime() + ps.SystemTime()).Seconds()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		r.rssMiB = float64(ru.Maxrss) / 1024
	}
	if gwPID > 0 {
		r.gwCPU = s3store.ProcessCPU(b, gwPID) - gw0
	}
	return r, out.String()
}

func median(rs []run) run {
	pick := func(get func(run) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	return run{
		wall:   pick(func(r run) float64 { return r.wall }),
		cpu:    pick(func(r run) float64 { return r.cpu }),
		gwCPU:  pick(func(r run) float64 { return r.gwCPU }),
		rssMiB: pick(func(r run) float64 { return r.rssMiB }),
	}
}

// BenchmarkS3VsLocal measures `appliance image backup` and `image restore`
// of disk images (VMVAULT_BENCH_MIB, default 256 MiB) into and out of a
// fresh encrypted repository on a local directory and on versitygw on
// loopback, alternating, VMVAULT_BENCH_RUNS times each (default 3,
// medians; the S3/local ratios are the medians of each pair's), and
// reports MB/s (of the image's allocated bytes), CPU-seconds (the
// appliance's and the gateway's), peak RSS, and S3/local speed ratios
// (issue 16's targets: backup ≥ 0.80, restore ≥ 0.70), per disk class:
//
//   - random: dense random bytes, the worst case (every byte is stored
//     and sent);
//   - os: an ext4 file system made by mkfs.ext4 -d from a copy of files
//     of /usr/lib/x86_64-linux-gnu (libraries and executables, about
//     three quarters full): compressible, with free space.
//
// VMVAULT_BENCH_CLASS=random|os|both (default both) picks them.
// VMVAULT_BENCH_GW_FLAGS (e.g. "--data-integrity-etag": no MD5 of every
// object for its ETag) adds a second gateway run with those posix flags,
// measured in the same rounds as a third backend, "s3flags".
// VMVAULT_BENCH_PROFILE=DIR writes CPU profiles of the first run of
// each. Run with -benchtime 1x:
//
//	go test -run '^$' -bench S3VsLocal -benchtime 1x ./internal/s3suite/
func BenchmarkS3VsLocal(b *testing.B) {
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("VMVAULT_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("VMVAULT_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	var classes []string
	switch c := os.Getenv("VMVAULT_BENCH_CLASS"); c {
	case "", "both":
		classes = []string{"random", "os"}
	case "random", "os":
		classes = []string{c}
	default:
		b.Fatalf("VMVAULT_BENCH_CLASS=%q: want random, os or both", c)
	}
	b.Logf("load average at start: %s", loadAvg())
	dir := b.TempDir()
	bin := buildApplianceB(b)
	images := map[string]string{}
	for _, class := range classes {
		if class == "random" {
			images[class] = randomImage(b, dir, mib)
		} else {
			images[class] = osImage(b, dir, mib)
		}
	}
	type backend struct {
		name string
		gw   int
		env  []string // the gateway's credentials
		repo func(i int) string
	}
	backends := []backend{{"local", 0, nil, func(i int) string { return filepath.Join(dir, fmt.Sprintf("local-%d", i)) }}}
	addS3 := func(name string, flags ...string) {
		srv := s3store.StartTestServerWith(b, flags...)
		// Each server has its own secret; StartTestServerWith set this
		// one's in the environment, the next one replaces it there.
		env := []string{"AWS_ACCESS_KEY_ID=" + os.Getenv("AWS_ACCESS_KEY_ID"), "AWS_SECRET_ACCESS_KEY=" + os.Getenv("AWS_SECRET_ACCESS_KEY")}
		backends = append(backends, backend{name, srv.PID, env, func(i int) string { return srv.Location("vmvault-bench", fmt.Sprintf("run-%d", i)) }})
	}
	addS3("s3")
	if flags := strings.Fields(os.Getenv("VMVAULT_BENCH_GW_FLAGS")); len(flags) > 0 {
		addS3("s3flags", flags...)
		b.Logf("s3flags: versitygw posix %s", strings.Join(flags, " "))
	}
	type key struct{ class, be string }
	bk := map[key][]run{}
	rs := map[key][]run{}
	ls := map[key][]run{} // repo list: what opening and closing costs
	bkRatio := map[key][]float64{}
	rsRatio := map[key][]float64{}
	n := 0
	for range b.N {
		for _, class := range classes {
			img := images[class]
			// The backends alternate, so that all see the same load of the
			// machine (the two cores are shared); the ratios are per round.
			for range runs {
				n++
				for _, be := range backends {
					k := key{class, be.name}
					c := &cli{bin: bin, repo: be.repo(n), env: append([]string{
						"VMVAULT_PASSWORD=bench-password",
						"VMVAULT_CACHE_DIR=" + filepath.Join(dir, "cache-"+be.name+strconv.Itoa(n)),
					}, be.env...)}
					c.timed(b, 0, "repo", "init", "--create-bucket", "--kdf-memory", "8192", "--kdf-time", "1")
					first := len(bk[k]) == 0
					prof := func(op string) {
						// VMVAULT_BENCH_PROFILE=DIR: CPU profiles of the first run.
						if p := os.Getenv("VMVAULT_BENCH_PROFILE"); p != "" && first {
							c.env = append(c.env, "VMVAULT_CPUPROFILE="+filepath.Join(p, class+"-"+be.name+"-"+op+".pprof"))
						}
					}
					base := c.env
					prof("backup")
					r, _ := c.timed(b, be.gw, "image", "backup", "--vm", "bench", img)
					c.env = base
					bk[k] = append(bk[k], r)
					lr, list := c.timed(b, 0, "repo", "list", "--json")
					ls[k] = append(ls[k], lr)
					id := pointID(b, list)
					out := filepath.Join(dir, "restored.img")
					prof("restore")
					r, _ = c.timed(b, be.gw, "image", "restore", "--restore-point", id, out)
					c.env = base
					rs[k] = append(rs[k], r)
					if first {
						sameFile(b, img, out) // a fast wrong restore is no result
					}
					os.Remove(out)
				}
				loc := key{class, "local"}
				i := len(bk[loc]) - 1
				for _, be := range backends[1:] {
					k := key{class, be.name}
					bkRatio[k] = append(bkRatio[k], bk[loc][i].wall/bk[k][i].wall)
					rsRatio[k] = append(rsRatio[k], rs[loc][i].wall/rs[k][i].wall)
				}
			}
		}
	}
	for _, class := range classes {
		mb := float64(allocated(b, images[class])) / 1e6
		for _, be := range backends {
			k := key{class, be.name}
			p := class + "-" + be.name + "-"
			for _, op := range []string{"backup", "restore"} {
				r := median(bk[k])
				if op == "restore" {
					r = median(rs[k])
				}
				b.ReportMetric(mb/r.wall, p+op+"-MB/s")
				b.ReportMetric(r.cpu, p+op+"-cpu-s")
				b.ReportMetric(r.rssMiB, p+op+"-peakRSS-MiB")
				if be.gw > 0 {
					b.ReportMetric(r.gwCPU, p+op+"-gateway-cpu-s")
				}
			}
			b.ReportMetric(median(ls[k]).wall, p+"open+list-s")
			if be.gw > 0 {
				b.ReportMetric(medianF(bkRatio[k]), class+"-backup-"+be.name+"/local")
				b.ReportMetric(medianF(rsRatio[k]), class+"-restore-"+be.name+"/local")
			}
		}
	}
	b.Logf("load average at end: %s", loadAvg())
}

// loadAvg is /proc/loadavg's first three fields: the figures are only
// comparable between runs on a machine equally busy.
func loadAvg() string {
	l, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(l))
	return strings.Join(f[:min(3, len(f))], " ")
}

// allocated is the bytes of the file's blocks (what `image backup` reads).
func allocated(b *testing.B, path string) int64 {
	b.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		b.Fatal(err)
	}
	return st.Blocks * 512
}

// randomImage writes mib MiB of random bytes.
func randomImage(b *testing.B, dir string, mib int) string {
	b.Helper()
	img := filepath.Join(dir, "random.img")
	// Written 1 MiB at a time: the children's peak RSS (wait4's ru_maxrss)
	// starts from this process's RSS at fork.
	f, err := os.Create(img)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for range mib {
		rand.Read(buf)
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return img
}

// osSource is where the os class's files come from (as scripts/bench.sh).
const osSource = "/usr/lib/x86_64-linux-gnu"

// osImage makes a mib MiB ext4 image by mkfs.ext4 -d from a copy of the
// first files of osSource (in lexical order, symlinks kept) that fill
// about three quarters of it.
func osImage(b *testing.B, dir string, mib int) string {
	b.Helper()
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		b.Fatalf("the os class needs mkfs.ext4 (e2fsprogs, in the Makefile's TEST_TOOLS; or VMVAULT_BENCH_CLASS=random): %v", err)
	}
	tree := filepath.Join(dir, "tree")
	left := int64(mib) << 20 * 3 / 4
	err = filepath.WalkDir(osSource, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: not copied
		}
		dst := filepath.Join(tree, p)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return nil
			}
			return os.Symlink(l, dst)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil || info.Size() > left {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			left -= int64(len(data))
			return os.WriteFile(dst, data, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		b.Fatalf("copy %s: %v", osSource, err)
	}
	img := filepath.Join(dir, "os.img")
	if out, err := exec.Command(mkfs, "-q", "-F", "-E", "root_owner=0:0", "-d", tree, img, fmt.Sprintf("%dM", mib)).CombinedOutput(); err != nil {
		b.Fatalf("mkfs.ext4 -d %s: %v\n%s", tree, err, out)
	}
	if err := os.RemoveAll(tree); err != nil {
		b.Fatal(err)
	}
	b.Logf("os image: %d MiB, %d MiB allocated (mkfs.ext4 -d from %s)", mib, allocated(b, img)>>20, osSource)
	return img
}

// sameFile fails b unless the two files have the same bytes.
func sameFile(b *testing.B, p1, p2 string) {
	b.Helper()
	f1, err := os.Open(p1)
	if err != nil {
		b.Fatal(err)
	}
	defer f1.Close()
	f2, err := os.Open(p2)
	if err != nil {
		b.Fatal(err)
	}
	defer f2.Close()
	b1, b2 := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; off += 1 << 20 {
		n1, err1 := io.ReadFull(f1, b1)
		n2, _ := io.ReadFull(f2, b2)
		if n1 != n2 || !bytes.Equal(b1[:n1], b2[:n2]) {
			b.Fatalf("restored %s differs from %s in the MiB at %d", p2, p1, off)
		}
		if err1 != nil {
			return
		}
	}
}

func medianF(v []float64) float64 {
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	return v[len(v)/2]
}

func pointID(b *testing.B, list string) string {
	b.Helper()
	i := strings.Index(list, `"id":"`)
	if i < 0 {
		i = strings.Index(list, `"id": "`)
		if i < 0 {
			b.Fatalf("no point in repo list --json: %s", list)
		}
		i++
	}
	rest := list[i+6:]
	return rest[:strings.IndexByte(rest, '"')]
}

// buildApplianceB is buildAppliance for a benchmark.
func buildApplianceB(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "appliance")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/vmvault/vmvault/cmd/appliance")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build appliance: %v\n%s", err, out)
	}
	return bin
}
