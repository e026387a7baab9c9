package backup

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/testutil"
	"github.com/vmvault/vmvault/repository"
)

// BenchmarkCBTVerify measures what the CBT verification adds to an
// incremental: the default 0.5% sample of a disk holding a real ext4 (made
// by mkfs.ext4 -d; VMVAULT_BENCH_GIB GiB, default 1) read from the image
// file and from a full restore point of it in an encrypted repository, and
// compared. Each op verifies the next round's class, so the parent's blocks
// are not in any cache of an earlier op.
//
//	VMVAULT_BENCH_GIB=4 go test -run '^$' -bench CBTVerify -benchtime 5x ./backup
func BenchmarkCBTVerify(b *testing.B) {
	size := testutil.BenchSize()
	dir := b.TempDir()
	img := testutil.MakeExt4(b, dir, size, size*3/8)
	f, err := os.Open(img)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	r := repository.TestRepository(b, repository.WithDir(filepath.Join(dir, "repo")))
	cc := repository.TestChunker
	c, err := dedup.New(dedup.Params{Algorithm: cc.Algorithm, Polynomial: cc.Polynomial, MinSize: cc.MinSize, AvgSize: cc.AvgSize, MaxSize: cc.MaxSize})
	if err != nil {
		b.Fatal(err)
	}
	s, err := r.NewSession(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Abort()
	out, err := WriteDisk(ctx, s, c, DiskInput{Source: f, Size: size, Allocated: fileExtents(b, f)}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	root, err := s.PutDisk(ctx, size, out.Extents)
	if err != nil {
		b.Fatal(err)
	}
	p, err := s.Commit(ctx, repository.NewPoint{VM: repository.VMIdentity{Name: "bench"}, Time: time.Now(),
		Disks: []repository.NewDisk{{Capacity: size, Map: root}}})
	if err != nil {
		b.Fatal(err)
	}
	var sampled int64
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pr, err := RepoStore(r).OpenParent(ctx, p.ID, 0)
		if err != nil {
			b.Fatal(err)
		}
		sample := verifySample(size, nil, int64(i), DefaultCBTVerifyFraction, DefaultCBTVerifyBlock)
		cpu0 := processCPU()
		vr, err := verifyBlocks(ctx, f, safeReader{pr}, sample)
		cpu += processCPU() - cpu0
		pr.Close()
		if err != nil {
			b.Fatal(err)
		}
		if vr.Mismatched != 0 {
			b.Fatalf("%d of %d blocks differ from the point of the same image", vr.Mismatched, vr.Blocks)
		}
		for _, x := range sample {
			sampled += x.Length
		}
	}
	b.ReportMetric(float64(sampled)/float64(b.N)/(1<<20), "MiB-sampled/op")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.SetBytes(sampled / int64(b.N))
}
