package backupe2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// peakRSS is the process's high-water resident set (VmHWM), in bytes.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// TestEightVMsAtOnce: eight VMs into one repository, four at a time, with
// the shared disk budget; every point exact; peak heap reported.
func TestEightVMsAtOnce(t *testing.T) {
	const n, size = 8, 8 << 20
	l := labtest.Start(t, lab.Options{DiskCapacity: size, ExtraVMs: n})
	c := connect(t, l)
	r := labtest.Repo(t)
	e := newEngine(t, c, r, func(o *backup.EngineOptions) { o.MaxActiveDisks = 3; o.PerDatastore = 2 })
	rng := rand.New(rand.NewPCG(11, 12))
	common := randomData(rng, 2<<20) // shared by every VM: deduplicated
	var reqs []backup.Request
	want := map[string][]byte{}
	var mu sync.Mutex
	phases := map[string]int{}
	for i := range n {
		vm := fmt.Sprintf("LAB_VM%04d", i)
		write(t, l, vm, 0, 0, common)
		write(t, l, vm, 0, 3<<20, randomData(rng, 1<<20))
		want[vm] = diskImage(t, l, vm, 0)
		reqs = append(reqs, backup.Request{VM: vm, Progress: func(p backup.VMProgress) {
			mu.Lock()
			phases[p.Phase]++
			mu.Unlock()
		}})
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peakHeap uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peakHeap = max(peakHeap, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	outs := e.BackupVMs(context.Background(), reqs, 4)
	took := time.Since(start)
	close(stop)
	<-done
	var newBytes int64
	for _, o := range outs {
		if o.Err != nil {
			t.Fatalf("%s: %v", o.Request.VM, o.Err)
		}
		labtest.SameBytes(t, o.Request.VM, labtest.PointDisk(t, r, o.Result.RestorePoint, 0), want[o.Request.VM])
		noSnapshots(t, l, o.Request.VM)
		newBytes += o.Result.NewBytes
	}
	if newBytes >= int64(n)*3<<20 {
		t.Errorf("new bytes %d: the shared 2 MiB was not deduplicated across VMs", newBytes)
	}
	if phases["done"] != n || phases["disks"] < n {
		t.Errorf("progress phases %v", phases)
	}
	t.Logf("8 VMs x %d MiB in %v: peak heap in use %.1f MiB above the %.1f MiB before (test images, lab), peak RSS %.1f MiB (race=%v), new bytes %.1f MiB",
		size>>20, took.Round(time.Millisecond), float64(peakHeap-min(peakHeap, base.HeapInuse))/(1<<20), float64(base.HeapInuse)/(1<<20), float64(peakRSS())/(1<<20), raceEnabled, float64(newBytes)/(1<<20))
	checkRepo(t, r)
}
