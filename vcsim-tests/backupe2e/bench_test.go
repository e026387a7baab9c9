package backupe2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/testutil"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

var profN int

// appliance runs the built binary and returns its stdout.
func appliance(b *testing.B, bin string, env []string, args ...string) (string, time.Duration) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	// VMVAULT_BENCH_PROFILES=DIR keeps a CPU profile of every command.
	if d := os.Getenv("VMVAULT_BENCH_PROFILES"); d != "" {
		profN++
		cmd.Env = append(cmd.Env, fmt.Sprintf("VMVAULT_CPUPROFILE=%s/%02d-%s.prof", d, profN, args[0]))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	self := selfCPU()
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("appliance %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	wall := time.Since(start)
	lastCPU = cpuUse{child: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), server: selfCPU() - self}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		lastCPU.maxRSS = ru.Maxrss << 10
	}
	return string(out), wall
}

// cpuUse is the CPU time of the last appliance command and of this process
// (the lab server) meanwhile.
type cpuUse struct {
	child, server time.Duration
	maxRSS        int64 // the command's peak resident set
}

var lastCPU cpuUse

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVMBackup measures, with the appliance binary (one run each):
// `image backup` of an ext4 image file, `backup` of a lab VM holding the
// same image (range reads over loopback TLS), and an incremental `backup`
// after 1% of the disk changed in scattered 64 KiB blocks (CBT's
// granularity) and, separately, in scattered 4 KiB writes.
//
//	VMVAULT_BENCH_GIB=4 go test -run '^$' -bench BenchmarkVMBackup -benchtime 1x ./vcsim-tests/backupe2e
func BenchmarkVMBackup(b *testing.B) {
	size := testutil.BenchSize()
	dir := b.TempDir()
	bin := filepath.Join(dir, "appliance")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/vmvault/vmvault/cmd/appliance").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	img := testutil.MakeExt4(b, dir, size, size*3/8)
	env := []string{"VMVAULT_PASSWORD=bench-password"}
	initRepo := func(name string) string {
		r := filepath.Join(dir, name)
		// VMVAULT_BENCH_REPO_ARGS adds repo init flags ("--chunk-size 131072").
		args := append([]string{"repo", "init", "--repo", r, "--kdf-memory", "1024", "--kdf-time", "1"}, strings.Fields(os.Getenv("VMVAULT_BENCH_REPO_ARGS"))...)
		appliance(b, bin, env, args...)
		return r
	}
	type point struct {
		BytesRead int64   `json:"bytesRead"`
		NewBytes  int64   `json:"newBytes"`
		Seconds   float64 `json:"seconds"`
		Mode      string  `json:"mode"`
	}
	reps := 3
	if n, err := strconv.Atoi(os.Getenv("VMVAULT_BENCH_REPS")); err == nil && n > 0 {
		reps = n
	}
	for i := 0; i < b.N; i++ {
		// One QueryChangedDiskAreas answer covers the whole disk, as ESXi's
		// do for all but very fragmented changes (the lab's 1 MiB default
		// exists to test paging).
		l, err := lab.Start(context.Background(), lab.Options{DiskCapacity: size, CBTPageSize: size})
		if err != nil {
			b.Fatal(err)
		}
		const vm = "DC0_H0_VM0"
		if err := l.SetDiskImage(vm, 0, img); err != nil {
			b.Fatal(err)
		}
		venv := append(env, "VMVAULT_VCENTER_URL="+l.URL().String(), "VMVAULT_VCENTER_USERNAME="+l.Username(),
			"VMVAULT_VCENTER_PASSWORD="+l.Password())
		var repoVM string
		vmBackup := func() (point, time.Duration) {
			out, wall := appliance(b, bin, venv, "backup", "--repo", repoVM, "--vm", vm, "--thumbprint", l.Thumbprint(), "--json", "--unsafe-no-fsync")
			var ps []point
			if err := json.Unmarshal([]byte(out), &ps); err != nil || len(ps) != 1 {
				b.Fatalf("backup output: %v\n%s", err, out)
			}
			return ps[0], wall
		}
		// Alternate image and VM full backups (fresh repositories) so both
		// see the same load on this shared machine; compare medians.
		var ib, full point
		var imgWalls, vmWalls []time.Duration
		var imgCPU, vmCPU cpuUse
		for rep := 0; rep < reps; rep++ {
			repoImg := initRepo(fmt.Sprintf("repo-image-%d-%d", i, rep))
			out, wall := appliance(b, bin, env, "image", "backup", "--repo", repoImg, "--vm", "img", "--json", "--unsafe-no-fsync", img)
			if err := json.Unmarshal([]byte(out), &ib); err != nil {
				b.Fatalf("image backup output: %v\n%s", err, out)
			}
			imgWalls = append(imgWalls, wall)
			imgCPU = lastCPU
			repoVM = initRepo(fmt.Sprintf("repo-vm-%d-%d", i, rep))
			full, wall = vmBackup()
			vmWalls = append(vmWalls, wall)
			vmCPU = lastCPU
		}
		imgWall, fullWall := median(imgWalls), median(vmWalls)
		b.Logf("image backup walls %v, VM backup walls %v", imgWalls, vmWalls)
		b.Logf("CPU of the last run: image backup %.2fs; VM backup %.2fs in the appliance + %.2fs in the lab server (same 2 cores)",
			imgCPU.child.Seconds(), vmCPU.child.Seconds(), vmCPU.server.Seconds())
		b.Logf("peak RSS: image backup %.0f MiB, VM backup %.0f MiB", float64(imgCPU.maxRSS)/(1<<20), float64(vmCPU.maxRSS)/(1<<20))
		rng := rand.New(rand.NewPCG(7, uint64(i)))
		change := func(block int) int64 {
			var n int64
			for n < size/100 {
				off := rng.Int64N(size/int64(block)) * int64(block)
				buf := make([]byte, block)
				for k := range buf {
					buf[k] = byte(rng.Uint32())
				}
				if err := l.WriteDisk(vm, 0, off, buf); err != nil {
					b.Fatal(err)
				}
				n += int64(block)
			}
			return n
		}
		none, noneWall := vmBackup()
		noneCPU := lastCPU
		type incr struct {
			name string
			p    point
			wall time.Duration
			cpu  cpuUse
		}
		var incs []incr
		scenarios := []struct {
			name   string
			change func()
		}{
			// A guest writing new files: 1% of the disk as 2 MiB files
			// written into the ext4 image by debugfs, the changed 64 KiB
			// blocks replayed into the VM's disk.
			{"guest files", func() { guestFiles(b, l, vm, img, dir, size/100) }},
			// dedup's random-4k-1pct: 1% of the allocated bytes rewritten as
			// 4 KiB blocks inside allocated areas.
			{"4 KiB in data", func() { allocatedWrites(b, l, vm, img, rng, ib.BytesRead/100) }},
			// Uniform over the whole disk, holes included: the worst cases.
			{"1 MiB runs", func() { change(1 << 20) }},
			{"64 KiB blocks", func() { change(64 << 10) }},
		}
		if os.Getenv("VMVAULT_BENCH_ALL") != "" {
			scenarios = append(scenarios, struct {
				name   string
				change func()
			}{"4 KiB anywhere", func() { change(4 << 10) }})
		}
		for _, sc := range scenarios {
			sc.change()
			p, wall := vmBackup()
			incs = append(incs, incr{sc.name, p, wall, lastCPU})
		}
		l.Close()

		mib := float64(size) / (1 << 20)
		b.Logf("disk %.0f MiB ext4, %.0f MiB allocated by image backup read", mib, float64(ib.BytesRead)/(1<<20))
		b.Logf("image backup:        %6.2fs wall (median; %.2fs in command), read %.0f MiB, %.0f MiB/s logical", imgWall.Seconds(), ib.Seconds, float64(ib.BytesRead)/(1<<20), mib/imgWall.Seconds())
		b.Logf("VM backup (lab):     %6.2fs wall (median; %.2fs in engine), read %.0f MiB, mode %s, %.0f MiB/s logical = %.0f%% of image backup",
			fullWall.Seconds(), full.Seconds, float64(full.BytesRead)/(1<<20), full.Mode, mib/fullWall.Seconds(), 100*imgWall.Seconds()/fullWall.Seconds())
		b.Logf("incremental, no change:          %6.2fs wall (%.2fs in engine), CPU %.2fs + %.2fs lab, read %.1f MiB: %.1fx faster than the full",
			noneWall.Seconds(), none.Seconds, noneCPU.child.Seconds(), noneCPU.server.Seconds(), float64(none.BytesRead)/(1<<20), fullWall.Seconds()/noneWall.Seconds())
		b.ReportMetric(100*imgWall.Seconds()/fullWall.Seconds(), "%-of-image-backup")
		for _, in := range incs {
			b.Logf("incremental 1%%, %-15s %6.2fs wall (%.2fs in engine), CPU %.2fs + %.2fs lab, RSS %.0f MiB, read %.1f MiB, new %.1f MiB, mode %s: %.1fx faster than the full",
				in.name+":", in.wall.Seconds(), in.p.Seconds, in.cpu.child.Seconds(), in.cpu.server.Seconds(), float64(in.cpu.maxRSS)/(1<<20),
				float64(in.p.BytesRead)/(1<<20), float64(in.p.NewBytes)/(1<<20), in.p.Mode, fullWall.Seconds()/in.wall.Seconds())
			b.ReportMetric(fullWall.Seconds()/in.wall.Seconds(), "x-incr-"+strings.ReplaceAll(in.name, " ", "-"))
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// allocatedExtents lists the data areas of a sparse file (SEEK_DATA/SEEK_HOLE).
func allocatedExtents(b *testing.B, path string) [][2]int64 {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	var out [][2]int64
	for off := int64(0); off < st.Size(); {
		data, err := f.Seek(off, 3) // SEEK_DATA
		if err != nil {
			break // ENXIO: no data after off
		}
		hole, err := f.Seek(data, 4) // SEEK_HOLE
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, [2]int64{data, hole - data})
		off = hole
	}
	return out
}

// allocatedWrites rewrites n bytes as random 4 KiB blocks inside the image's
// allocated areas of the VM's disk.
func allocatedWrites(b *testing.B, l *lab.Lab, vm, img string, rng *rand.Rand, n int64) {
	b.Helper()
	alloc := allocatedExtents(b, img)
	buf := make([]byte, 4096)
	for done := int64(0); done < n; {
		x := alloc[rng.IntN(len(alloc))]
		if x[1] < 4096 {
			continue
		}
		off := x[0] + rng.Int64N(x[1]/4096)*4096
		for k := range buf {
			buf[k] = byte(rng.Uint32())
		}
		if err := l.WriteDisk(vm, 0, off, buf); err != nil {
			b.Fatal(err)
		}
		done += 4096
	}
}

// guestFiles writes n bytes of new 2 MiB files into a copy of the image
// with debugfs and replays the changed 64 KiB blocks into the VM's disk.
func guestFiles(b *testing.B, l *lab.Lab, vm, img, dir string, n int64) {
	b.Helper()
	debugfs, err := exec.LookPath("debugfs")
	if err != nil {
		b.Fatalf("install e2fsprogs (debugfs): make test does: %v", err)
	}
	newImg := filepath.Join(dir, "guest.img")
	if out, err := exec.Command("cp", "--sparse=always", img, newImg).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v\n%s", err, out)
	}
	defer os.Remove(newImg)
	rng := rand.New(rand.NewPCG(99, 99))
	var cmds strings.Builder
	for i := 0; int64(i)*(2<<20) < n; i++ {
		f := filepath.Join(dir, fmt.Sprintf("new%d", i))
		data := make([]byte, 2<<20)
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			b.Fatal(err)
		}
		defer os.Remove(f)
		fmt.Fprintf(&cmds, "write %s new%d\n", f, i)
	}
	cmdFile := filepath.Join(dir, "cmds")
	if err := os.WriteFile(cmdFile, []byte(cmds.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(debugfs, "-w", "-f", cmdFile, newImg).CombinedOutput(); err != nil {
		b.Fatalf("debugfs: %v\n%s", err, out)
	}
	a, err := os.Open(img)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	c, err := os.Open(newImg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	st, _ := c.Stat()
	oldB, newB := make([]byte, 64<<10), make([]byte, 64<<10)
	for off := int64(0); off < st.Size(); off += 64 << 10 {
		na, _ := a.ReadAt(oldB, off)
		nc, _ := c.ReadAt(newB, off)
		clear(oldB[na:])
		clear(newB[nc:])
		if !bytes.Equal(oldB, newB) {
			if err := l.WriteDisk(vm, 0, off, newB); err != nil {
				b.Fatal(err)
			}
		}
	}
}
