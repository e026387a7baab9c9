package lab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// overlayBlock is the copy-on-write unit of the snapshot overlay.
const overlayBlock = 4096

// disk is the lab's state of one virtual disk, keyed by its flat file.
type disk struct {
	flat     string
	vm       string // VM moref
	capacity int64
	epoch    string
	seq      int64 // sequence the next write is tagged with
	writes   []span
	overlay  map[int64][]byte // block index -> live content while snapshotted
	// frozen are the delta disks of a snapshot chain below the live one:
	// frozen[i] holds the writes made between the snapshots at depth i and
	// i+1, so the snapshot at depth k sees flat + frozen[:k] and the guest
	// sees flat + frozen + overlay. Blocks are whole (copy on write).
	frozen []map[int64][]byte
	// hideStart/hideEnd: changes CBT leaves out (UnderReportCBT).
	hideStart, hideEnd int64
}

type span struct{ seq, off, end int64 }

func (d *disk) changeID() string { return fmt.Sprintf("%s/%d", d.epoch, d.seq) }

// reset starts a new CBT epoch: every older change id becomes invalid.
func (d *disk) reset() {
	d.epoch = newEpoch()
	d.seq = 1
	d.writes = nil
}

// DiskInfo describes one disk of a lab VM.
type DiskInfo struct {
	Key      int32
	Capacity int64
	FileName string // "[LocalDS_0] vm/disk1.vmdk"
	FlatPath string // local path of the flat extent
}

// Disk describes disk number idx (0-based, in device order) of vm.
func (l *Lab) Disk(vm string, idx int) (DiskInfo, error) {
	var info DiskInfo
	var moref string
	err := l.withVM(vm, func(v *simulator.VirtualMachine) error {
		moref = v.Self.Value
		ds := object.VirtualDeviceList(v.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil))
		if idx < 0 || idx >= len(ds) {
			return fmt.Errorf("lab: VM %s has %d disks, no disk %d", vm, len(ds), idx)
		}
		vd := ds[idx].(*types.VirtualDisk)
		flat, err := l.flatPath(vd)
		if err != nil {
			return err
		}
		info = DiskInfo{Key: vd.Key, Capacity: vd.CapacityInBytes, FlatPath: flat,
			FileName: vd.Backing.(types.BaseVirtualDeviceFileBackingInfo).GetVirtualDeviceFileBackingInfo().FileName}
		if info.Capacity == 0 {
			info.Capacity = vd.CapacityInKB * 1024
		}
		return nil
	})
	if err != nil {
		return info, err
	}
	l.mu.Lock()
	l.diskFor(info.FlatPath, moref, info.Capacity)
	l.mu.Unlock()
	return info, nil
}

// diskFor returns (creating) the state of a flat file. Callers hold l.mu.
func (l *Lab) diskFor(flat, moref string, capacity int64) *disk {
	d := l.disks[flat]
	if d == nil {
		d = &disk{flat: flat, vm: moref, capacity: capacity}
		d.reset()
		l.disks[flat] = d
	}
	if capacity > 0 {
		d.capacity = capacity
	}
	return d
}

func (l *Lab) snapshotted(d *disk) bool {
	s := l.vms[d.vm]
	return s != nil && s.snapshots > 0
}

// WriteDisk writes data at off into disk idx of vm, as the guest would:
// into the overlay while the VM has a snapshot, else into the flat file.
// The write is recorded for CBT.
func (l *Lab) WriteDisk(vm string, idx int, off int64, data []byte) error {
	info, err := l.Disk(vm, idx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeLocked(l.disks[info.FlatPath], off, data)
}

func (l *Lab) writeLocked(d *disk, off int64, data []byte) error {
	if off < 0 || off+int64(len(data)) > d.capacity {
		return fmt.Errorf("lab: write %d bytes at %d outside disk of %d bytes", len(data), off, d.capacity)
	}
	if len(data) == 0 {
		return nil
	}
	if l.snapshotted(d) {
		if err := d.writeOverlay(off, data); err != nil {
			return err
		}
	} else if err := pwrite(d.flat, off, data); err != nil {
		return err
	}
	end := off + int64(len(data))
	if n := len(d.writes); n > 0 && d.writes[n-1].seq == d.seq && d.writes[n-1].end == off {
		d.writes[n-1].end = end
	} else {
		d.writes = append(d.writes, span{seq: d.seq, off: off, end: end})
	}
	return nil
}

func (d *disk) writeOverlay(off int64, data []byte) error {
	if d.overlay == nil {
		d.overlay = map[int64][]byte{}
	}
	for len(data) > 0 {
		bi := off / overlayBlock
		bo := off % overlayBlock
		blk, ok := d.overlay[bi]
		if !ok {
			blk = make([]byte, overlayBlock)
			if err := d.readLevels(blk, bi*overlayBlock, d.frozen); err != nil {
				return err
			}
			d.overlay[bi] = blk
		}
		n := copy(blk[bo:], data)
		data = data[n:]
		off += int64(n)
	}
	return nil
}

// readLevels reads buf at off as flat + layers (later layers win).
func (d *disk) readLevels(buf []byte, off int64, layers []map[int64][]byte) error {
	if err := pread(d.flat, off, buf); err != nil {
		return err
	}
	end := off + int64(len(buf))
	for _, m := range layers {
		if len(m) == 0 {
			continue
		}
		for bi := off / overlayBlock; bi*overlayBlock < end; bi++ {
			blk, ok := m[bi]
			if !ok {
				continue
			}
			bs := bi * overlayBlock
			a, b := max(bs, off), min(bs+overlayBlock, end)
			copy(buf[a-off:b-off], blk[a-bs:b-bs])
		}
	}
	return nil
}

// freeze starts a new delta on top of the chain (a snapshot taken while
// the VM already has one).
func (d *disk) freeze() {
	d.frozen = append(d.frozen, d.overlay)
	d.overlay = nil
}

// removeLevel removes the snapshot at depth j: its delta (the writes made
// after it, up to the next snapshot) merges into the one below (the flat
// file for depth 0), as ESXi's consolidation does.
func (d *disk) removeLevel(j int) error {
	deltas := append(append([]map[int64][]byte{}, d.frozen...), d.overlay)
	if j < 0 || j >= len(deltas) {
		return nil
	}
	if j == 0 {
		if err := d.mergeFlat(deltas[0]); err != nil {
			return err
		}
	} else {
		if deltas[j-1] == nil {
			deltas[j-1] = map[int64][]byte{}
		}
		for bi, blk := range deltas[j] {
			deltas[j-1][bi] = blk
		}
	}
	deltas = append(deltas[:j], deltas[j+1:]...)
	d.frozen, d.overlay = deltas[:len(deltas)-1], deltas[len(deltas)-1]
	if len(d.frozen) == 0 {
		d.frozen = nil
	}
	return nil
}

// merge writes the whole chain into the flat file (last snapshot removed).
func (d *disk) merge() error {
	for len(d.frozen) > 0 {
		if err := d.removeLevel(0); err != nil {
			return err
		}
	}
	if err := d.mergeFlat(d.overlay); err != nil {
		return err
	}
	d.overlay = nil
	return nil
}

// mergeFlat writes the blocks of one delta into the flat file.
func (d *disk) mergeFlat(overlay map[int64][]byte) error {
	if len(overlay) == 0 {
		return nil
	}
	f, err := os.OpenFile(d.flat, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("lab: merge overlay: %w", err)
	}
	defer f.Close()
	idx := make([]int64, 0, len(overlay))
	for bi := range overlay {
		idx = append(idx, bi)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	for _, bi := range idx {
		blk := overlay[bi]
		off := bi * overlayBlock
		if rem := d.capacity - off; rem < int64(len(blk)) {
			blk = blk[:rem]
		}
		if _, err := f.WriteAt(blk, off); err != nil {
			return fmt.Errorf("lab: merge overlay: %w", err)
		}
	}
	return f.Close()
}

// ReadDisk reads n bytes at off of disk idx of vm as the guest sees it now
// (overlay included).
func (l *Lab) ReadDisk(vm string, idx int, off int64, n int) ([]byte, error) {
	info, err := l.Disk(vm, idx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.disks[info.FlatPath]
	if off < 0 || off+int64(n) > d.capacity {
		return nil, fmt.Errorf("lab: read %d bytes at %d outside disk of %d bytes", n, off, d.capacity)
	}
	buf := make([]byte, n)
	layers := append(append([]map[int64][]byte{}, d.frozen...), d.overlay)
	if err := d.readLevels(buf, off, layers); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadBase reads the flat file as vmvault sees it through the datastore
// file service (the snapshot-time content while a snapshot exists).
func (l *Lab) ReadBase(vm string, idx int, off int64, n int) ([]byte, error) {
	info, err := l.Disk(vm, idx)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	return buf, pread(info.FlatPath, off, buf)
}

// SetDiskImage copies an image file (raw, e.g. made with mkfs.ext4 -d) into
// disk idx of vm from offset 0, skipping all-zero blocks so the flat file
// stays sparse. The image must not be larger than the disk.
func (l *Lab) SetDiskImage(vm string, idx int, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("lab: image: %w", err)
	}
	defer f.Close()
	return l.WriteDiskFrom(vm, idx, f)
}

// WriteDiskFrom copies r into disk idx of vm from offset 0 (sparse: zero
// blocks are skipped), e.g. from a generator.
func (l *Lab) WriteDiskFrom(vm string, idx int, r io.Reader) error {
	info, err := l.Disk(vm, idx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.disks[info.FlatPath]
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if off+int64(n) > d.capacity {
				return fmt.Errorf("lab: image larger than the %d-byte disk of %s", d.capacity, vm)
			}
			if !allZero(buf[:n]) {
				if werr := l.writeLocked(d, off, buf[:n]); werr != nil {
					return werr
				}
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lab: image: %w", err)
		}
	}
}

// ResizeDisk grows (or shrinks) disk idx of vm: the capacity in the VM's
// configuration and the flat file change, and CBT is reset as on ESXi.
func (l *Lab) ResizeDisk(vm string, idx int, capacity int64) error {
	info, err := l.Disk(vm, idx)
	if err != nil {
		return err
	}
	err = l.withVM(vm, func(v *simulator.VirtualMachine) error {
		for _, dev := range v.Config.Hardware.Device {
			if vd, ok := dev.(*types.VirtualDisk); ok && vd.Key == info.Key {
				vd.CapacityInBytes = capacity
				vd.CapacityInKB = capacity / 1024
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.disks[info.FlatPath]
	d.capacity = capacity
	d.reset()
	if err := os.Truncate(d.flat, capacity); err != nil {
		return fmt.Errorf("lab: resize: %w", err)
	}
	return nil
}

// ChangeID is the change id the next snapshot of disk idx of vm will carry.
func (l *Lab) ChangeID(vm string, idx int) (string, error) {
	info, err := l.Disk(vm, idx)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.disks[info.FlatPath].changeID(), nil
}

// allocated lists the non-zero blockSize blocks of the flat file in
// [start, end), skipping holes with SEEK_DATA/SEEK_HOLE.
func allocated(path string, start, end, blockSize int64) ([]types.DiskChangeExtent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []types.DiskChangeExtent
	add := func(off, n int64) {
		if k := len(out); k > 0 && off <= out[k-1].Start+out[k-1].Length {
			out[k-1].Length = max(out[k-1].Length, off+n-out[k-1].Start)
			return
		}
		out = append(out, types.DiskChangeExtent{Start: off, Length: n})
	}
	buf := make([]byte, blockSize)
	pos := start / blockSize * blockSize
	for pos < end {
		data, err := f.Seek(pos, 3) // SEEK_DATA
		if err != nil {
			if errors.Is(err, syscall.ENXIO) {
				break
			}
			data = pos // no SEEK_DATA support: scan everything
		}
		hole, err := f.Seek(data, 4) // SEEK_HOLE
		if err != nil {
			hole = end
		}
		for b := data / blockSize * blockSize; b < min(hole, end); b += blockSize {
			n, rerr := f.ReadAt(buf, b)
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				return nil, rerr
			}
			if !allZero(buf[:n]) {
				s, e := max(b, start), min(b+blockSize, end)
				add(s, e-s)
			}
		}
		if hole <= pos {
			break
		}
		pos = hole
	}
	return out, nil
}

func allZero(b []byte) bool {
	var z [4096]byte
	for len(b) > 0 {
		n := min(len(b), len(z))
		if !bytes.Equal(b[:n], z[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

func pread(path string, off int64, p []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	defer f.Close()
	n, err := f.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("lab: read %s: %w", path, err)
	}
	clear(p[n:]) // past the end of a short flat file reads as zeros
	return nil
}

func pwrite(path string, off int64, p []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if _, err := f.WriteAt(p, off); err != nil {
		f.Close()
		return fmt.Errorf("lab: write %s: %w", path, err)
	}
	return f.Close()
}

func sortAreas(a []types.DiskChangeExtent) {
	sort.Slice(a, func(i, j int) bool { return a[i].Start < a[j].Start })
}
