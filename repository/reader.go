package repository

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"
)

func (r *Repository) loadRoot(ctx context.Context, id ID) (diskRoot, error) {
	b, err := r.loadBlob(ctx, id, nil)
	if err != nil {
		return diskRoot{}, fmt.Errorf("disk map root %s: %w", id, err)
	}
	dr, err := decodeRoot(b)
	if err != nil {
		return dr, fmt.Errorf("disk map root %s: %w", id, err)
	}
	return dr, nil
}

func (r *Repository) loadSegment(ctx context.Context, ref segRef) (segment, error) {
	b, err := r.loadBlob(ctx, ref.ID, nil)
	if err != nil {
		return segment{}, fmt.Errorf("disk map segment %s: %w", ref.ID, err)
	}
	s, err := decodeSegment(b)
	if err != nil {
		return s, fmt.Errorf("disk map segment %s: %w", ref.ID, err)
	}
	last := s.Extents[len(s.Extents)-1]
	if s.Start != ref.Start || last.Offset+last.Length != ref.Start+ref.Length {
		return s, fmt.Errorf("disk map segment %s covers [%d,%d), root says [%d,%d): %w",
			ref.ID, s.Start, last.Offset+last.Length, ref.Start, ref.Start+ref.Length, ErrCorrupt)
	}
	return s, nil
}

func (r *Repository) pointDisk(ctx context.Context, pointID string, disk int) (Disk, error) {
	p, err := r.Point(ctx, pointID)
	if err != nil {
		return Disk{}, err
	}
	if disk < 0 || disk >= len(p.Disks) {
		return Disk{}, fmt.Errorf("restore point %s has %d disks, no disk %d: %w", p.ID, len(p.Disks), disk, ErrNotFound)
	}
	return p.Disks[disk], nil
}

// walkMap calls fn for every extent of a disk map, loading one segment at a time.
func (r *Repository) walkMap(ctx context.Context, root ID, fn func(Extent) error) (int64, error) {
	dr, err := r.loadRoot(ctx, root)
	if err != nil {
		return 0, err
	}
	for _, ref := range dr.Segs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		s, err := r.loadSegment(ctx, ref)
		if err != nil {
			return 0, err
		}
		for _, e := range s.Extents {
			if err := fn(e); err != nil {
				return 0, err
			}
		}
	}
	return dr.Size, nil
}

// DiskExtents returns the whole extent list of a disk (holes included).
func (r *Repository) DiskExtents(ctx context.Context, pointID string, disk int) (int64, []Extent, error) {
	if err := r.enter(); err != nil {
		return 0, nil, err
	}
	defer r.leave()
	d, err := r.pointDisk(ctx, pointID, disk)
	if err != nil {
		return 0, nil, err
	}
	var ext []Extent
	size, err := r.walkMap(ctx, d.Map, func(e Extent) error { ext = append(ext, e); return nil })
	return size, ext, err
}

// DiskReader reads a committed disk. It is safe for concurrent use.
type DiskReader struct {
	r     *Repository
	root  diskRoot
	cache *blobCache

	mu   sync.Mutex
	segs map[ID]*segment // small cache of decoded segments
	lru  []ID
}

// OpenDisk opens disk number disk (index into Point.Disks) of a restore point.
func (r *Repository) OpenDisk(ctx context.Context, pointID string, disk int) (*DiskReader, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	d, err := r.pointDisk(ctx, pointID, disk)
	if err != nil {
		return nil, err
	}
	dr, err := r.loadRoot(ctx, d.Map)
	if err != nil {
		return nil, err
	}
	return &DiskReader{r: r, root: dr, cache: newBlobCache(r.opts.CacheBytes), segs: map[ID]*segment{}}, nil
}

// Size returns the disk size in bytes.
func (d *DiskReader) Size() int64 { return d.root.Size }

// Close releases the reader's caches.
func (d *DiskReader) Close() error {
	d.cache.clear()
	d.mu.Lock()
	d.segs = nil
	d.mu.Unlock()
	return nil
}

const segCacheMax = 16

func (d *DiskReader) segmentAt(ctx context.Context, off int64) (*segment, error) {
	i := sort.Search(len(d.root.Segs), func(i int) bool { return d.root.Segs[i].Start > off }) - 1
	if i < 0 {
		return nil, fmt.Errorf("offset %d outside the disk map", off)
	}
	ref := d.root.Segs[i]
	d.mu.Lock()
	s := d.segs[ref.ID]
	d.mu.Unlock()
	if s != nil {
		return s, nil
	}
	seg, err := d.r.loadSegment(ctx, ref)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.segs == nil {
		return nil, fmt.Errorf("disk reader is closed")
	}
	if len(d.lru) >= segCacheMax {
		delete(d.segs, d.lru[0])
		d.lru = d.lru[1:]
	}
	d.segs[ref.ID] = &seg
	d.lru = append(d.lru, ref.ID)
	return &seg, nil
}

// Extents calls fn for every extent in disk order, loading segments lazily.
func (d *DiskReader) Extents(ctx context.Context, fn func(Extent) error) error {
	if err := d.r.enter(); err != nil {
		return err
	}
	defer d.r.leave()
	for _, ref := range d.root.Segs {
		s, err := d.r.loadSegment(ctx, ref)
		if err != nil {
			return err
		}
		for _, e := range s.Extents {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadAt reads the disk: zeros for holes, verified blob data otherwise.
func (d *DiskReader) ReadAt(p []byte, off int64) (int, error) {
	if err := d.r.enter(); err != nil {
		return 0, err
	}
	defer d.r.leave()
	ctx := context.Background()
	if off < 0 {
		return 0, fmt.Errorf("read at negative offset %d", off)
	}
	if off >= d.root.Size {
		return 0, io.EOF
	}
	want := len(p)
	if rem := d.root.Size - off; int64(len(p)) > rem {
		p = p[:rem]
	}
	n := 0
	for len(p) > 0 {
		s, err := d.segmentAt(ctx, off)
		if err != nil {
			return n, err
		}
		i := sort.Search(len(s.Extents), func(i int) bool { return s.Extents[i].Offset > off }) - 1
		for ; i < len(s.Extents) && len(p) > 0; i++ {
			e := s.Extents[i]
			in := off - e.Offset
			c := int(min(int64(len(p)), e.Length-in))
			if e.Zero {
				clear(p[:c])
			} else {
				data, err := d.blob(ctx, e.ID)
				if err != nil {
					return n, err
				}
				part, err := extentBytes(e, data)
				if err != nil {
					return n, &CorruptBlobError{Blob: e.ID, Err: err}
				}
				copy(p[:c], part[in:])
			}
			p, off, n = p[c:], off+int64(c), n+c
		}
	}
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

func (d *DiskReader) blob(ctx context.Context, id ID) ([]byte, error) {
	if b := d.cache.get(id); b != nil {
		return b, nil
	}
	b, err := d.r.loadBlob(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	d.cache.add(id, b)
	return b, nil
}

// extentBytes returns the bytes of a data extent inside its blob's
// plaintext: the whole blob, or [Skip, Skip+Length) for a slice.
func extentBytes(e Extent, data []byte) ([]byte, error) {
	if !e.Slice {
		if int64(len(data)) != e.Length {
			return nil, fmt.Errorf("blob is %d bytes, map says %d", len(data), e.Length)
		}
		return data, nil
	}
	if e.Skip < 0 || e.Skip+e.Length > int64(len(data)) {
		return nil, fmt.Errorf("blob is %d bytes, slice needs [%d,+%d)", len(data), e.Skip, e.Length)
	}
	return data[e.Skip : e.Skip+e.Length], nil
}

// streamJob is either a hole or a run of data extents (and holes of at
// most streamHoleInJob bytes) served by a few blobs, each fetched and
// decoded once (consecutive slices of one blob, and the X[a:b] N X[c:d]
// pattern an incremental leaves around a change, decode X once; a blob
// also used by one of the streamHandoffJobs jobs before is handed over by
// that job). The blobs lie in at most streamRegionMax pack regions, each
// read with one pread.
type streamJob struct {
	hole    int64 // > 0: a hole of this many bytes at diskAt
	diskAt  int64
	stored  int64 // stored bytes to read
	decoded int64 // plaintext bytes of the blobs
	raw     int64 // disk bytes of the extents
	ext     []Extent
	use     []int // ext[i] is served by blobs[use[i]]; -1: a hole
	blobs   []jobBlob
	regions []jobRegion

	// planning only
	index  map[ID]int   // blob id -> index in blobs
	recent []*streamJob // the data jobs before, newest first, for handoffs

	// ordered streaming only
	done chan struct{}
	out  [][]byte
	err  error
	bufs *streamBufs // Stream: the buffers out points into
}

type jobBlob struct {
	id     ID
	loc    blobLoc
	region int      // -1 when from is set
	from   *handoff // decoded by an earlier job, which hands it over
	to     *handoff // later jobs need it too: publish it
	// release: this job is the last to use from's buffer and gives it
	// back. Set and cleared only while the job is still being planned or
	// held back (a later job that takes the blob over clears it), so the
	// sink reads a settled value.
	release bool
}

// handoff passes a decoded blob from the job that decodes it to later
// jobs that use it too (a blob sliced on both sides of a job boundary is
// decoded once). The producer publishes a buffer it never reuses; the
// consumers only read it, and the last of them gives it back.
type handoff struct {
	done chan struct{}
	data []byte
	err  error
}

func (h *handoff) publish(data []byte, err error) {
	h.data, h.err = data, err
	close(h.done)
}

type jobRegion struct {
	pack        packID
	off, length int64
}

const (
	streamReadMax = 8 << 20   // stored bytes per job (regions, gaps included)
	streamRawMax  = 8 << 20   // decoded plaintext bytes per job, and disk bytes per job
	streamGapMax  = 256 << 10 // a blob this close to a region joins it (the gap is read too)

	// Holes up to this size stay inside a job (a zero write among the
	// slices of one blob does not cut the job there); StreamTo writes
	// them from zeroBuf, so at most len(zeroBuf).
	streamHoleInJob = 1 << 20

	// Planned jobs held back before they go to the workers: a blob a
	// later job also uses is handed over by any of these (they must not
	// have started when the later job asks). The slices of one parent
	// chunk and the pieces of one window lie within a few MiB of disk.
	streamHandoffJobs = 4
)

// testDecoded, when set (tests only), is called for every blob fetch decodes.
var testDecoded func(ID)

// Variables so that tests can shrink jobs and exercise handoffs.
var (
	// Extents per job. Jobs are bounded by bytes (above); this only bounds
	// the per-job lists. It was 256: a chain point of scattered 4 KiB
	// writes (~45 extents per MiB) then cut a job every ~5 MiB, each cut
	// through blobs both sides use, and each such blob was handed over.
	streamJobMax    = 4096
	streamRegionMax = 256 // pack regions per job (one pread each)
)

// add puts extent e (blob location l) into the job; false when the job is full.
func (j *streamJob) add(e Extent, l blobLoc) bool {
	if j.index == nil {
		j.index = map[ID]int{}
	}
	if e.Zero {
		if len(j.ext) > 0 && (len(j.ext) >= streamJobMax || j.raw+e.Length > streamRawMax) {
			return false
		}
		j.ext, j.use, j.raw = append(j.ext, e), append(j.use, -1), j.raw+e.Length
		return true
	}
	if len(j.ext) > 0 && j.raw+e.Length > streamRawMax {
		return false
	}
	if k, ok := j.index[e.ID]; ok {
		if len(j.ext) >= streamJobMax {
			return false
		}
		j.ext, j.use, j.raw = append(j.ext, e), append(j.use, k), j.raw+e.Length
		return true
	}
	if len(j.ext) > 0 && (len(j.ext) >= streamJobMax || j.decoded+int64(l.RawLen) > streamRawMax) {
		return false
	}
	// The newest held job that has the blob is its last user so far.
	for _, pj := range j.recent {
		if k, ok := pj.index[e.ID]; ok {
			pb := &pj.blobs[k]
			h := pb.from // pj received it too: the same producer serves this job
			if h == nil {
				if pb.to == nil {
					pb.to = &handoff{done: make(chan struct{})}
				}
				h = pb.to
			}
			pb.release = false // this job is the last user now
			// Its plaintext is in the producer's budget, not this job's.
			j.blobs = append(j.blobs, jobBlob{id: e.ID, loc: l, region: -1, from: h, release: true})
			j.index[e.ID] = len(j.blobs) - 1
			j.ext, j.use, j.raw = append(j.ext, e), append(j.use, len(j.blobs)-1), j.raw+e.Length
			return true
		}
	}
	// Join the region of the same pack that grows least (blobs of one
	// backup sit close together in its packs, not always adjacent: the
	// workers append in parallel).
	// A region within streamGapMax joins (one pread instead of two; the
	// gap is read too). Before, only a region the blob overlapped could
	// win (it had to grow by less than the blob's own length), so blobs
	// side by side in a pack were each read with a pread of their own.
	lo, hi := int64(l.Offset), int64(l.Offset)+int64(l.StoredLen)
	ri, grow := -1, int64(hi-lo)
	for k := len(j.regions) - 1; k >= 0; k-- {
		r := j.regions[k]
		if r.pack != l.Pack || lo > r.off+r.length+streamGapMax || hi < r.off-streamGapMax {
			continue
		}
		if g := max(hi, r.off+r.length) - min(lo, r.off) - r.length; ri < 0 || g < grow {
			ri, grow = k, g
		}
	}
	if len(j.ext) > 0 && (j.stored+grow > streamReadMax || (ri < 0 && len(j.regions) >= streamRegionMax)) {
		return false
	}
	if ri < 0 {
		j.regions = append(j.regions, jobRegion{pack: l.Pack, off: lo})
		ri = len(j.regions) - 1
	}
	r := &j.regions[ri]
	end := max(hi, r.off+r.length)
	r.off = min(lo, r.off)
	r.length = end - r.off
	j.stored += grow
	j.blobs = append(j.blobs, jobBlob{id: e.ID, loc: l, region: ri})
	j.index[e.ID] = len(j.blobs) - 1
	j.decoded += int64(l.RawLen)
	j.ext, j.use, j.raw = append(j.ext, e), append(j.use, len(j.blobs)-1), j.raw+e.Length
	return true
}

// planJobs walks the map in disk order, emitting holes and jobs of data
// extents. One segment is in memory at a time.
func (d *DiskReader) planJobs(ctx context.Context, emit func(*streamJob) error) error {
	r := d.r
	// Planned jobs wait in queue until streamHandoffJobs data jobs follow
	// them: until then a later job may still ask one to hand over a blob.
	var queue []*streamJob
	var cur *streamJob
	data := 0
	pop := func() error {
		j := queue[0]
		queue = queue[1:]
		if j.hole == 0 {
			data--
		}
		j.recent, j.index = nil, nil
		return emit(j)
	}
	push := func(j *streamJob) error {
		queue = append(queue, j)
		if j.hole == 0 {
			data++
		}
		for data > streamHandoffJobs || (len(queue) > 0 && queue[0].hole > 0) {
			if err := pop(); err != nil {
				return err
			}
		}
		return nil
	}
	recent := func() []*streamJob {
		var out []*streamJob
		for i := len(queue) - 1; i >= 0; i-- {
			if queue[i].hole == 0 {
				out = append(out, queue[i])
			}
		}
		return out
	}
	for _, ref := range d.root.Segs {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := r.loadSegment(ctx, ref)
		if err != nil {
			return err
		}
		locs := make([]blobLoc, len(s.Extents))
		seen := make(map[ID]blobLoc)
		var missing *Extent
		if err := r.db.View(func(tx *bolt.Tx) error {
			for i, e := range s.Extents {
				if e.Zero {
					continue
				}
				// A chain point names each blob many times in a row (the
				// slices around scattered changes): look it up once.
				if l, ok := seen[e.ID]; ok {
					locs[i] = l
					continue
				}
				l, ok := lookupTx(tx, e.ID)
				if !ok {
					missing = &s.Extents[i]
					return nil
				}
				locs[i] = l
				seen[e.ID] = l
			}
			return nil
		}); err != nil {
			return err
		}
		if missing != nil {
			return &CorruptBlobError{Blob: missing.ID, Pack: "(not indexed)", Err: fmt.Errorf("blob at disk offset %d: %w", missing.Offset, ErrNotFound)}
		}
		for i, e := range s.Extents {
			if e.Zero && e.Length > streamHoleInJob {
				if cur != nil {
					if err := push(cur); err != nil {
						return err
					}
					cur = nil
				}
				if err := push(&streamJob{hole: e.Length, diskAt: e.Offset}); err != nil {
					return err
				}
				continue
			}
			if cur != nil && cur.add(e, locs[i]) {
				continue
			}
			if cur != nil {
				if err := push(cur); err != nil {
					return err
				}
			}
			cur = &streamJob{diskAt: e.Offset, recent: recent()}
			cur.add(e, locs[i])
		}
	}
	if cur != nil {
		queue = append(queue, cur)
	}
	for len(queue) > 0 {
		if err := pop(); err != nil {
			return err
		}
	}
	return nil
}

// fetch reads a job's pack regions once each, decodes (verifies) every
// blob once, and calls use for each extent's bytes in order. The regions
// are read back to back into *buf. *arena is a reusable plaintext buffer
// (nil: allocate, because use keeps the bytes). With arena set the caller
// also keeps *buf untouched until it is done with the bytes: a blob stored
// uncompressed is then served from *buf where it was decrypted, not copied.
func (d *DiskReader) fetch(ctx context.Context, j *streamJob, buf, arena *[]byte, use func(i int, b []byte) error) (err error) {
	r := d.r
	plain := make([][]byte, len(j.blobs))
	if arena != nil {
		// The arena holds compressed blobs' plaintext; the others are
		// views of *buf or handed over in buffers of their own.
		var need int64
		for _, bl := range j.blobs {
			if bl.from == nil && bl.to == nil && bl.loc.Flags&flagZstd != 0 {
				need += int64(bl.loc.RawLen)
			}
		}
		if int64(cap(*arena)) < need {
			*arena = make([]byte, max(need, min(streamRawMax, 2*int64(cap(*arena)))))
		}
	}
	used := 0 // bytes of *arena given to this job's blobs
	// A blob handed to the next job gets its own buffer, and the next job
	// always learns how this one ended.
	defer func() {
		for _, bl := range j.blobs {
			if bl.to != nil {
				select {
				case <-bl.to.done:
				default:
					bl.to.publish(nil, fmt.Errorf("the job that decodes blob %s failed: %w", bl.id, errOr(err)))
				}
			}
		}
	}()
	// dst is where blob k's plaintext goes: the next bytes of the arena
	// (one buffer per set, carved blob after blob: j.decoded bounds the
	// sum), so no job reallocates for blobs larger than the last one's.
	dst := func(k int) []byte {
		if arena == nil {
			return nil
		}
		n := int(j.blobs[k].loc.RawLen)
		if j.blobs[k].to != nil {
			// Outlives this job's buffer set: a pooled buffer the last job
			// that uses it gives back (releaseHandoffs).
			return getHandoffBuf(n)
		}
		if used+n > len(*arena) {
			return nil
		}
		b := (*arena)[used : used : used+n]
		used += n
		return b
	}
	keep := func(k int, b []byte) {
		plain[k] = b
		if bl := j.blobs[k]; bl.to != nil {
			bl.to.publish(b, nil)
		}
	}
	var total int64
	for _, rg := range j.regions {
		total += rg.length
	}
	if int64(cap(*buf)) < total {
		*buf = make([]byte, max(total, min(streamReadMax, 2*int64(cap(*buf)))))
	}
	all := (*buf)[:total]
	for ri, rg := range j.regions {
		b := all[:rg.length:rg.length]
		all = all[rg.length:]
		rerr := r.readPackAt(rg.pack, b, rg.off)
		for k, bl := range j.blobs {
			if bl.region != ri {
				continue
			}
			if rerr != nil {
				// Possibly moved by a concurrent reclaim: load by id.
				data, err := r.loadBlob(ctx, bl.id, dst(k))
				if err != nil {
					return err
				}
				if testDecoded != nil {
					testDecoded(bl.id)
				}
				keep(k, data)
				continue
			}
			start := int64(bl.loc.Offset) - rg.off
			stored := b[start : start+int64(bl.loc.StoredLen)]
			var data []byte
			view := arena != nil && bl.to == nil && bl.loc.Flags&flagZstd == 0
			if view {
				data, err = r.codec.decodeView(nil, bl.loc.entry(bl.id), stored)
			} else {
				data, err = r.codec.decode(dst(k), bl.loc.entry(bl.id), stored)
			}
			if err != nil {
				return &CorruptBlobError{Blob: bl.id, Pack: rg.pack.String(), Err: err}
			}
			if testDecoded != nil {
				testDecoded(bl.id)
			}
			keep(k, data)
		}
	}
	// Blobs an earlier job decodes, waited for only now: this job's own
	// reads and decodes run meanwhile (waiting first made the jobs of a
	// chain point, nearly all of which share a blob with the one before,
	// run one after the other).
	for k, bl := range j.blobs {
		if bl.from == nil {
			continue
		}
		select {
		case <-bl.from.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if bl.from.err != nil {
			return bl.from.err
		}
		plain[k] = bl.from.data
	}
	for i, e := range j.ext {
		if j.use[i] < 0 {
			if err := use(i, nil); err != nil {
				return err
			}
			continue
		}
		part, err := extentBytes(e, plain[j.use[i]])
		if err != nil {
			return &CorruptBlobError{Blob: e.ID, Pack: j.blobs[j.use[i]].loc.Pack.String(), Err: err}
		}
		if err := use(i, part); err != nil {
			return err
		}
	}
	return nil
}

// decodeView is decode for a caller that may receive a view of stored: a
// blob stored uncompressed is decrypted in place and returned as a slice
// of stored, saving a copy of every incompressible byte. Compressed blobs
// are decoded into dst as by decode.
func (c *codec) decodeView(dst []byte, e packEntry, stored []byte) ([]byte, error) {
	if e.Flags&flagZstd != 0 {
		return c.decode(dst, e, stored)
	}
	if len(stored) != int(e.StoredLen) {
		return nil, fmt.Errorf("short read: %d of %d bytes", len(stored), e.StoredLen)
	}
	out := stored
	if c.encrypted {
		if len(stored) < blobSealOverhead {
			return nil, errors.New("sealed blob too short")
		}
		var err error
		out, err = c.aead.Open(stored[gcmNonceSize:gcmNonceSize], stored[:gcmNonceSize], stored[gcmNonceSize:], blobAD(e.ID, e.Type))
		if err != nil {
			return nil, fmt.Errorf("authentication failed: %w", err)
		}
	}
	if len(out) != int(e.RawLen) {
		return nil, fmt.Errorf("plaintext is %d bytes, header says %d", len(out), e.RawLen)
	}
	if got := c.id(out); got != e.ID {
		return nil, fmt.Errorf("content hash %s does not match id", got)
	}
	return out, nil
}

func errOr(err error) error {
	if err == nil {
		return errors.New("it ended without decoding it")
	}
	return err
}

// Stream writes the whole disk to w: parallel workers fetch jobs ahead
// (each reads its pack regions with one pread apiece and verifies every
// blob) into a bounded set of buffers, and one writer writes them in disk
// order, so the output grows sequentially in large writes and no two
// writes contend for the file. Holes are left unwritten, so a fresh
// (truncated) file stays sparse. progress (may be nil) receives the number
// of disk bytes done.
func (d *DiskReader) Stream(ctx context.Context, w io.WriterAt, progress func(done int64)) error {
	if err := d.r.enter(); err != nil {
		return err
	}
	defer d.r.leave()
	sw := seqWriter{w: w}
	var done int64
	err := d.ordered(ctx, func(j *streamJob) error {
		if j.hole > 0 {
			done += j.hole
		} else {
			for i, b := range j.out {
				if j.use[i] < 0 {
					continue // a hole inside the job: left unwritten
				}
				if err := sw.write(b, j.ext[i].Offset); err != nil {
					return err
				}
			}
			done += j.raw
		}
		if progress != nil {
			progress(done)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return sw.flush()
}

// ordered runs the restore pipeline: the planner, GOMAXPROCS workers that
// fetch jobs ahead into a fixed set of reusable buffers, and sink, called
// in disk order for every hole and data job (j.out holds a data job's
// extent bytes, valid until sink returns).
// remoteReadWorkers is the restore workers of a remote repository.
const remoteReadWorkers = 4

func (d *DiskReader) ordered(ctx context.Context, sink func(j *streamJob) error) error {
	workers := defaultWorkers()
	if d.r.storeDir() == "" {
		// A remote read waits on the network and the server, not on our
		// cores: more ranges in flight keep the pipe full (each worker
		// holds one buffer set, so this bounds the memory too).
		workers = max(workers, remoteReadWorkers)
	}
	// Buffer sets bound the bytes in flight: each holds one job's stored
	// regions (streamReadMax) and compressed blobs' plaintext
	// (streamRawMax); two beyond the workers keep them busy while the
	// sink drains.
	sets := workers + 2
	free := make(chan *streamBufs, sets)
	for range sets {
		free <- &streamBufs{}
	}
	g, ctx := errgroup.WithContext(ctx)
	work := make(chan *streamJob, sets)
	order := make(chan *streamJob, sets*4)
	g.Go(func() error {
		defer close(work)
		defer close(order)
		return d.planJobs(ctx, func(j *streamJob) error {
			if j.hole == 0 {
				j.done = make(chan struct{})
				select {
				case work <- j:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			select {
			case order <- j:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	})
	for range workers {
		g.Go(func() error {
			for {
				// A set first, then a job: jobs leave work in disk order, so
				// the job the sink waits for always finds a set.
				var bb *streamBufs
				select {
				case bb = <-free:
				case <-ctx.Done():
					return ctx.Err()
				}
				j, ok := <-work
				if !ok {
					return nil
				}
				j.bufs = bb
				j.out = slices.Grow(bb.out[:0], len(j.ext))[:len(j.ext)]
				j.err = d.fetch(ctx, j, &bb.stored, &bb.plain, func(i int, b []byte) error {
					j.out[i] = b
					return nil
				})
				close(j.done)
				if j.err != nil {
					return j.err
				}
			}
		})
	}
	g.Go(func() error {
		for j := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			if j.hole == 0 {
				select {
				case <-j.done:
				case <-ctx.Done():
					return ctx.Err()
				}
				if j.err != nil {
					return j.err
				}
			}
			if err := sink(j); err != nil {
				return err
			}
			releaseHandoffs(j)
			if bb := j.bufs; bb != nil {
				clear(j.out)
				bb.out, j.out, j.bufs = j.out, nil, nil
				free <- bb // never blocks: the channel holds every set
			}
		}
		return nil
	})
	return g.Wait()
}

// handoffBufs recycles the plaintext buffers of blobs handed from one job
// to the next: a chain point hands over a blob at almost every job
// boundary, and a fresh 1 MiB buffer each time was garbage to collect and
// fresh pages to fault in.
var handoffBufs sync.Pool // *[]byte

func getHandoffBuf(n int) []byte {
	if p, ok := handoffBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// releaseHandoffs gives back, once the sink is done with job j, the
// buffers of blobs j was the last to use (sinks run in disk order, so the
// producer and the other users are done with them).
func releaseHandoffs(j *streamJob) {
	for _, bl := range j.blobs {
		if bl.release && bl.from.err == nil && cap(bl.from.data) > 0 {
			b := bl.from.data[:0]
			bl.from.data = nil
			handoffBufs.Put(&b)
		}
	}
}

// streamBufs is one job's buffers in ordered, reused from job to job.
type streamBufs struct {
	stored []byte   // the job's pack regions, back to back
	plain  []byte   // plaintext of compressed blobs, carved blob after blob
	out    [][]byte // the extents' bytes, views of the two above
}

// Writes this large go straight from a job's buffers; smaller adjacent
// extents (the slices and pieces of incrementals) are gathered first, in
// a buffer small enough to stay in the core's cache between the copy and
// the kernel's read of it. Measured on the 4 GiB chain point (labelled
// profile, three restores): the writer's CPU was 1.31-1.64 s with a
// 4 MiB buffer (the same with pwritev of the uncopied extents), 1.21-1.26
// s with 256 KiB, the full point's 1.07-1.22 s.
const (
	seqDirectMin = 256 << 10
	seqGatherMax = 256 << 10
)

// seqWriter writes extents in disk order, gathering runs of small
// adjacent ones into one write.
type seqWriter struct {
	w   io.WriterAt
	at  int64 // disk offset of buf[0]
	buf []byte
}

func (s *seqWriter) write(b []byte, off int64) error {
	if len(s.buf) > 0 && (len(b) >= seqDirectMin || off != s.at+int64(len(s.buf)) || len(s.buf)+len(b) > seqGatherMax) {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if len(s.buf) == 0 && len(b) >= seqDirectMin {
		if _, err := s.w.WriteAt(b, off); err != nil {
			return fmt.Errorf("write at %d: %w", off, err)
		}
		return nil
	}
	if len(s.buf) == 0 {
		if s.buf == nil {
			s.buf = make([]byte, 0, seqGatherMax)
		}
		s.at = off
	}
	s.buf = append(s.buf, b...)
	return nil
}

func (s *seqWriter) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.w.WriteAt(s.buf, s.at)
	s.buf = s.buf[:0]
	if err != nil {
		return fmt.Errorf("write at %d: %w", s.at, err)
	}
	return nil
}

// WriteTo streams the whole disk to w in order (holes as zeros). It
// implements io.WriterTo for sequential sinks (an upload stream).
func (d *DiskReader) WriteTo(w io.Writer) (int64, error) {
	return d.StreamTo(context.Background(), w, nil)
}

var zeroBuf = make([]byte, 1<<20)

// StreamTo writes the whole disk to w in disk order, holes as zeros, with
// the bounded window of Stream's workers fetching and verifying ahead.
func (d *DiskReader) StreamTo(ctx context.Context, w io.Writer, progress func(done int64)) (int64, error) {
	if err := d.r.enter(); err != nil {
		return 0, err
	}
	defer d.r.leave()
	ow := &orderWriter{w: w}
	sw := seqWriter{w: ow}
	err := d.ordered(ctx, func(j *streamJob) error {
		if j.hole > 0 {
			if err := sw.flush(); err != nil {
				return err
			}
			for n := j.hole; n > 0; {
				c := min(n, int64(len(zeroBuf)))
				if _, err := ow.WriteAt(zeroBuf[:c], ow.n); err != nil {
					return err
				}
				n -= c
			}
		} else {
			for i, b := range j.out {
				if j.use[i] < 0 {
					b = zeroBuf[:j.ext[i].Length] // a hole inside the job
				}
				if err := sw.write(b, j.ext[i].Offset); err != nil {
					return err
				}
			}
		}
		if progress != nil {
			progress(ow.n + int64(len(sw.buf)))
		}
		return nil
	})
	if err == nil {
		err = sw.flush()
	}
	return ow.n, err
}

// orderWriter turns the in-order WriteAt calls of StreamTo into Writes.
type orderWriter struct {
	w io.Writer
	n int64 // bytes written
}

func (o *orderWriter) WriteAt(p []byte, off int64) (int, error) {
	if off != o.n {
		return 0, fmt.Errorf("stream write at %d, %d bytes written: out of order", off, o.n)
	}
	n, err := o.w.Write(p)
	o.n += int64(n)
	return n, err
}

// blobCache is a byte-bounded LRU of verified plaintext blobs.
type blobCache struct {
	mu    sync.Mutex
	max   int
	size  int
	ll    *list.List
	items map[ID]*list.Element
}

type cacheItem struct {
	id   ID
	data []byte
}

func newBlobCache(max int) *blobCache {
	return &blobCache{max: max, ll: list.New(), items: map[ID]*list.Element{}}
}

func (c *blobCache) get(id ID) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[id]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheItem).data
	}
	return nil
}

func (c *blobCache) add(id ID, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[id]; ok || len(data) > c.max {
		return
	}
	c.items[id] = c.ll.PushFront(&cacheItem{id: id, data: data})
	c.size += len(data)
	for c.size > c.max {
		e := c.ll.Back()
		it := e.Value.(*cacheItem)
		c.ll.Remove(e)
		delete(c.items, it.id)
		c.size -= len(it.data)
	}
}

func (c *blobCache) clear() {
	c.mu.Lock()
	c.ll.Init()
	c.items = map[ID]*list.Element{}
	c.size = 0
	c.mu.Unlock()
}

// BlobSizes returns the plaintext length of each blob (0 for an id that is
// not indexed), from the catalog in one read transaction. Incremental
// planning uses it to tell how much of a blob a slice-built map still uses.
func (r *Repository) BlobSizes(ctx context.Context, ids []ID) ([]int64, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	out := make([]int64, len(ids))
	err := r.db.View(func(tx *bolt.Tx) error {
		for i, id := range ids {
			if i%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if l, ok := lookupTx(tx, id); ok {
				out[i] = int64(l.RawLen)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob sizes: %w", err)
	}
	return out, nil
}
