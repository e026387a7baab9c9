package vcsimtests

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// TestFullThenIncrementalReconstructs runs the backup data path the engine
// will use — full read of the allocated areas, then incrementals that read
// only CBT's changed areas while the guest keeps writing — and checks that
// applying each incremental to the previous image gives exactly the disk at
// each snapshot.
func TestFullThenIncrementalReconstructs(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_H0_VM1")
	key := vm.Disks[0].Key
	size := l.Options().DiskCapacity
	if err := c.EnableCBT(ctx, vm.VMRef); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	scribble := func(n int) {
		t.Helper()
		for range n {
			off := rng.Int64N(size - 70000)
			buf := make([]byte, 1+rng.IntN(70000))
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			if err := l.WriteDisk(vm.Name, 0, off, buf); err != nil {
				t.Fatal(err)
			}
		}
	}
	scribble(20)
	image := make([]byte, size) // the "repository" copy of the disk
	prevID := vsphere.AllocatedAreas
	for round := 0; round < 4; round++ {
		s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "flow", Quiesce: true})
		if err != nil {
			t.Fatal(err)
		}
		truth, err := l.ReadDisk(vm.Name, 0, 0, int(size)) // the disk at snapshot time
		if err != nil {
			t.Fatal(err)
		}
		scribble(5) // the guest keeps writing during the backup
		areas, err := c.ChangedAreas(ctx, s, key, prevID)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.OpenDisk(ctx, s, key, vsphere.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var read int64
		for _, a := range areas {
			if _, err := r.ReadAt(image[a.Offset:a.End()], a.Offset); err != nil {
				t.Fatal(err)
			}
			read += a.Length
		}
		if !bytes.Equal(image, truth) {
			t.Fatalf("round %d: reconstructed image differs from the disk at snapshot time", round)
		}
		if round > 0 && read >= size/2 {
			t.Errorf("round %d: incremental read %d of %d bytes", round, read, size)
		}
		d, _ := s.Disk(key)
		prevID = d.ChangeID
		if err := c.RemoveSnapshot(ctx, vm.VMRef, s.MoRef); err != nil {
			t.Fatal(err)
		}
	}
}
