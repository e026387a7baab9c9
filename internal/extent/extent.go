// Package extent owns the one normalisation of byte-range lists: sort by
// offset, clip to the disk, drop empty ranges, merge overlapping or touching
// ones. Extent lists arrive from outside in any shape (CBT answers, lseek
// data ranges, a --changed file, a parent's map), and every package that
// takes one uses Normalize, so "sorted, disjoint, not touching, inside the
// disk" means the same everywhere. It imports only the standard library and
// works on each package's own extent type (see Like).
package extent

import (
	"cmp"
	"math"
	"slices"
)

// Extent is a byte range [Offset, Offset+Length).
type Extent struct{ Offset, Length int64 }

// Like is any extent type: a struct of exactly an Offset and a Length
// int64 (dedup.Extent, vmdk.Extent, imagefile.Extent), or the same with
// JSON tags (vsphere.Extent).
type Like interface {
	~struct{ Offset, Length int64 } | ~struct {
		Offset int64 `json:"offset"`
		Length int64 `json:"length"`
	}
}

// NoLimit is a limit for Normalize that clips nothing.
const NoLimit int64 = math.MaxInt64

// Normalize returns in's extents sorted by offset, clipped to [0, limit),
// with empty ones dropped and overlapping or touching ones merged; nil when
// none remains. in is not modified. A range whose end overflows int64 ends
// at limit.
func Normalize[E Like](in []E, limit int64) []E {
	var out []E
	for _, v := range in {
		x := Extent(v)
		start, end := x.Offset, x.Offset+x.Length
		if x.Length > math.MaxInt64-max(x.Offset, 0) {
			end = math.MaxInt64
		}
		start, end = max(start, 0), min(end, limit)
		if x.Length <= 0 || start >= end {
			continue
		}
		out = append(out, E(Extent{start, end - start}))
	}
	Sort(out)
	m := out[:0]
	for _, v := range out {
		x := Extent(v)
		if n := len(m); n > 0 {
			last := Extent(m[n-1])
			if x.Offset <= last.Offset+last.Length {
				end := max(last.Offset+last.Length, x.Offset+x.Length)
				m[n-1] = E(Extent{last.Offset, end - last.Offset})
				continue
			}
		}
		m = append(m, v)
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// Sort sorts extents by offset, in place.
func Sort[E Like](s []E) {
	slices.SortFunc(s, func(a, b E) int { return cmp.Compare(Extent(a).Offset, Extent(b).Offset) })
}
