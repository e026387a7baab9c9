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

// procCPU returns a process's user+system CPU seconds from /proc/PID/stat.
func procCPU(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatalf("gateway CPU: %v", err)
	}
	// The command name may hold spaces: fields start after the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64) // utime (field 14)
	st, _ := strconv.ParseFloat(f[12], 64) // stime (field 15)
	return (ut + st) / 100                 // USER_HZ is 100 on Linux
}

// run is one appliance command's cost.
type run struct {
	wall, cpu, gwCPU float64 // seconds
	rssMiB           float64 // peak RSS of the appliance
}

func (c *cli) timed(b *testing.B, gwPID int, args ...string) (run, string) {
	b.Helper()
	var gw0 float64
	if gwPID > 0 {
		gw0 = procCPU(b, gwPID)
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
		r.gwCPU = procCPU(b, gwPID) - gw0
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
// of a random image (VMVAULT_BENCH_MIB, default 256 MiB) into and out of a
// fresh encrypted repository on a local directory and on versitygw on
// loopback, alternating, VMVAULT_BENCH_RUNS times each (default 3,
// medians; the S3/local ratios are the medians of each pair's), and
// reports MB/s, CPU-seconds (the appliance's and the
// gateway's), peak RSS, and S3/local speed ratios (issue 16's targets:
// backup ≥ 0.80, restore ≥ 0.70). VMVAULT_BENCH_PROFILE=DIR writes CPU
// profiles of the first run of each. Run with -benchtime 1x:
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
	// VMVAULT_BENCH_GW_FLAGS: flags for versitygw's posix backend, e.g.
	// "--data-integrity-etag" (no MD5 of every object for its ETag).
	srv := s3store.StartTestServerWith(b, strings.Fields(os.Getenv("VMVAULT_BENCH_GW_FLAGS"))...)
	bin := buildApplianceB(b)
	dir := b.TempDir()
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
	backends := []struct {
		name string
		gw   int
		repo func(i int) string
	}{
		{"local", 0, func(i int) string { return filepath.Join(dir, fmt.Sprintf("local-%d", i)) }},
		{"s3", srv.PID, func(i int) string { return srv.Location("vmvault-bench", fmt.Sprintf("run-%d", i)) }},
	}
	bk := map[string][]run{}
	rs := map[string][]run{}
	ls := map[string][]run{} // repo list: what opening and closing costs
	var bkRatio, rsRatio []float64
	n := 0
	for range b.N {
		// Local and S3 alternate, so that both see the same load of the
		// machine (the two cores are shared); the ratios are per pair.
		for range runs {
			n++
			for _, be := range backends {
				c := &cli{bin: bin, repo: be.repo(n), env: []string{
					"VMVAULT_PASSWORD=bench-password",
					"VMVAULT_CACHE_DIR=" + filepath.Join(dir, "cache-"+be.name+strconv.Itoa(n)),
				}}
				c.timed(b, 0, "repo", "init", "--kdf-memory", "8192", "--kdf-time", "1")
				prof := func(op string) {
					// VMVAULT_BENCH_PROFILE=DIR: CPU profiles of the first run.
					if p := os.Getenv("VMVAULT_BENCH_PROFILE"); p != "" && n == 1 {
						c.env = append(c.env, "VMVAULT_CPUPROFILE="+filepath.Join(p, be.name+"-"+op+".pprof"))
					}
				}
				base := c.env
				prof("backup")
				r, _ := c.timed(b, be.gw, "image", "backup", "--vm", "bench", img)
				c.env = base
				bk[be.name] = append(bk[be.name], r)
				lr, list := c.timed(b, 0, "repo", "list", "--json")
				ls[be.name] = append(ls[be.name], lr)
				id := pointID(b, list)
				out := filepath.Join(dir, "restored.img")
				prof("restore")
				r, _ = c.timed(b, be.gw, "image", "restore", "--restore-point", id, out)
				c.env = base
				rs[be.name] = append(rs[be.name], r)
				if n == 1 {
					sameFile(b, img, out) // a fast wrong restore is no result
				}
				os.Remove(out)
			}
			k := len(bk["s3"]) - 1
			bkRatio = append(bkRatio, bk["local"][k].wall/bk["s3"][k].wall)
			rsRatio = append(rsRatio, rs["local"][k].wall/rs["s3"][k].wall)
		}
	}
	mb := float64(mib<<20) / 1e6
	for _, be := range []string{"local", "s3"} {
		for _, op := range []string{"backup", "restore"} {
			r := median(bk[be])
			if op == "restore" {
				r = median(rs[be])
			}
			b.ReportMetric(mb/r.wall, be+"-"+op+"-MB/s")
			b.ReportMetric(r.cpu, be+"-"+op+"-cpu-s")
			b.ReportMetric(r.rssMiB, be+"-"+op+"-peakRSS-MiB")
			if be == "s3" {
				b.ReportMetric(r.gwCPU, be+"-"+op+"-gateway-cpu-s")
			}
		}
	}
	for _, be := range []string{"local", "s3"} {
		b.ReportMetric(median(ls[be]).wall, be+"-open+list-s")
	}
	b.ReportMetric(medianF(bkRatio), "backup-s3/local")
	b.ReportMetric(medianF(rsRatio), "restore-s3/local")
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
