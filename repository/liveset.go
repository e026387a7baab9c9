package repository

import (
	"encoding/binary"
	"slices"
)

// liveSet is reclaim's set of live blob ids, in memory bounded at about 8
// bytes per live chunk (a Go map of 32-byte ids took ~80: 8 GiB at 100
// million chunks, a 100 TB repository of 1 MiB chunks).
//
// Two parts:
//   - exact holds whole ids of the few metadata blobs (points' manifests,
//     configs, disk roots, segments: a segment covers thousands of chunks).
//     The mark's "already marked" shortcuts and markHeldPoints ask for
//     these, and they must be exact: a false "already marked" would skip a
//     point's blobs.
//   - prefixes holds the first 8 bytes of every other id (data chunks, the
//     ids sessions hold, pending blobs), big-endian so that their order is
//     the catalog's key order; sorted and deduplicated when the slice is
//     full (before it grows) and before the first query.
//
// A data id is live when its prefix is in the set. A dead blob whose prefix
// equals a live one's is then taken as live: it stays one more reclaim,
// which is safe (nothing live is ever taken as dead). Ids are cryptographic hashes,
// so this happens to a given dead blob with probability live/2^64 (5e-12 at
// 100 million live chunks). See liveMissing for the one question a prefix
// answers less exactly than a whole id.
//
// Memory: 8 bytes per blob the catalog's packs hold (the slice is sized
// from them up front, liveSetHint: 100 million chunks, 763 MiB), more only
// when the points reference more than the catalog has (by a quarter at a
// time), plus the exact map (~100 bytes per metadata blob; a segment
// covers 256 MiB of disk, 256 chunks of 1 MiB). A liveSet is used by one
// goroutine.
type liveSet struct {
	exact    map[ID]struct{}
	prefixes []uint64
	sorted   int // prefixes[:sorted] is sorted and unique
}

// newLiveSet returns an empty set with room for hint data prefixes.
func newLiveSet(hint int) *liveSet {
	return &liveSet{exact: map[ID]struct{}{}, prefixes: make([]uint64, 0, max(hint, 0))}
}

func idPrefix(id ID) uint64 { return binary.BigEndian.Uint64(id[:8]) }

// addMeta adds a metadata blob (manifest, config, root, segment) whole.
func (l *liveSet) addMeta(id ID) { l.exact[id] = struct{}{} }

// hasMeta reports whether id was added whole (exact).
func (l *liveSet) hasMeta(id ID) bool {
	_, ok := l.exact[id]
	return ok
}

// add adds a data blob (or any id not asked for exactly) by its prefix.
func (l *liveSet) add(id ID) {
	if len(l.prefixes) == cap(l.prefixes) && len(l.prefixes) > 0 {
		// Deduplicate before growing: chunks shared by several segments
		// (dedup across disks) are appended once per segment.
		l.compact()
		if len(l.prefixes) > cap(l.prefixes)*7/8 {
			// By a quarter: sized from the catalog (liveSetHint), the
			// set rarely grows at all, and a copy needs old and new.
			l.prefixes = slices.Grow(l.prefixes, max(len(l.prefixes)/4, 1024))
		}
	}
	l.prefixes = append(l.prefixes, idPrefix(id))
}

// compact sorts and deduplicates the prefixes in place.
func (l *liveSet) compact() {
	if l.sorted == len(l.prefixes) {
		return
	}
	slices.Sort(l.prefixes)
	l.prefixes = slices.Compact(l.prefixes)
	l.sorted = len(l.prefixes)
}

// has reports whether id is live: added whole, or its prefix added.
func (l *liveSet) has(id ID) bool {
	if _, ok := l.exact[id]; ok {
		return true
	}
	l.compact()
	_, ok := slices.BinarySearch(l.prefixes, idPrefix(id))
	return ok
}

// len is the number of distinct entries (metadata ids plus data prefixes).
func (l *liveSet) len() int {
	l.compact()
	return len(l.exact) + len(l.prefixes)
}

// sortedPrefixes returns the data prefixes, sorted and unique; the slice
// is the set's own.
func (l *liveSet) sortedPrefixes() []uint64 {
	l.compact()
	return l.prefixes
}
