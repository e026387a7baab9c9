package restoree2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/testutil"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// BenchmarkRestore backs up a lab VM whose disk holds an ext4 file system
// (VMVAULT_BENCH_GIB GiB, default 1, 40% filled with files), then measures:
//   - vm-put: RestoreVM to a new lab VM (create, full-file PUT over
//     loopback TLS with zeros streamed, SHA-256), the VM destroyed after
//     each run;
//   - vm-nfc: the same through an NFC import (streamOptimized, zlib level
//     1, zero grains not sent; the lab decodes into the flat file);
//   - put-ceiling: the same PUT fed from the local image file (no
//     repository reads, no digest): what the transport alone reaches;
//   - image-restore: what `appliance image restore` does (DiskReader.Stream
//     to a local sparse file, pack-parallel, holes skipped);
//   - download-raw: restore.DownloadDisk raw (ordered stream, zero runs
//     skipped, SHA-256).
//
// go test -run '^$' -bench Restore -benchtime 3x ./vcsim-tests/restoree2e/
func BenchmarkRestore(b *testing.B) {
	size := testutil.BenchSize()
	dir := b.TempDir()
	img := testutil.MakeExt4(b, dir, size, size*4/10)
	l := labtest.Start(b, lab.Options{DiskCapacity: size, VMsPerPool: 1})
	c := connect(b, l)
	r := repository.TestRepository(b)
	vm := "DC0_H0_VM0"
	if err := l.SetDiskImage(vm, 0, img); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	pt := backUp(b, c, r, vm)
	b.Logf("backup of %d MiB: %.2fs (%.0f MiB/s)", size>>20, time.Since(start).Seconds(), float64(size)/(1<<20)/time.Since(start).Seconds())
	ctx := context.Background()
	e := restore.New(r, c, restore.Options{})

	for _, tr := range []string{restore.TransportPUT, restore.TransportNFC} {
		b.Run("vm-"+tr, func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; b.Loop(); i++ {
				res, err := e.RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Name: fmt.Sprintf("bench-%s-%d", tr, i), Thin: true, Transport: tr})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := c.DestroyVM(ctx, res.VM); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
	// The transport's ceiling: the same full-file PUT fed from the local
	// image file (no repository, no digest).
	b.Run("put-ceiling", func(b *testing.B) {
		vmx, err := c.CreateVM(ctx, vsphereSpec("bench-ceiling", size))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		for b.Loop() {
			f, err := os.Open(img)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.UploadDisk(ctx, vmx.VMRef, vmx.Disks[0].Key, f, size, nil); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		b.StopTimer()
		if err := c.DestroyVM(ctx, vmx.VMRef); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("image-restore", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; b.Loop(); i++ {
			out := filepath.Join(dir, fmt.Sprintf("img-%d.raw", i))
			f, err := os.Create(out)
			if err != nil {
				b.Fatal(err)
			}
			dr, err := r.OpenDisk(ctx, pt, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := dr.Stream(ctx, f, nil); err != nil {
				b.Fatal(err)
			}
			if err := f.Truncate(size); err != nil {
				b.Fatal(err)
			}
			f.Close()
			dr.Close()
			b.StopTimer()
			os.Remove(out)
			b.StartTimer()
		}
	})
	b.Run("download-raw", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; b.Loop(); i++ {
			out := filepath.Join(dir, fmt.Sprintf("dl-%d.raw", i))
			if _, err := e.DownloadDisk(ctx, restore.DownloadRequest{RestorePoint: pt, Output: out}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.Remove(out)
			b.StartTimer()
		}
	})
}

func vsphereSpec(name string, size int64) vsphere.VMSpec {
	return vsphere.VMSpec{Name: name, Datastore: ds0, ResourcePool: pool, NumCPU: 1, MemoryMB: 128,
		Disks: []vsphere.DiskSpec{{CapacityBytes: size, Thin: true}}}
}
