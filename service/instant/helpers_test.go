package instant

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vmconfig"
)

// image writes a disk image of size bytes: random blocks, holes and a
// repeated block (so the backup dedups), and returns its path.
func image(t testing.TB, size int64, seed uint64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	block := make([]byte, 1<<20)
	same := make([]byte, 1<<20)
	for i := range same {
		same[i] = byte(i * 7)
	}
	for off := int64(0); off < size; off += int64(len(block)) {
		switch r.IntN(4) {
		case 0: // hole
			continue
		case 1:
			f.WriteAt(same[:min(int64(len(same)), size-off)], off)
		default:
			for i := range block {
				block[i] = byte(r.Uint32())
			}
			f.WriteAt(block[:min(int64(len(block)), size-off)], off)
		}
	}
	return path
}

// backupImages commits one restore point of vm whose disks are the image
// files, through the real backup pipeline, with cfg as its VM
// configuration when not nil.
func backupImages(t testing.TB, r *repository.Repository, vm string, cfg *vmconfig.VMConfig, images ...string) repository.Point {
	t.Helper()
	ctx := context.Background()
	cc := r.Config().Chunker
	ch, err := dedup.New(dedup.Params{Algorithm: cc.Algorithm, Polynomial: cc.Polynomial, MinSize: cc.MinSize, AvgSize: cc.AvgSize, MaxSize: cc.MaxSize})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Abort()
	np := repository.NewPoint{VM: repository.VMIdentity{Name: vm, InstanceUUID: "uuid-" + vm}, Time: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	if cfg != nil {
		if np.Config, err = vmconfig.Encode(*cfg); err != nil {
			t.Fatal(err)
		}
	}
	for i, img := range images {
		f, err := os.Open(img)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		res, err := backup.WriteDisk(ctx, sess, ch, backup.DiskInput{Source: f, Size: fi.Size()}, backup.Options{Workers: 2})
		f.Close()
		if err != nil {
			t.Fatalf("back up %s: %v", img, err)
		}
		root, err := sess.PutDisk(ctx, fi.Size(), res.Extents)
		if err != nil {
			t.Fatal(err)
		}
		np.Disks = append(np.Disks, repository.NewDisk{Key: int32(2000 + i), Label: filepath.Base(img), Capacity: fi.Size(), Map: root})
	}
	p, err := sess.Commit(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testConfig(name string, disks int) *vmconfig.VMConfig {
	c := &vmconfig.VMConfig{Version: vmconfig.Version, Name: name, GuestID: "ubuntu64Guest", Firmware: "efi", NumCPU: 2, CoresPerSocket: 1, MemoryMB: 2048,
		BIOSUUID:    "4210a5b2-1c2d-3e4f-5a6b-7c8d9e0f1a2b",
		Controllers: []vmconfig.ControllerConfig{{Key: 1000, Type: "scsi", Bus: 0, Model: "pvscsi"}},
		NICs:        []vmconfig.NICConfig{{Key: 4000, Type: "vmxnet3", Network: "VM \"Network\"", Connected: true, MAC: "00:50:56:aa:bb:cc"}}}
	for i := 0; i < disks; i++ {
		c.Disks = append(c.Disks, vmconfig.DiskConfig{Key: int32(2000 + i), Index: i, CapacityBytes: 1, ControllerKey: 1000, ControllerType: "scsi", Unit: int32(i), Thin: true})
	}
	c.Disks = append(c.Disks, vmconfig.DiskConfig{Key: 2099, Index: -1, Skipped: "independent disk", ControllerKey: 1000, Unit: 9})
	return c
}
