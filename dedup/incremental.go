package dedup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
)

// MapExtent is one extent of a parent disk map as the slice planner sees it: a hole, or the bytes
// [Skip, Skip+Length) of a stored blob. Blob identifies the blob (extents of the same blob carry
// the same value; the caller numbers blobs); BlobLen is the blob's length.
type MapExtent struct {
	Offset, Length int64
	Zero           bool
	Blob           int
	Skip           int64
	BlobLen        int64
}

// Method is how an incremental backup derives the new disk map.
type Method string

// Methods ChooseIncremental picks between.
const (
	// MethodRechunk re-chunks around each change with CDC (Chunker.Rechunk): the new map is exactly
	// the map a full backup would make, at the price of re-reading, re-hashing and re-storing every
	// parent chunk a change touches.
	MethodRechunk Method = "rechunk"
	// MethodSlices stores the changed bytes only and references the rest of the parent's blobs by
	// slices (Incremental), compacting fragmented windows with CDC.
	MethodSlices Method = "slices"
)

// IncrementalOptions tune the slice planner; zero values take the defaults.
type IncrementalOptions struct {
	// Window is the compaction unit (default: the chunker's average size, 1 MiB by default, so a
	// window of a full backup's map holds one or two chunks); new pieces of short changed runs are
	// also cut at window boundaries, so none is larger.
	Window int64
	// MaxExtents: a window that would hold more extents than this is rewritten with CDC
	// (default 64: with 1 MiB windows, 16 made a chain of 1%-of-the-data 4 KiB incrementals
	// rewrite a third of the data every third backup, while restores at 64 ran as fast as the
	// full point's; docs/PERFORMANCE.md section 6).
	MaxExtents int
	// MinUse: a parent blob of which the new map would use less than this fraction has every window
	// that references it rewritten (default 0.25).
	MinUse float64
	// RechunkFactor: Rechunk is chosen when the parent map is a plain CDC map and the bytes it would
	// re-process are at most RechunkFactor times the bytes the slice planner would (default 1:
	// Rechunk also decodes the parent bytes it re-chunks, and at 1.25 it was picked for 1 MiB runs
	// where it ran 3x slower than slices).
	RechunkFactor float64
	// RunCDC: a changed run (CBT extents merged where they touch) of at least this many bytes is
	// cut with the chunker from its own bytes, starting at the run's first byte, instead of into
	// window pieces: its cuts then follow its content, not its disk offset, so the same new file
	// written at another place of this disk or of another VM makes the same blobs (issue 15).
	// Shorter runs (small scattered writes) stay window pieces, coalesced per window. Default: the
	// window (1 MiB with the default chunker: two minimum-size chunks).
	RunCDC int64
}

// Default slice planner parameters (docs/PERFORMANCE.md section 6 has the measurements).
const (
	DefaultWindow        = 1 << 20
	DefaultMaxExtents    = 64
	DefaultMinUse        = 0.25
	DefaultRechunkFactor = 1.0
)

func (o IncrementalOptions) withDefaults(c Chunker) IncrementalOptions {
	if o.Window <= 0 {
		o.Window = DefaultWindow
		if c != nil && c.Params().AvgSize > 0 {
			o.Window = int64(c.Params().AvgSize)
		}
	}
	if o.MaxExtents <= 0 {
		o.MaxExtents = DefaultMaxExtents
	}
	if o.MinUse <= 0 {
		o.MinUse = DefaultMinUse
	}
	if o.RechunkFactor <= 0 {
		o.RechunkFactor = DefaultRechunkFactor
	}
	if o.RunCDC <= 0 {
		o.RunCDC = o.Window
	}
	return o
}

// Estimate is what each method would process, computed from the maps alone (nothing is read).
type Estimate struct {
	Method Method
	// Changed is the number of changed bytes (read from the source by either method).
	Changed int64
	// RechunkBytes is the size of the parent chunks the changes touch plus one chunk after each run
	// of touched chunks (what Rechunk re-hashes and re-stores); -1 when Rechunk cannot run because
	// the parent map is not a plain CDC map of this chunker (it holds slices or compacted windows).
	RechunkBytes int64
	// SliceBytes is what the slice planner re-hashes and stores: the changed bytes outside
	// compacted windows plus the compacted windows.
	SliceBytes int64
	// Windows is the number of windows the slice planner compacts, WindowsByCount of them over the
	// extent limit (the rest because of weakly used blobs).
	Windows, WindowsByCount int
}

// IncrementalStats count what Incremental did.
type IncrementalStats struct {
	SourceBytes     int64 // read from src (changed bytes)
	ParentBytes     int64 // read from parent (compacted windows only)
	CompactWindows  int   // windows rewritten with CDC
	CompactBytes    int64 // bytes of those windows
	SlicedExtents   int   // chunks emitted as references into parent extents
	NewPieces       int   // new data pieces (changed bytes outside compacted windows)
	Groups          int   // blobs holding the data pieces of one window back to back (2+ pieces each)
	ZeroPieces      int   // changed pieces that read as zeros (holes)
	CompactedChunks int   // chunks cut by CDC in compacted windows
	Runs            int   // changed runs of at least RunCDC bytes, cut with CDC from their own bytes
	RunBytes        int64 // bytes of those runs (outside compacted windows)
	RunChunks       int   // chunks cut in them (zero chunks included)
}

// item is one extent of the naive new map: a part of a parent extent, or a changed range.
type item struct {
	off, n int64
	par    int  // parent extent index, or -1 for changed bytes
	run    bool // a changed run cut with CDC from its own bytes (not cut at windows)
}

func (it item) end() int64 { return it.off + it.n }

// sliceplan is the first phase of Incremental: the naive new map and the windows to rewrite.
type sliceplan struct {
	size    int64
	o       IncrementalOptions
	par     []MapExtent
	changed []Extent
	items   []item
	runs    []Extent // compacted runs of windows, sorted, disjoint, window-aligned (clipped to size)
	windows int
	byCount int
}

func checkMap(par []MapExtent, size int64) error {
	var off int64
	for i, p := range par {
		if p.Offset != off || p.Length <= 0 {
			return fmt.Errorf("%w: parent extent %d at %d+%d, expected offset %d", ErrParentMismatch, i, p.Offset, p.Length, off)
		}
		if !p.Zero && (p.Skip < 0 || p.BlobLen <= 0 || p.Skip+p.Length > p.BlobLen) {
			return fmt.Errorf("%w: parent extent %d uses [%d,+%d) of a %d-byte blob", ErrParentMismatch, i, p.Skip, p.Length, p.BlobLen)
		}
		off += p.Length
	}
	if off != size {
		return fmt.Errorf("%w: parent map covers %d bytes, disk has %d", ErrSizeChanged, off, size)
	}
	return nil
}

func newSlicePlan(c Chunker, size int64, par []MapExtent, changed []Extent, o IncrementalOptions) (*sliceplan, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative disk size %d", ErrBadExtent, size)
	}
	if err := checkMap(par, size); err != nil {
		return nil, err
	}
	ch, err := normalizeExtents(changed, size, "changed")
	if err != nil {
		return nil, err
	}
	p := &sliceplan{size: size, o: o.withDefaults(c), par: par, changed: ch}
	w := p.o.Window
	// The naive map: parent extents clipped around the changes; changed ranges cut at windows.
	pi := 0
	keep := func(a, b int64) {
		for pi < len(par) && par[pi].Offset+par[pi].Length <= a {
			pi++
		}
		for j := pi; j < len(par) && par[j].Offset < b; j++ {
			lo, hi := max(a, par[j].Offset), min(b, par[j].Offset+par[j].Length)
			p.items = append(p.items, item{off: lo, n: hi - lo, par: j})
		}
	}
	var at int64
	for _, c := range ch {
		keep(at, c.Offset)
		if c.Length >= p.o.RunCDC {
			p.items = append(p.items, item{off: c.Offset, n: c.Length, par: -1, run: true})
			at = c.Offset + c.Length
			continue
		}
		for off := c.Offset; off < c.Offset+c.Length; {
			end := min(c.Offset+c.Length, (off/w+1)*w)
			p.items = append(p.items, item{off: off, n: end - off, par: -1})
			off = end
		}
		at = c.Offset + c.Length
	}
	keep(at, size)

	// Windows over the extent limit: only windows holding an item boundary can hold more than one
	// item, so counting at each item's first and last window is exact.
	// A run cut with CDC makes chunks of at least the chunker's minimum size but its last: it
	// counts, in every window it touches, the most chunks it can leave there.
	minChunk := w
	if c != nil {
		if pr := c.Params(); pr.Algorithm == AlgorithmFixed {
			minChunk = int64(pr.AvgSize)
		} else if pr.MinSize > 0 {
			minChunk = int64(pr.MinSize)
		}
	}
	count := map[int64]int{}
	for _, it := range p.items {
		a, b := it.off/w, (it.end()-1)/w
		if it.run {
			for win := a; win <= b; win++ {
				ov := min(it.end(), (win+1)*w) - max(it.off, win*w)
				count[win] += int(ov/minChunk) + 2
			}
			continue
		}
		count[a]++
		if b != a {
			count[b]++
		}
	}
	marked := map[int64]bool{}
	for win, n := range count {
		if n > p.o.MaxExtents {
			marked[win] = true
		}
	}
	p.byCount = len(marked)
	// Weakly used parent blobs: every window referencing them is rewritten. Rewriting removes
	// references, which can weaken other blobs: iterate to a fixed point (bounded).
	for range 8 {
		use := map[int]int64{}
		blen := map[int]int64{}
		for _, it := range p.items {
			if it.par < 0 || par[it.par].Zero || p.inMarked(marked, it) {
				continue
			}
			use[par[it.par].Blob] += it.n
			blen[par[it.par].Blob] = par[it.par].BlobLen
		}
		added := false
		for _, it := range p.items {
			if it.par < 0 || par[it.par].Zero || p.inMarked(marked, it) {
				continue
			}
			b := par[it.par].Blob
			if float64(use[b]) >= p.o.MinUse*float64(blen[b]) {
				continue
			}
			for win := it.off / w; win <= (it.end()-1)/w; win++ {
				if !marked[win] {
					marked[win] = true
					added = true
				}
			}
		}
		if !added {
			break
		}
	}
	wins := make([]int64, 0, len(marked))
	for win := range marked {
		wins = append(wins, win)
	}
	sort.Slice(wins, func(i, j int) bool { return wins[i] < wins[j] })
	p.windows = len(wins)
	for _, win := range wins {
		a, b := win*w, min((win+1)*w, size)
		if n := len(p.runs); n > 0 && p.runs[n-1].Offset+p.runs[n-1].Length == a {
			p.runs[n-1].Length = b - p.runs[n-1].Offset
			continue
		}
		p.runs = append(p.runs, Extent{Offset: a, Length: b - a})
	}
	return p, nil
}

// inMarked reports whether every window the item touches is marked (the item disappears).
func (p *sliceplan) inMarked(marked map[int64]bool, it item) bool {
	for win := it.off / p.o.Window; win <= (it.end()-1)/p.o.Window; win++ {
		if !marked[win] {
			return false
		}
	}
	return true
}

// sliceBytes estimates what the slice planner re-hashes and stores.
func (p *sliceplan) sliceBytes() int64 {
	var n int64
	ri := 0
	for _, c := range p.changed {
		for ri < len(p.runs) && p.runs[ri].Offset+p.runs[ri].Length <= c.Offset {
			ri++
		}
		n += c.Length
		for j := ri; j < len(p.runs) && p.runs[j].Offset < c.Offset+c.Length; j++ {
			n -= min(c.Offset+c.Length, p.runs[j].Offset+p.runs[j].Length) - max(c.Offset, p.runs[j].Offset)
		}
	}
	for _, r := range p.runs {
		n += r.Length
	}
	return n
}

// rechunkBytes estimates what Rechunk re-processes: every parent chunk a change touches, plus the
// chunk after each run of touched chunks (where the chain falls back onto the parent's cuts).
func rechunkBytes(par []MapExtent, changed []Extent) int64 {
	var n int64
	pi := 0
	last := -1
	for _, c := range changed {
		for pi < len(par) && par[pi].Offset+par[pi].Length <= c.Offset {
			pi++
		}
		for j := pi; j < len(par) && par[j].Offset < c.Offset+c.Length; j++ {
			if j <= last {
				continue
			}
			if last >= 0 && j > last+1 && last+1 < len(par) && !par[last+1].Zero {
				n += par[last+1].Length // the resynchronising chunk after the previous run
			}
			if !par[j].Zero {
				n += par[j].Length
			} else {
				n += min(par[j].Offset+par[j].Length, c.Offset+c.Length) - max(par[j].Offset, c.Offset)
			}
			last = j
		}
	}
	if last >= 0 && last+1 < len(par) && !par[last+1].Zero {
		n += par[last+1].Length
	}
	return n
}

// ChooseIncremental applies the cost rule: Rechunk when the parent map is a plain CDC map of c
// (no slices, every chunk within c's bounds) and Rechunk would re-process at most
// o.RechunkFactor times the bytes the slice planner would; the slice planner otherwise. Both
// estimates come from the maps alone.
func ChooseIncremental(c Chunker, size int64, parent []MapExtent, changed []Extent, o IncrementalOptions) (Estimate, error) {
	o = o.withDefaults(c)
	p, err := newSlicePlan(c, size, parent, changed, o)
	if err != nil {
		return Estimate{}, err
	}
	est := Estimate{Method: MethodSlices, Changed: sumExtents(p.changed), SliceBytes: p.sliceBytes(), Windows: p.windows,
		WindowsByCount: p.byCount, RechunkBytes: -1}
	ci, ok := c.(*impl)
	if !ok || ci.checkParent(ParentChunks(parent), size) != nil {
		return est, nil
	}
	for _, x := range parent {
		if !x.Zero && (x.Skip != 0 || x.Length != x.BlobLen) {
			return est, nil
		}
	}
	est.RechunkBytes = rechunkBytes(parent, p.changed)
	if float64(est.RechunkBytes) <= o.RechunkFactor*float64(est.SliceBytes) {
		est.Method = MethodRechunk
	}
	return est, nil
}

// ParentChunks converts a map to Rechunk's parent chunk list.
func ParentChunks(m []MapExtent) []ParentChunk {
	out := make([]ParentChunk, len(m))
	for i, x := range m {
		out[i] = ParentChunk{Offset: x.Offset, Length: x.Length, Zero: x.Zero}
	}
	return out
}

// Incremental derives a new disk map from its parent's map without reading the parent, except in
// the windows it compacts: each changed extent is read from src exactly once. A changed run of at
// least RunCDC bytes is cut with c from its own bytes (its first byte is a cut, the others follow
// its content), so the same new data at any offset, on this disk or another, makes the same blobs.
// Shorter runs are emitted as new data pieces (cut at window boundaries, so at most Window bytes
// each; all-zero pieces as Zero chunks). When two or more pieces of one window hold data, they are
// coalesced: one Group chunk (Length 0) carries their bytes back to back as one blob, and each
// piece follows as an InGroup chunk, a slice of it (Skip = its place in the blob) — per-blob costs
// (hash, seal, catalog entry) are then paid per window, not per CBT extent, and the same changes
// at the same places still make the same blob. A lone piece (a whole window, or the only one with data) stays a plain data
// chunk. Every unchanged byte is emitted as a reference into the parent extent that holds it
// (Chunk.Parent = its index in parent, Offset and Length within that extent). Windows that would
// hold more than MaxExtents extents, or reference a parent blob of which the new map keeps less than
// MinUse, are rewritten: their current content (changed bytes from src, the rest from parent) is cut
// with c's CDC starting at the window boundary, so fragmentation stays bounded along a long chain
// of incrementals. Chunks are emitted in offset order from the calling goroutine; Data buffers pass
// to emit's receiver (ReleaseBuffer). ctx cancels.
func Incremental(ctx context.Context, c Chunker, src, parent io.ReaderAt, size int64, parentMap []MapExtent, changed []Extent,
	o IncrementalOptions, emit func(Chunk) error) (IncrementalStats, error) {
	var st IncrementalStats
	p, err := newSlicePlan(c, size, parentMap, changed, o)
	if err != nil {
		return st, err
	}
	if len(p.changed) > 0 && src == nil {
		return st, errors.New("incremental: nil source")
	}
	if len(p.runs) > 0 && parent == nil {
		return st, errors.New("incremental: nil parent reader")
	}
	st.CompactWindows = p.windows
	out := func(ch Chunk) error {
		if err := emit(ch); err != nil {
			return fmt.Errorf("emit chunk at offset %d: %w", ch.Offset, err)
		}
		return nil
	}
	ii := 0
	// The changed pieces of the window being emitted, when two or more of them hold data: they are
	// read into one buffer and emitted as one Group chunk (one blob), each piece as a slice of it.
	grpWin := int64(-1)
	grp := map[int]int64{}            // item index -> Skip in the group blob, or -1 for a zero piece
	lone, loneData := -1, []byte(nil) // the window's only data piece when the others read as zeros
	w := p.o.Window
	// readPiece reads the changed bytes [lo, hi) into dst.
	readPiece := func(dst []byte, lo int64) error {
		n, err := src.ReadAt(dst, lo)
		st.SourceBytes += int64(n)
		if n < len(dst) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read changed bytes at %d (%d bytes): %w", lo, len(dst), err)
		}
		return nil
	}
	// group reads the changed pieces of window win starting at item j (all inside [a, b): compacted
	// runs are whole windows) and emits their Group chunk when two or more hold data.
	group := func(j int, win, a, b int64) error {
		grpWin = win
		clear(grp)
		lone, loneData = -1, nil
		var idx []int
		var total int64
		for k := j; k < len(p.items) && p.items[k].off < b && p.items[k].off/w == win; k++ {
			if it := p.items[k]; it.par < 0 && !it.run {
				idx = append(idx, k)
				total += min(b, it.end()) - max(a, it.off)
			}
		}
		if len(idx) < 2 {
			return nil // a lone piece (or a whole window) stays a plain data chunk
		}
		buf := getBuffer(int(total))
		var fill int64
		var data []int
		for _, k := range idx {
			it := p.items[k]
			lo, hi := max(a, it.off), min(b, it.end())
			dst := buf[fill : fill+hi-lo]
			if err := readPiece(dst, lo); err != nil {
				ReleaseBuffer(buf)
				return err
			}
			if isZero(dst) {
				grp[k] = -1
				continue
			}
			grp[k] = fill
			fill += hi - lo
			data = append(data, k)
		}
		switch len(data) {
		case 0:
			ReleaseBuffer(buf)
			return nil
		case 1: // it is at buf[0:fill]: a plain data chunk
			delete(grp, data[0])
			lone, loneData = data[0], buf[:fill]
			return nil
		}
		st.Groups++
		return out(Chunk{Offset: max(a, p.items[j].off), Data: buf[:fill], Parent: -1, Group: true})
	}
	// Nested Splits must not add their reads to the caller's Stats: we count them here.
	sctx := context.WithValue(ctx, statsKey{}, (*Stats)(nil))
	// splitRun cuts the changed run [lo, hi) with the chunker from its own bytes: the first cut
	// is lo, the others follow the content (the run's last chunk ends at hi).
	splitRun := func(lo, hi int64) error {
		v := &sectionReader{r: src, base: lo}
		err := c.Split(sctx, v, hi-lo, nil, func(ch Chunk) error {
			ch.Offset += lo
			st.RunChunks++
			return out(ch)
		})
		st.SourceBytes += v.n
		st.Runs++
		st.RunBytes += hi - lo
		return err
	}
	// emitRange emits the naive map's items clipped to [a, b).
	emitRange := func(a, b int64) error {
		for ii < len(p.items) && p.items[ii].end() <= a {
			ii++
		}
		for j := ii; j < len(p.items) && p.items[j].off < b; j++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			it := p.items[j]
			lo, hi := max(a, it.off), min(b, it.end())
			if it.run {
				if err := splitRun(lo, hi); err != nil {
					return err
				}
				continue
			}
			ch := Chunk{Offset: lo, Length: int(hi - lo), Parent: -1}
			if it.par < 0 && it.off/w != grpWin {
				if err := group(j, it.off/w, a, b); err != nil {
					return err
				}
			}
			skip, grouped := grp[j]
			switch {
			case it.par >= 0 && parentMap[it.par].Zero:
				ch.Zero = true
			case it.par >= 0:
				ch.Parent = it.par
				st.SlicedExtents++
			case grouped && skip < 0:
				ch.Zero = true
				st.ZeroPieces++
			case grouped:
				ch.InGroup, ch.Skip = true, skip
				st.NewPieces++
			case j == lone:
				ch.Data, loneData = loneData, nil
				st.NewPieces++
			default:
				buf := getBuffer(ch.Length)
				if err := readPiece(buf, lo); err != nil {
					ReleaseBuffer(buf)
					return err
				}
				if isZero(buf) {
					ReleaseBuffer(buf)
					ch.Zero = true
					st.ZeroPieces++
				} else {
					ch.Data = buf
					st.NewPieces++
				}
			}
			if err := out(ch); err != nil {
				return err
			}
		}
		return nil
	}
	var at int64
	for _, r := range p.runs {
		if err := emitRange(at, r.Offset); err != nil {
			return st, err
		}
		v := &windowView{p: p, base: r.Offset, src: src, parent: parent}
		err := c.Split(sctx, v, r.Length, v.allocated(r), func(ch Chunk) error {
			ch.Offset += r.Offset
			st.CompactedChunks++
			return out(ch)
		})
		st.SourceBytes += v.srcRead
		st.ParentBytes += v.parRead
		if err != nil {
			return st, err
		}
		st.CompactBytes += r.Length
		at = r.Offset + r.Length
	}
	if err := emitRange(at, size); err != nil {
		return st, err
	}
	return st, nil
}

// sectionReader reads r from base on, counting the bytes read (one goroutine).
type sectionReader struct {
	r    io.ReaderAt
	base int64
	n    int64
}

func (s *sectionReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := s.r.ReadAt(b, s.base+off)
	s.n += int64(n)
	return n, err
}

// windowView is the new disk's content inside a compacted run, seen from the run's start: changed
// bytes from src, parent holes as zeros, the rest from parent. Split reads it from one goroutine.
type windowView struct {
	p                *sliceplan
	base             int64
	src, parent      io.ReaderAt
	srcRead, parRead int64
}

// allocated lists the run's bytes that are not parent holes (or are changed), relative to base.
func (v *windowView) allocated(r Extent) []Extent {
	var out []Extent
	add := func(a, b int64) {
		if n := len(out); n > 0 && out[n-1].Offset+out[n-1].Length == a-v.base {
			out[n-1].Length += b - a
			return
		}
		out = append(out, Extent{Offset: a - v.base, Length: b - a})
	}
	items := v.p.items
	for i := sort.Search(len(items), func(i int) bool { return items[i].end() > r.Offset }); i < len(items) && items[i].off < r.Offset+r.Length; i++ {
		it := items[i]
		if it.par >= 0 && v.p.par[it.par].Zero {
			continue
		}
		add(max(it.off, r.Offset), min(it.end(), r.Offset+r.Length))
	}
	if out == nil {
		out = []Extent{}
	}
	return out
}

func (v *windowView) ReadAt(b []byte, off int64) (int, error) {
	a := v.base + off
	end := a + int64(len(b))
	items := v.p.items
	i := sort.Search(len(items), func(i int) bool { return items[i].end() > a })
	done := 0
	for ; i < len(items) && items[i].off < end; i++ {
		it := items[i]
		lo, hi := max(a, it.off), min(end, it.end())
		dst := b[lo-a : hi-a]
		var r io.ReaderAt
		var cnt *int64
		switch {
		case it.par >= 0 && v.p.par[it.par].Zero:
			clear(dst)
			done += len(dst)
			continue
		case it.par >= 0:
			r, cnt = v.parent, &v.parRead
		default:
			r, cnt = v.src, &v.srcRead
		}
		n, err := r.ReadAt(dst, lo)
		*cnt += int64(n)
		done += n
		if n < len(dst) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return done, fmt.Errorf("read %d bytes at %d: %w", len(dst), lo, err)
		}
	}
	if done < len(b) {
		return done, io.ErrUnexpectedEOF
	}
	return done, nil
}
