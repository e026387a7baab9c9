package policy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
)

type instantRunner struct{ n atomic.Int64 }

func (r *instantRunner) RunBackup(ctx context.Context, job policy.Job, vm policy.VM, progress func(policy.Progress)) (policy.BackupResult, error) {
	r.n.Add(1)
	return policy.BackupResult{PointID: "p-" + vm.InstanceUUID, Bytes: 1 << 30}, nil
}

// BenchmarkSchedulerWindow measures the scheduler's own cost for one window
// of N VMs with instant backups over a real state.db: selection, ordering,
// every state and run write, and the events. Wall time is dominated by
// bbolt's fdatasync and by whatever else the machine runs; cpu-s/op (this
// process's user+system time) and outcomes-written/op (VM outcomes
// serialised into run records, the part that used to grow with n²) are the
// figures to compare.
func BenchmarkSchedulerWindow(b *testing.B) {
	for _, n := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("vms=%d", n), func(b *testing.B) {
			var written int64
			cpu0 := cpuTime()
			for range b.N {
				written += runWindow(b, n)
			}
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(written)/float64(b.N), "outcomes-written/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingStore counts the VM outcomes written in run records.
type countingStore struct {
	policy.Store
	outcomes atomic.Int64
}

func (c *countingStore) PutRun(ctx context.Context, r policy.JobRun) error {
	c.outcomes.Add(int64(len(r.VMs)))
	return c.Store.PutRun(ctx, r)
}

func (c *countingStore) PutRuns(ctx context.Context, rs []policy.JobRun) error {
	for _, r := range rs {
		c.outcomes.Add(int64(len(r.VMs)))
	}
	return c.Store.PutRuns(ctx, rs)
}

func runWindow(b *testing.B, n int) int64 {
	b.Helper()
	ctx := context.Background()
	db, err := state.Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var all []policy.VM
	var ids []string
	for i := range n {
		id := fmt.Sprintf("vm-%04d", i)
		all = append(all, policy.VM{InstanceUUID: id, Name: id})
		ids = append(ids, id)
	}
	job := nightlyJob("a", 0, policy.Selection{VMs: ids})
	job.Concurrency = 8
	if err := db.PutJob(ctx, job); err != nil {
		b.Fatal(err)
	}
	clk := clock.NewFake(monday)
	done := make(chan struct{})
	var backedUp atomic.Int64
	runner := &instantRunner{}
	store := &countingStore{Store: db}
	s, err := policy.New(policy.Config{Clock: clk, Store: store, Runner: runner, Inventory: policy.NewMemInventory(all...), MaxConcurrent: 8,
		OnEvent: func(e policy.Event) {
			if e.Kind == policy.EventVMBackedUp && backedUp.Add(1) == int64(n) {
				close(done)
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = s.Run(rctx); close(stopped) }()
	if err := s.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	clk.Set(at(0, 22, 0))
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d backed up", backedUp.Load(), n)
	}
	cancel()
	<-stopped
	return store.outcomes.Load()
}

// BenchmarkSelection evaluates one job's selection over an inventory of n
// VMs in 20 folders with 10 tags: by folder, by tag, and by an explicit list
// naming every VM (a job built by ticking VMs in the console).
func BenchmarkSelection(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		all := make([]policy.VM, n)
		ids := make([]string, n)
		for i := range all {
			id := fmt.Sprintf("vm-%05d", i)
			ids[i] = id
			all[i] = policy.VM{InstanceUUID: id, Name: id,
				Containers: []policy.ContainerRef{{Kind: policy.KindDatacenter, ID: "datacenter-1"}, {Kind: policy.KindFolder, ID: fmt.Sprintf("group-v%d", i%20)}},
				Tags:       []string{fmt.Sprintf("urn:tag:%d", i%10)}}
		}
		inv := policy.NewMemInventory(all...)
		sels := map[string]policy.Selection{
			"folder": {Containers: []policy.ContainerRef{{Kind: policy.KindFolder, ID: "group-v3"}, {Kind: policy.KindFolder, ID: "group-v7"}}},
			"tag":    {Tags: []string{"urn:tag:1", "urn:tag:2"}, Exclude: policy.Exclusions{Names: []string{"*-tmp"}, Tags: []string{"urn:tag:9"}}},
			"list":   {VMs: ids, Exclude: policy.Exclusions{VMs: ids[:n/10]}},
		}
		for _, kind := range []string{"folder", "tag", "list"} {
			b.Run(fmt.Sprintf("%s/vms=%d", kind, n), func(b *testing.B) {
				for range b.N {
					res, err := sels[kind].Resolve(context.Background(), inv, ids)
					if err != nil || len(res.VMs) == 0 {
						b.Fatalf("%d selected: %v", len(res.VMs), err)
					}
				}
			})
		}
	}
}
