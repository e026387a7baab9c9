package instant

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
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
	var config []byte
	if cfg != nil {
		var err error
		if config, err = vmconfig.Encode(*cfg); err != nil {
			t.Fatal(err)
		}
	}
	return frtest.BackupWithConfig(t, r, vm, time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), config, images...)
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
