package vmdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Extent is a byte range of the virtual disk.
type Extent struct{ Offset, Length int64 }

// extentReader is one piece of a disk: a flat file range, a sparse extent,
// or zeros (nil reader).
type extentReader interface {
	readAt(p []byte, off int64) error
	allocated(fn func(off, n int64)) error
	close() error
}

type part struct {
	start, length int64
	r             extentReader // nil: ZERO extent
}

// Disk is a random-access view of a VMDK's virtual disk. It is safe for
// concurrent ReadAt calls.
type Disk struct {
	path   string
	parts  []part
	size   int64
	format string
	desc   *Descriptor
}

// Open opens the VMDK at path: a text descriptor with its extents, a
// monolithicSparse file, or a streamOptimized file.
func Open(path string) (*Disk, error) { return openWith(path, nil) }

// file is what a sparse extent reads through: an *os.File, or in tests a
// wrapper that counts the bytes read.
type file interface {
	io.ReaderAt
	Close() error
}

// openWith is Open with every sparse extent file passed through wrap (nil:
// none); tests use it to measure the work a hostile image causes.
func openWith(path string, wrap func(*os.File) file) (*Disk, error) {
	if wrap == nil {
		wrap = func(f *os.File) file { return f }
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open vmdk: %w", err)
	}
	d, err := open(f, path, wrap)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open vmdk %s: %w", path, err)
	}
	return d, nil
}

func open(f *os.File, path string, wrap func(*os.File) file) (*Disk, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 && st.Mode().IsRegular() {
		return nil, fmt.Errorf("empty file (0 bytes): %w", ErrNotVMDK)
	}
	var magic [4]byte
	n, err := f.ReadAt(magic[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	m := binary.LittleEndian.Uint32(magic[:])
	if n == 4 && (m == sparseMagic || m == cowdMagic) {
		return openSparseFile(wrap(f), st.Size(), path)
	}
	if st.Size() > maxDescriptorBytes {
		return nil, fmt.Errorf("neither a sparse extent (magic %q) nor a descriptor (%d bytes, max %d): %w", magic[:n], st.Size(), maxDescriptorBytes, ErrNotVMDK)
	}
	text := make([]byte, st.Size())
	if _, err := f.ReadAt(text, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	desc, err := ParseDescriptor(text)
	if err != nil {
		return nil, err
	}
	f.Close() // a descriptor file is not needed after parsing
	return openDescriptor(desc, filepath.Dir(path), path, st, wrap)
}

func openSparseFile(f file, fsize int64, path string) (*Disk, error) {
	s, err := openSparseExtent(f, fsize, filepath.Base(path), 0)
	if err != nil {
		return nil, err
	}
	d := &Disk{path: path, size: s.size(), parts: []part{{0, s.size(), s}}}
	if s.h.compressed() {
		d.format = "streamOptimized"
	} else {
		d.format = "monolithicSparse"
	}
	if s.h.DescriptorSize > 0 {
		off := int64(s.h.DescriptorOffset) * SectorSize
		n := int64(s.h.DescriptorSize) * SectorSize
		if off+n > s.fsize {
			return nil, fmt.Errorf("embedded descriptor at sector %d (%d sectors) lies outside the file: %w", s.h.DescriptorOffset, s.h.DescriptorSize, ErrCorrupt)
		}
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			return nil, fmt.Errorf("read embedded descriptor: %w", eofCorrupt(err))
		}
		desc, err := ParseDescriptor(b)
		if err != nil {
			return nil, fmt.Errorf("embedded descriptor: %w", err)
		}
		if desc.HasParent() {
			return nil, fmt.Errorf("delta disk (parent %q): %w", desc.ParentFileNameHint, ErrUnsupported)
		}
		if len(desc.Extents) > 1 {
			return nil, fmt.Errorf("embedded descriptor lists %d extents: %w", len(desc.Extents), ErrUnsupported)
		}
		// The format comes from the header flags, not createType: govmomi
		// labels its streamOptimized output "vmfs".
		d.desc = desc
	}
	return d, nil
}

// openDescriptor opens the extents desc lists, relative to dir. self is the
// descriptor file's own FileInfo: an extent that is the descriptor itself
// would read descriptor text as disk data.
func openDescriptor(desc *Descriptor, dir, path string, self os.FileInfo, wrap func(*os.File) file) (_ *Disk, err error) {
	if desc.HasParent() {
		return nil, fmt.Errorf("delta disk (parent %q): %w", desc.ParentFileNameHint, ErrUnsupported)
	}
	d := &Disk{path: path, desc: desc, format: desc.CreateType}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	var root *os.Root
	// What each file-backed extent uses of its file: two extents may not
	// share bytes, or a descriptor of 4096 lines naming one file would
	// multiply the work (and the backed-up data) by 4096.
	type use struct {
		fi       os.FileInfo
		off, end int64
		i        int
	}
	var used []use
	claim := func(f *os.File, i int, off, end int64) error {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("extent %d: %w", i, err)
		}
		for _, u := range used {
			if off < u.end && u.off < end && os.SameFile(fi, u.fi) {
				return fmt.Errorf("extent %d %q: bytes %d-%d of the file are also extent %d's: %w", i, desc.Extents[i].Filename, off, end, u.i, ErrCorrupt)
			}
		}
		used = append(used, use{fi, off, end, i})
		return nil
	}
	for i, e := range desc.Extents {
		var r extentReader
		length := e.Sectors * SectorSize
		switch e.Type {
		case "ZERO":
		case "FLAT", "VMFS", "SPARSE":
			if e.Access == "NOACCESS" {
				return nil, fmt.Errorf("extent %d %q: NOACCESS: %w", i, e.Filename, ErrUnsupported)
			}
			if e.Filename == "" {
				return nil, fmt.Errorf("extent %d: %s extent without a file name: %w", i, e.Type, ErrCorrupt)
			}
			if !filepath.IsLocal(e.Filename) {
				return nil, fmt.Errorf("extent %d file name %q escapes the descriptor's directory: %w", i, e.Filename, ErrCorrupt)
			}
			if root == nil {
				// os.Root also refuses symlinks that lead outside dir.
				if root, err = os.OpenRoot(dir); err != nil {
					return nil, err
				}
				defer root.Close()
			}
			f, err := root.Open(e.Filename)
			if err != nil {
				return nil, fmt.Errorf("extent %d: %w", i, err)
			}
			if e.Type == "SPARSE" {
				st, err := f.Stat()
				if err != nil {
					f.Close()
					return nil, fmt.Errorf("extent %d: %w", i, err)
				}
				if err := claim(f, i, 0, max(st.Size(), 1)); err != nil {
					f.Close()
					return nil, err
				}
				s, err := openSparseExtent(wrap(f), st.Size(), e.Filename, e.Sectors)
				if err != nil {
					f.Close()
					return nil, fmt.Errorf("extent %d: %w", i, err)
				}
				r = s
			} else {
				fe, err := openFlatExtent(f, i, e, self)
				if err == nil {
					err = claim(f, i, fe.base, fe.base+fe.length)
				}
				if err != nil {
					f.Close()
					return nil, err
				}
				r = fe
			}
		default:
			return nil, fmt.Errorf("extent %d type %s: %w", i, e.Type, ErrUnsupported)
		}
		d.parts = append(d.parts, part{d.size, length, r})
		d.size += length
	}
	return d, nil
}

// Size is the virtual disk's capacity in bytes.
func (d *Disk) Size() int64 { return d.size }

// Format is the descriptor's createType ("monolithicSparse",
// "streamOptimized", "monolithicFlat", "vmfs", "twoGbMaxExtentSparse", …).
func (d *Disk) Format() string { return d.format }

// Descriptor returns the parsed descriptor (nil for a sparse file without an
// embedded one).
func (d *Disk) Descriptor() *Descriptor { return d.desc }

// ReadAt reads virtual-disk bytes; unallocated grains read as zeros. Reads
// past the end return io.EOF.
func (d *Disk) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("vmdk %s: negative offset %d", d.path, off)
	}
	if d.parts == nil && d.size > 0 {
		return 0, fmt.Errorf("vmdk %s: %w", d.path, os.ErrClosed)
	}
	if off >= d.size {
		return 0, io.EOF
	}
	want := len(p)
	if int64(len(p)) > d.size-off {
		p = p[:d.size-off]
	}
	i := sort.Search(len(d.parts), func(i int) bool { return d.parts[i].start+d.parts[i].length > off })
	done := 0
	for ; i < len(d.parts) && done < len(p); i++ {
		pt := d.parts[i]
		in := off + int64(done) - pt.start
		n := int(min(int64(len(p)-done), pt.length-in))
		if pt.r == nil {
			clear(p[done : done+n])
		} else if err := pt.r.readAt(p[done:done+n], in); err != nil {
			return done, fmt.Errorf("vmdk %s at %d: %w", d.path, off+int64(done), err)
		}
		done += n
	}
	if done < want {
		return done, io.EOF
	}
	return done, nil
}

// Allocated lists the ranges that may hold data (allocated grains, the data
// regions of flat extents). If the metadata cannot be read it
// conservatively returns the whole disk; AllocatedExtents reports the error.
func (d *Disk) Allocated() []Extent {
	ext, err := d.AllocatedExtents()
	if err != nil {
		return []Extent{{0, d.size}}
	}
	return ext
}

// AllocatedExtents is Allocated with the error reported; extents are sorted,
// non-overlapping and merged when adjacent.
func (d *Disk) AllocatedExtents() ([]Extent, error) {
	var out []Extent
	for _, pt := range d.parts {
		if pt.r == nil {
			continue
		}
		err := pt.r.allocated(func(off, n int64) {
			off += pt.start
			if k := len(out); k > 0 && out[k-1].Offset+out[k-1].Length == off {
				out[k-1].Length += n
				return
			}
			out = append(out, Extent{off, n})
		})
		if err != nil {
			return nil, fmt.Errorf("vmdk %s: allocation map: %w", d.path, err)
		}
	}
	return out, nil
}

// Close releases the extent files.
func (d *Disk) Close() error {
	var errs []error
	for _, pt := range d.parts {
		if pt.r != nil {
			errs = append(errs, pt.r.close())
		}
	}
	d.parts = nil
	return errors.Join(errs...)
}

// flatExtent is a range of a raw file.
type flatExtent struct {
	f      *os.File
	name   string
	base   int64
	length int64
}

// openFlatExtent checks a FLAT/VMFS extent against its file before anything
// is read: the declared range must lie inside the file (a short file used to
// read as zeros, which backed up a truncated copy as a silently zeroed disk,
// and a 128 TiB extent on a small file as days of zeros), and the file must
// be raw data, not the descriptor itself or another VMDK.
func openFlatExtent(f *os.File, i int, e DescriptorExtent, self os.FileInfo) (*flatExtent, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("extent %d %q: %w", i, e.Filename, err)
	}
	if self != nil && os.SameFile(st, self) {
		return nil, fmt.Errorf("extent %d %q: %s extent is the descriptor file itself: %w", i, e.Filename, e.Type, ErrCorrupt)
	}
	size := st.Size()
	switch {
	case st.Mode()&os.ModeDevice != 0:
		// A block device (a raw device map's target) has its size at its end.
		if size, err = f.Seek(0, io.SeekEnd); err != nil {
			return nil, fmt.Errorf("extent %d %q: size of device: %w", i, e.Filename, err)
		}
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("extent %d %q: not a regular file or block device (%s): %w", i, e.Filename, st.Mode().Type(), ErrCorrupt)
	}
	base, length := e.Offset*SectorSize, e.Sectors*SectorSize
	if base+length > size {
		return nil, fmt.Errorf("extent %d %q: declares %d bytes at offset %d (up to byte %d) but the file holds %d bytes: %w",
			i, e.Filename, length, base, base+length, size, ErrCorrupt)
	}
	if err := notVMDK(f, size); err != nil {
		return nil, fmt.Errorf("extent %d %q: %s extent %w", i, e.Filename, e.Type, err)
	}
	return &flatExtent{f: f, name: e.Filename, base: base, length: length}, nil
}

// notVMDK refuses a flat extent file that is itself a VMDK: a sparse extent
// (its metadata would be backed up as disk data) or a text descriptor (the
// same file under another name, or a neighbour's). Only the head is read, so
// thousands of extent lines naming one file stay cheap.
func notVMDK(f *os.File, size int64) error {
	head := make([]byte, min(size, 4096))
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read: %w", err)
	}
	if len(head) >= 4 {
		if m := binary.LittleEndian.Uint32(head); m == sparseMagic || m == cowdMagic {
			return fmt.Errorf("is a sparse VMDK extent, not raw data: %w", ErrCorrupt)
		}
	}
	if i := bytes.IndexByte(head, 0); i >= 0 {
		head = head[:i]
	}
	// A raw disk starts with a boot sector, partition table or file system
	// (binary, NULs early); descriptor text is what ParseDescriptor accepts.
	if bytes.Contains(head, []byte("createType")) {
		if _, err := ParseDescriptor(head); err == nil || size <= int64(len(head)) || bytes.Contains(head, []byte("# Disk DescriptorFile")) {
			return fmt.Errorf("is a VMDK descriptor, not raw data: %w", ErrCorrupt)
		}
	}
	return nil
}

func (e *flatExtent) readAt(p []byte, off int64) error {
	n, err := e.f.ReadAt(p, e.base+off)
	if errors.Is(err, io.EOF) {
		// Open checked the file holds the extent: it shrank since.
		return fmt.Errorf("read %s at %d: file ends %d bytes into a %d-byte read (truncated since open): %w", e.name, e.base+off, n, len(p), ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", e.name, err)
	}
	return nil
}

func (e *flatExtent) allocated(fn func(off, n int64)) error {
	ext, err := DataExtents(e.f, e.base, e.length)
	if err != nil {
		return err
	}
	for _, x := range ext {
		fn(x.Offset, x.Length)
	}
	return nil
}

func (e *flatExtent) close() error { return e.f.Close() }
