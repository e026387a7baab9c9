package guestfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vmvault/vmvault/guestfs/part"
)

// located is a volume with the reader of its bytes.
type located struct {
	Volume
	r io.ReaderAt
}

// ctxReader fails every read once ctx is done: the readers below take no
// context, so this is how a cancelled request stops them.
type ctxReader struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c ctxReader) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(p, off)
}

func diskID(i int) string                             { return fmt.Sprintf("d%d", i) }
func partID(i, n int) string                          { return fmt.Sprintf("d%dp%d", i, n) }
func lvID(vg, lv string) string                       { return "lvm-" + dmEscape(vg) + "-" + dmEscape(lv) }
func dmEscape(s string) string                        { return strings.ReplaceAll(s, "-", "--") }
func intp(n int) *int                                 { return &n }
func section(r io.ReaderAt, off, n int64) io.ReaderAt { return io.NewSectionReader(r, off, n) }

// locate finds every volume with its reader.
func locate(ctx context.Context, disks []Disk) ([]located, error) {
	var out []located
	var pvs []located
	for i, d := range disks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d.R == nil || d.Size < 0 {
			return nil, fmt.Errorf("disk %d (%s): no reader", i, d.Name)
		}
		r := ctxReader{ctx, d.R}
		t, err := part.Read(r, d.Size)
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if t == nil || len(t.Partitions) == 0 {
			v := located{Volume{ID: diskID(i), Disk: d.Name, DiskIndex: i, Size: d.Size}, section(r, 0, d.Size)}
			v.FS, v.Label = probe(v.r, v.Size)
			if err != nil && !errors.Is(err, part.ErrNoTable) && v.FS == KindUnknown {
				v.Reason = fmt.Sprintf("unreadable partition table: %v", err)
			}
			out = append(out, v)
			continue
		}
		for _, p := range t.Partitions {
			v := located{Volume{ID: partID(i, p.Number), Disk: d.Name, DiskIndex: i, Partition: intp(p.Number),
				Offset: p.Start, Size: p.Size}, section(r, p.Start, p.Size)}
			v.FS, v.Label = probe(v.r, v.Size)
			if v.Label == "" && p.Name != "" && v.FS == KindUnknown {
				v.Label = p.Name
			}
			out = append(out, v)
		}
		if err != nil {
			// Logical partitions before the damage are listed; the rest of
			// the chain is reported on the disk, not fatal for the point.
			out = append(out, located{Volume: Volume{ID: diskID(i), Disk: d.Name, DiskIndex: i, Size: d.Size, FS: KindUnknown,
				Reason: fmt.Sprintf("partition table partly unreadable: %v", err)}})
		}
	}
	for _, v := range out {
		if v.FS == KindLVM2PV {
			pvs = append(pvs, v)
		}
	}
	if len(pvs) > 0 {
		lvs, notes := lvmVolumes(ctx, pvs)
		for i := range out {
			if n, ok := notes[out[i].ID]; ok {
				out[i].Reason = n
			}
		}
		out = append(out, lvs...)
	}
	for i := range out {
		if lf, ok := labelers[out[i].FS]; ok && out[i].Label == "" && out[i].r != nil {
			out[i].Label = safeLabel(lf, out[i].r, out[i].Size)
		}
		setBrowsable(&out[i].Volume)
	}
	return out, nil
}

// labelers read labels that live deeper than the superblock probe reads.
var labelers = map[string]func(r io.ReaderAt, size int64) string{}

func safeLabel(lf func(io.ReaderAt, int64) string, r io.ReaderAt, size int64) (l string) {
	defer func() {
		if recoverPanics {
			if p := recover(); p != nil {
				l = ""
			}
		}
	}()
	return lf(r, size)
}

// setBrowsable decides, from the kind, whether a reader exists, and says why not.
func setBrowsable(v *Volume) {
	if v.Reason != "" && v.FS != KindLVM2PV {
		v.Browsable = false
		return
	}
	if _, ok := backends[v.FS]; ok {
		v.Browsable = true
		return
	}
	if v.Reason != "" {
		return
	}
	switch v.FS {
	case KindLUKS:
		v.Reason = "LUKS-encrypted: cannot be browsed without the key"
	case KindBitLocker:
		v.Reason = "BitLocker-encrypted: cannot be browsed without the recovery key"
	case KindLVM2PV:
		v.Reason = "LVM physical volume: browse its logical volumes"
	case KindSwap:
		v.Reason = "swap space holds no files"
	case KindUnknown:
		v.Reason = "no known file system"
	default:
		v.Reason = fmt.Sprintf("%s is not supported for file-level restore", v.FS)
	}
}

// backends maps a volume kind to the function that opens its reader.
var backends = map[string]func(r io.ReaderAt, size int64) (backend, error){}

func findVolumes(ctx context.Context, disks []Disk) ([]Volume, error) {
	ls, err := locate(ctx, disks)
	if err != nil {
		return nil, err
	}
	out := make([]Volume, len(ls))
	for i, l := range ls {
		out[i] = l.Volume
	}
	return out, nil
}

func openVolume(ctx context.Context, disks []Disk, id string) (FS, error) {
	ls, err := locate(ctx, disks)
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		if l.ID != id {
			continue
		}
		if !l.Browsable {
			return nil, fmt.Errorf("volume %s (%s): %w: %s", id, l.FS, ErrNotBrowsable, l.Reason)
		}
		b, err := openBackend(l)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("volume %s: open %s: %w", id, l.FS, err)
		}
		return &fsys{ctx: ctx, vol: l.Volume, b: b}, nil
	}
	return nil, fmt.Errorf("volume %q: %w", id, ErrNoVolume)
}

// openBackend opens a reader, recovering a panic while it parses the superblock.
func openBackend(l located) (b backend, err error) {
	defer func() {
		if !recoverPanics {
			return
		}
		if p := recover(); p != nil {
			b, err = nil, fmt.Errorf("%w: the %s reader failed: %v", ErrCorrupt, l.FS, p)
		}
	}()
	b, err = backends[l.FS](l.r, l.Size)
	return b, markCorrupt(err)
}
