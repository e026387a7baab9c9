package guestfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/vmvault/vmvault/guestfs/lvm"
)

// lvmVolumes assembles the logical volumes of the physical volumes found.
// Each VG's newest metadata (highest seqno over its PVs' copies) wins.
// notes gives the reason to show on a PV (by volume ID) when its VG cannot
// be assembled; an LV that cannot be mapped is listed with its reason.
func lvmVolumes(ctx context.Context, pvs []located) (lvs []located, notes map[string]string) {
	notes = map[string]string{}
	byUUID := map[string]located{}
	vgs := map[string]*lvm.VG{}
	vgPVs := map[string][]string{} // VG name -> volume IDs of its PVs
	for _, p := range pvs {
		if ctx.Err() != nil {
			return nil, notes
		}
		pv, err := lvm.ReadLabel(p.r, p.Size)
		if err != nil {
			notes[p.ID] = fmt.Sprintf("LVM physical volume with unreadable metadata: %v", err)
			continue
		}
		byUUID[pv.UUID] = p
		if pv.Metadata == nil {
			notes[p.ID] = "LVM physical volume in no volume group"
			continue
		}
		vg, err := lvm.Parse(pv.Metadata)
		if err != nil {
			notes[p.ID] = fmt.Sprintf("LVM physical volume with unreadable metadata: %v", err)
			continue
		}
		vgPVs[vg.Name] = append(vgPVs[vg.Name], p.ID)
		if old, ok := vgs[vg.Name]; !ok || vg.Seqno > old.Seqno {
			vgs[vg.Name] = vg
		}
	}
	names := make([]string, 0, len(vgs))
	for n := range vgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		vg := vgs[n]
		for _, id := range vgPVs[n] {
			notes[id] = fmt.Sprintf("LVM physical volume of VG %s: browse its logical volumes", n)
		}
		vgErr := vg.Check()
		for _, lv := range vg.LVs {
			if !lv.Visible {
				continue // internal LVs: pool metadata, RAID legs, snapshot COW stores
			}
			v := located{Volume: Volume{ID: lvID(vg.Name, lv.Name), DiskIndex: -1, LV: vg.Name + "/" + lv.Name, FS: KindUnknown}}
			ranges, err := vg.Map(lv)
			if err == nil {
				err = vgErr
			}
			var cat *concat
			if err == nil {
				cat, err = newConcat(ranges, byUUID)
			}
			if err != nil {
				if errors.Is(err, lvm.ErrUnsupported) {
					v.Reason = fmt.Sprintf("LV %s/%s: %v", vg.Name, lv.Name, err)
				} else {
					v.Reason = fmt.Sprintf("LV %s/%s cannot be assembled: %v", vg.Name, lv.Name, err)
				}
				for _, s := range lv.Segments {
					v.Size += s.Count * vg.ExtentSize
				}
				lvs = append(lvs, v)
				continue
			}
			v.r, v.Size = cat, cat.size
			// An LV on one disk names it; one spanning disks names none.
			v.Disk, v.DiskIndex = cat.disk, cat.diskIndex
			v.FS, v.Label = probe(v.r, v.Size)
			lvs = append(lvs, v)
		}
	}
	return lvs, notes
}

// concat reads an LV: its ranges laid end to end over the PVs' readers.
type concat struct {
	parts     []piece
	size      int64
	disk      string
	diskIndex int
}

type piece struct {
	off, n, at int64
	r          io.ReaderAt
}

func newConcat(ranges []lvm.Range, byUUID map[string]located) (*concat, error) {
	c := &concat{diskIndex: -2}
	for _, rg := range ranges {
		pv, ok := byUUID[rg.PV]
		if !ok {
			return nil, fmt.Errorf("PV %s is not on any disk of this restore point", rg.PV)
		}
		if rg.PVOff < 0 || rg.PVOff+rg.Len > pv.Size {
			return nil, fmt.Errorf("%w: extents at byte %d+%d past the end of the %d-byte PV", ErrCorrupt, rg.PVOff, rg.Len, pv.Size)
		}
		c.parts = append(c.parts, piece{off: rg.Off, n: rg.Len, at: rg.PVOff, r: pv.r})
		c.size = rg.Off + rg.Len
		switch c.diskIndex {
		case -2:
			c.diskIndex, c.disk = pv.DiskIndex, pv.Disk
		case pv.DiskIndex:
		default:
			c.diskIndex, c.disk = -1, ""
		}
	}
	return c, nil
}

func (c *concat) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		if pos >= c.size {
			return done, io.EOF
		}
		i := sort.Search(len(c.parts), func(i int) bool { return c.parts[i].off+c.parts[i].n > pos })
		pt := c.parts[i]
		n := int(min(int64(len(p)-done), pt.off+pt.n-pos))
		m, err := pt.r.ReadAt(p[done:done+n], pt.at+pos-pt.off)
		done += m
		if err != nil && !(err == io.EOF && m == n) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
	}
	return done, nil
}
