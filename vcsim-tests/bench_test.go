package vcsimtests

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// benchDisk starts a lab whose first VM has a 64 MiB disk full of random
// bytes, snapshots it and opens the range reader.
func benchDisk(b *testing.B, opts vsphere.ReaderOptions) *vsphere.DiskReader {
	b.Helper()
	const size = 64 << 20
	l := labtest.Start(b, lab.Options{DiskCapacity: size})
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	if err := l.WriteDisk("DC0_H0_VM0", 0, 0, buf); err != nil {
		b.Fatal(err)
	}
	c, err := vsphere.Connect(context.Background(), vsphere.Config{URL: l.URL().String(), Username: l.Username(), Password: l.Password(), Thumbprint: l.Thumbprint()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(context.Background()) })
	vm, err := c.FindVM(context.Background(), "DC0_H0_VM0")
	if err != nil {
		b.Fatal(err)
	}
	s, err := c.CreateSnapshot(context.Background(), vm.VMRef, vsphere.SnapshotOptions{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	r, err := c.OpenDisk(context.Background(), s, vm.Disks[0].Key, opts)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkRangeReader measures the datastore Range reader over loopback
// TLS against the lab: whole-disk sequential reads, and scattered 64 KiB
// extents (every 4th 64 KiB block, as a sparse CBT incremental), issued one
// at a time and 8 at a time.
func BenchmarkRangeReader(b *testing.B) {
	for _, par := range []int{1, 4} {
		b.Run(fmt.Sprintf("sequential-4MiB-chunks-x%d", par), func(b *testing.B) {
			r := benchDisk(b, vsphere.ReaderOptions{ChunkSize: 4 << 20, Parallel: par})
			buf := make([]byte, 16<<20)
			b.SetBytes(r.Size())
			b.ResetTimer()
			for b.Loop() {
				for off := int64(0); off < r.Size(); off += int64(len(buf)) {
					if _, err := r.ReadAt(buf, off); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
	for _, par := range []int{1, 8} {
		name := "scattered-64KiB-serial"
		if par > 1 {
			name = "scattered-64KiB-x8"
		}
		b.Run(name, func(b *testing.B) {
			r := benchDisk(b, vsphere.ReaderOptions{})
			const ext = 64 << 10
			var offs []int64
			for off := int64(0); off < r.Size(); off += 4 * ext {
				offs = append(offs, off)
			}
			b.SetBytes(int64(len(offs)) * ext)
			b.ResetTimer()
			for b.Loop() {
				g := errgroup.Group{}
				g.SetLimit(par)
				for _, off := range offs {
					g.Go(func() error {
						buf := make([]byte, ext)
						_, err := r.ReadAt(buf, off)
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHotAddRead compares reading a hot-added disk (attached to the
// lab's appliance VM, found through the locator, read with pread through
// HotAddSource) with plain ReadAt of the same file: the transport's own
// overhead, which should stay under 10% (issue 30's target: HotAdd at
// >= 90% of local file speed). Sequential 16 MiB reads and scattered 64 KiB
// extents (every 4th block, as a sparse CBT incremental).
func BenchmarkHotAddRead(b *testing.B) {
	const size = 64 << 20
	l := labtest.Start(b, lab.Options{DiskCapacity: size})
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	const vmName = "DC0_H0_VM0"
	if err := l.WriteDisk(vmName, 0, 0, buf); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	app, err := l.AddAppliance(ctx)
	if err != nil {
		b.Fatal(err)
	}
	c, err := vsphere.Connect(ctx, vsphere.Config{URL: l.URL().String(), Username: l.Username(), Password: l.Password(), Thumbprint: l.Thumbprint()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(ctx) })
	h, err := c.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: app, Locator: l.HotAddLocator(app)})
	if err != nil {
		b.Fatal(err)
	}
	vm, err := c.FindVM(ctx, vmName)
	if err != nil {
		b.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	src, err := h.Open(ctx, s, vm.Disks[0].Key)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	info, err := l.Disk(vmName, 0)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(info.FlatPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	readers := []struct {
		name string
		r    io.ReaderAt
	}{{"local-file", f}, {"hotadd", src}}
	for _, rd := range readers {
		b.Run("sequential-16MiB/"+rd.name, func(b *testing.B) {
			p := make([]byte, 16<<20)
			b.SetBytes(size)
			for b.Loop() {
				for off := int64(0); off < size; off += int64(len(p)) {
					if _, err := rd.r.ReadAt(p, off); err != nil && err != io.EOF {
						b.Fatal(err)
					}
				}
			}
		})
	}
	for _, rd := range readers {
		b.Run("scattered-64KiB/"+rd.name, func(b *testing.B) {
			const ext = 64 << 10
			p := make([]byte, ext)
			b.SetBytes(size / 4)
			for b.Loop() {
				for off := int64(0); off < size; off += 4 * ext {
					if _, err := rd.r.ReadAt(p, off); err != nil && err != io.EOF {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
