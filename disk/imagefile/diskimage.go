package imagefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmvault/vmvault/disk/vmdk"
)

// Extent is a byte range of the image.
type Extent struct{ Offset, Length int64 }

// Image is a random-access disk image.
type Image interface {
	io.ReaderAt
	// Size is the disk's capacity in bytes.
	Size() int64
	// Allocated lists the sorted ranges that may hold non-zero data; every
	// byte outside them reads as zero.
	Allocated() ([]Extent, error)
	Close() error
	// Format is "raw" or the VMDK createType.
	Format() string
}

// Open opens path as a VMDK when it starts with a sparse-extent magic or is a
// small text file holding a VMDK descriptor, and as a raw image otherwise.
func Open(path string) (Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open image: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open image: %w", err)
	}
	head := make([]byte, 1024)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("open image %s: %w", path, err)
	}
	// A .vmdk that is empty or not a whole number of sectors is no raw disk:
	// it is a descriptor the detection below missed (or a failed copy), so
	// the vmdk package's error is what the operator should see.
	if st.Mode().IsRegular() && strings.EqualFold(filepath.Ext(path), ".vmdk") && st.Size()%vmdk.SectorSize != 0 {
		f.Close()
		_, err := vmdk.Open(path)
		if err == nil {
			err = fmt.Errorf("open image %s: %d bytes, not a whole number of sectors: %w", path, st.Size(), vmdk.ErrNotVMDK)
		}
		return nil, err
	}
	if st.Mode().IsRegular() && st.Size() == 0 && strings.EqualFold(filepath.Ext(path), ".vmdk") {
		f.Close()
		return nil, fmt.Errorf("open image %s: empty .vmdk file (0 bytes): %w", path, vmdk.ErrNotVMDK)
	}
	if isVMDK(head[:n], st.Size()) {
		f.Close()
		d, err := vmdk.Open(path)
		if err != nil {
			return nil, err
		}
		return vmdkImage{d}, nil
	}
	size := st.Size()
	if st.Mode()&os.ModeDevice != 0 {
		// A block device reports size 0 in Stat; its end is its size.
		if size, err = f.Seek(0, io.SeekEnd); err != nil {
			f.Close()
			return nil, fmt.Errorf("open image %s: size of device: %w", path, err)
		}
	} else if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open image %s: not a regular file or block device (%s)", path, st.Mode().Type())
	}
	return &rawImage{f: f, size: size}, nil
}

// isVMDK recognises the sparse magics ("KDMV", "COWD") and text
// descriptors. A descriptor is small (the vmdk package refuses more than
// 1 MiB) and names itself in its first lines; a raw disk's first sector (MBR,
// GPT, file system) never starts with this text.
func isVMDK(head []byte, size int64) bool {
	if len(head) >= 4 {
		switch binary.LittleEndian.Uint32(head) {
		case 0x564D444B, 0x44574F43:
			return true
		}
	}
	if size > 1<<20 {
		return false
	}
	return bytes.Contains(head, []byte("# Disk DescriptorFile")) ||
		(bytes.Contains(head, []byte("createType")) && bytes.Contains(head, []byte("parentCID")))
}

type vmdkImage struct{ d *vmdk.Disk }

func (v vmdkImage) ReadAt(p []byte, off int64) (int, error) { return v.d.ReadAt(p, off) }
func (v vmdkImage) Size() int64                             { return v.d.Size() }
func (v vmdkImage) Close() error                            { return v.d.Close() }
func (v vmdkImage) Format() string                          { return v.d.Format() }
func (v vmdkImage) Allocated() ([]Extent, error) {
	ext, err := v.d.AllocatedExtents()
	if err != nil {
		return nil, err
	}
	return convert(ext), nil
}

func convert(ext []vmdk.Extent) []Extent {
	out := make([]Extent, len(ext))
	for i, e := range ext {
		out[i] = Extent(e)
	}
	return out
}

// rawImage is a plain file or block device.
type rawImage struct {
	f    *os.File
	size int64
}

func (r *rawImage) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	return r.f.ReadAt(p, off)
}
func (r *rawImage) Size() int64    { return r.size }
func (r *rawImage) Format() string { return "raw" }
func (r *rawImage) Close() error   { return r.f.Close() }

// Allocated uses SEEK_DATA/SEEK_HOLE; on a file system without them the
// whole file is reported (see vmdk.DataExtents).
func (r *rawImage) Allocated() ([]Extent, error) {
	ext, err := vmdk.DataExtents(r.f, 0, r.size)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r.f.Name(), err)
	}
	return convert(ext), nil
}
