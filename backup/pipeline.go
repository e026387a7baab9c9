package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
)

// ChunkStore is what the disk pipeline needs from the repository: a
// goroutine-safe, deduplicating chunk writer (repository.Session).
type ChunkStore interface {
	PutChunk(ctx context.Context, data []byte) (id repository.ID, added bool, stored int, err error)
}

// ParentDisk describes the same disk in the parent restore point, for an
// incremental backup.
type ParentDisk struct {
	// Reader serves the parent disk's bytes (the repository's disk reader).
	// The slice method reads it only in the windows it compacts; Rechunk
	// reads the parent chunks around each change (prefetched in parallel).
	Reader io.ReaderAt
	// Extents is the parent's disk map, as repository.DiskExtents returns it.
	Extents []repository.Extent
	// Changed lists the byte ranges that changed since the parent (CBT).
	Changed []dedup.Extent
	// Method forces dedup.MethodRechunk or dedup.MethodSlices; empty applies
	// the cost rule (dedup.ChooseIncremental).
	Method dedup.Method
	// Options tune the slice method (zero: dedup's defaults).
	Options dedup.IncrementalOptions
}

// blobSizer is implemented by stores that can tell blob lengths
// (repository.Session): the slice method's use rule needs the length of
// blobs the parent map only slices.
type blobSizer interface {
	BlobSizes(ctx context.Context, ids []repository.ID) ([]int64, error)
}

var errNoBlobSizes = errors.New("store cannot tell blob sizes")

// mapExtents converts the parent's map for the slice planner: blobs are
// numbered, and each gets its length (from the store for sliced blobs;
// otherwise the largest end any extent of the map reaches, a lower bound).
func mapExtents(ctx context.Context, store ChunkStore, exts []repository.Extent) ([]dedup.MapExtent, error) {
	num := map[repository.ID]int{}
	var lens []int64
	var sliced []repository.ID
	out := make([]dedup.MapExtent, len(exts))
	for i, e := range exts {
		out[i] = dedup.MapExtent{Offset: e.Offset, Length: e.Length, Zero: e.Zero, Skip: e.Skip}
		if e.Zero {
			continue
		}
		n, ok := num[e.ID]
		if !ok {
			n = len(lens)
			num[e.ID] = n
			lens = append(lens, 0)
		}
		out[i].Blob = n
		lens[n] = max(lens[n], e.Skip+e.Length)
		if e.Slice && !ok {
			sliced = append(sliced, e.ID)
		}
	}
	if bs, ok := store.(blobSizer); ok && len(sliced) > 0 {
		sizes, err := bs.BlobSizes(ctx, sliced)
		if err != nil && !errors.Is(err, errNoBlobSizes) {
			return nil, fmt.Errorf("parent blob sizes: %w", err)
		}
		for i, sz := range sizes {
			if n := num[sliced[i]]; sz > lens[n] {
				lens[n] = sz
			}
		}
	}
	for i := range out {
		if !out[i].Zero {
			out[i].BlobLen = lens[out[i].Blob]
		}
	}
	return out, nil
}

// DiskInput is one disk to back up.
type DiskInput struct {
	Source io.ReaderAt
	Size   int64
	// Allocated lists the extents that may hold data (nil: the whole disk).
	// Everything else is known zero and is never read. Ignored when Parent is
	// set: then only Parent.Changed is read from Source.
	Allocated []dedup.Extent
	Parent    *ParentDisk
}

// Options bound the pipeline's concurrency and memory.
type Options struct {
	// Workers hash, compress and seal chunks in parallel (default GOMAXPROCS).
	Workers int
	// InFlight bounds the chunks queued between the chunker and the workers
	// (default 2*Workers). Peak chunk memory is about
	// (InFlight+Workers) * average chunk size, plus the chunker's read-ahead.
	InFlight int
	// Progress, when set, is called from one goroutine at most every
	// ProgressEvery (default 500 ms) and once at the end.
	Progress      func(Progress)
	ProgressEvery time.Duration
}

// Progress is a snapshot of one disk's backup.
type Progress struct {
	Size      int64         // logical disk size
	Done      int64         // logical bytes behind the last finished chunk, in disk order
	BytesRead int64         // bytes read from the source
	NewBytes  int64         // bytes of chunks the repository did not have
	Stored    int64         // bytes added on disk (compressed, sealed)
	Elapsed   time.Duration // since the disk started
}

// Rate returns the logical throughput in bytes per second.
func (p Progress) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Done) / p.Elapsed.Seconds()
}

// ETA estimates the time left from the logical rate so far.
func (p Progress) ETA() time.Duration {
	r := p.Rate()
	if r <= 0 || p.Done >= p.Size {
		return 0
	}
	return time.Duration(float64(p.Size-p.Done) / r * float64(time.Second))
}

// DiskResult is what a disk backup produced.
type DiskResult struct {
	Extents         []repository.Extent
	Chunks          int
	BytesRead       int64 // from the source (equals the changed bytes for an incremental)
	ParentBytesRead int64 // from the parent restore point (incremental only)
	NewBytes        int64 // plaintext bytes the repository did not have
	StoredBytes     int64 // on-disk bytes added
	ZeroBytes       int64 // bytes recognised as zero and stored as holes
	ReusedBytes     int64 // bytes taken over from the parent without reading
	Duration        time.Duration
	// Incremental only: the method used and the cost rule's estimate.
	Method   dedup.Method
	Estimate dedup.Estimate
	// Slice method only: what the planner did.
	Slices dedup.IncrementalStats
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

type job struct {
	seq   int
	chunk dedup.Chunk
	res   result
}

type result struct {
	ext    repository.Extent
	added  bool
	stored int
	n      int // Group chunks: the blob's length
}

// group is the blob of the last dedup Group chunk the collector passed: the
// InGroup chunks after it are slices of it.
type group struct {
	id  repository.ID
	n   int64
	set bool
}

// WriteDisk streams one disk through the chunker into the store and returns
// its disk map, ready for repository.Session.PutDisk. It reads the source
// once, in offset order; hashing, compression and sealing run in
// opts.Workers goroutines; at most opts.InFlight chunks wait between the two.
// Cancelling ctx stops every goroutine before WriteDisk returns.
func WriteDisk(ctx context.Context, store ChunkStore, chunker dedup.Chunker, in DiskInput, opts Options) (*DiskResult, error) {
	if in.Size < 0 {
		return nil, fmt.Errorf("disk size %d is negative", in.Size)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	inFlight := opts.InFlight
	if inFlight <= 0 {
		inFlight = 2 * workers
	}
	every := opts.ProgressEvery
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	start := time.Now()
	src := &countingReaderAt{r: in.Source}
	res := &DiskResult{}
	var parent *countingReaderAt
	var parentMap []dedup.MapExtent
	if in.Parent != nil {
		parent = &countingReaderAt{r: in.Parent.Reader}
		var err error
		if parentMap, err = mapExtents(ctx, store, in.Parent.Extents); err != nil {
			return nil, err
		}
		est, err := dedup.ChooseIncremental(chunker, in.Size, parentMap, in.Parent.Changed, in.Parent.Options)
		if err != nil {
			return nil, err
		}
		res.Estimate, res.Method = est, est.Method
		switch in.Parent.Method {
		case "":
		case dedup.MethodSlices:
			res.Method = dedup.MethodSlices
		case dedup.MethodRechunk:
			if est.RechunkBytes < 0 {
				return nil, fmt.Errorf("%w: the parent map is not a plain CDC map of this chunker: Rechunk cannot run", dedup.ErrParentMismatch)
			}
			res.Method = dedup.MethodRechunk
		default:
			return nil, fmt.Errorf("unknown incremental method %q", in.Parent.Method)
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	jobs := make(chan job, inFlight)
	done := make(chan job, inFlight)

	// The chunker: one goroutine, sequential by nature.
	g.Go(func() error {
		defer close(jobs)
		seq := 0
		emit := func(c dedup.Chunk) error {
			select {
			case jobs <- job{seq: seq, chunk: c}:
				seq++
				return nil
			case <-gctx.Done():
				dedup.ReleaseBuffer(c.Data)
				return gctx.Err()
			}
		}
		switch {
		case in.Parent != nil && res.Method == dedup.MethodSlices:
			st, err := dedup.Incremental(gctx, chunker, src, parent, in.Size, parentMap, in.Parent.Changed, in.Parent.Options, emit)
			res.Slices = st
			return err
		case in.Parent != nil:
			// Rechunk reads the parent chunks around each change one at a
			// time: fetch them ahead, in parallel, into a bounded window.
			pf := newPrefetchReaderWith(gctx, parent, rechunkParentPlan(parentMap, in.Parent.Changed), parentPrefetch)
			defer pf.Close()
			return chunker.Rechunk(gctx, src, pf, in.Size, dedup.ParentChunks(parentMap), in.Parent.Changed, emit)
		}
		return chunker.Split(gctx, src, in.Size, in.Allocated, emit)
	})

	// Workers: hash, compress, seal, append to a pack.
	var wg sync.WaitGroup
	var workerErr error
	var workerErrOnce sync.Once
	wg.Add(workers)
	for range workers {
		g.Go(func() error {
			defer wg.Done()
			for j := range jobs {
				if err := process(gctx, store, in, &j); err != nil {
					workerErrOnce.Do(func() { workerErr = err })
					// Drain so the chunker never blocks on a full queue.
					for j := range jobs {
						dedup.ReleaseBuffer(j.chunk.Data)
					}
					return err
				}
				select {
				case done <- j:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		wg.Wait()
		close(done)
		return nil
	})

	// The collector puts results back in disk order. Out-of-order results wait
	// in pending, which holds at most InFlight+Workers small entries.
	var extents []repository.Extent
	var grp group
	pending := map[int]job{}
	next := 0
	lastReport := time.Now()
	report := func(force bool) {
		if opts.Progress == nil || (!force && time.Since(lastReport) < every) {
			return
		}
		lastReport = time.Now()
		var doneOff int64
		if n := len(extents); n > 0 {
			doneOff = extents[n-1].Offset + extents[n-1].Length
		}
		opts.Progress(Progress{Size: in.Size, Done: doneOff, BytesRead: src.n.Load(),
			NewBytes: res.NewBytes, Stored: res.StoredBytes, Elapsed: time.Since(start)})
	}
	g.Go(func() error {
		for j := range done {
			pending[j.seq] = j
			for {
				p, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				c := p.chunk
				if c.Group {
					// Stored, but no extent yet: its pieces follow as slices.
					grp = group{id: p.res.ext.ID, n: int64(p.res.n), set: true}
					if p.res.added {
						res.NewBytes += int64(p.res.n)
					}
					res.StoredBytes += int64(p.res.stored)
					continue
				}
				if c.InGroup {
					if !grp.set || c.Skip < 0 || c.Skip+int64(c.Length) > grp.n {
						return fmt.Errorf("chunker put %d+%d at %d of a group blob of %d bytes (internal error)", c.Skip, c.Length, c.Offset, grp.n)
					}
					p.res.ext.ID = grp.id
				}
				extents = appendExtent(extents, p.res)
				res.Chunks++
				switch {
				case c.InGroup:
				case c.Zero:
					res.ZeroBytes += int64(c.Length)
				case c.Parent >= 0:
					res.ReusedBytes += int64(c.Length)
				default:
					if p.res.added {
						res.NewBytes += int64(c.Length)
					}
					res.StoredBytes += int64(p.res.stored)
				}
			}
			report(false)
		}
		return nil
	})

	if err := g.Wait(); err != nil {
		if workerErr != nil && !errors.Is(workerErr, context.Canceled) {
			return nil, workerErr
		}
		return nil, err
	}
	if len(pending) != 0 {
		return nil, fmt.Errorf("disk pipeline lost %d chunks (internal error)", len(pending))
	}
	if err := checkCoverage(extents, in.Size); err != nil {
		return nil, err
	}
	res.Extents = extents
	res.BytesRead = src.n.Load()
	if parent != nil {
		res.ParentBytesRead = parent.n.Load()
	}
	res.Duration = time.Since(start)
	report(true)
	return res, nil
}

// process turns one chunk into a map extent; data chunks go to the store.
func process(ctx context.Context, store ChunkStore, in DiskInput, j *job) error {
	c := j.chunk
	ext := repository.Extent{Offset: c.Offset, Length: int64(c.Length)}
	switch {
	case c.Zero:
		ext.Zero = true
		dedup.ReleaseBuffer(c.Data)
	case c.InGroup:
		// A slice of the last Group chunk's blob: the collector, which sees
		// chunks in order, fills in the blob id.
		if c.Data != nil {
			return fmt.Errorf("chunk at %d: grouped chunk with its own data (internal error)", c.Offset)
		}
		ext.Skip, ext.Slice = c.Skip, true
	case c.Parent >= 0:
		if in.Parent == nil || c.Parent >= len(in.Parent.Extents) {
			return fmt.Errorf("chunker reused parent chunk %d that does not exist", c.Parent)
		}
		// The chunk is the parent extent's bytes at the same disk offsets:
		// all of them (Rechunk) or a part (slice method).
		pe := in.Parent.Extents[c.Parent]
		if c.Offset < pe.Offset || c.Offset+int64(c.Length) > pe.Offset+pe.Length || pe.Zero {
			return fmt.Errorf("chunker reused parent chunk %d at %d+%d, parent has %d+%d", c.Parent, c.Offset, c.Length, pe.Offset, pe.Length)
		}
		ext.ID = pe.ID
		ext.Skip = pe.Skip + (c.Offset - pe.Offset)
		ext.Slice = pe.Slice || c.Offset != pe.Offset || int64(c.Length) != pe.Length
	case c.Group:
		id, added, stored, err := store.PutChunk(ctx, c.Data)
		n := len(c.Data)
		dedup.ReleaseBuffer(c.Data)
		if err != nil {
			return fmt.Errorf("store the changed pieces from offset %d: %w", c.Offset, err)
		}
		ext.ID = id
		j.res = result{added: added, stored: stored, n: n}
	default:
		if len(c.Data) != c.Length {
			return fmt.Errorf("chunk at %d: %d bytes of data for length %d", c.Offset, len(c.Data), c.Length)
		}
		id, added, stored, err := store.PutChunk(ctx, c.Data)
		dedup.ReleaseBuffer(c.Data)
		if err != nil {
			return fmt.Errorf("store chunk at offset %d: %w", c.Offset, err)
		}
		ext.ID = id
		j.res = result{added: added, stored: stored}
	}
	j.chunk.Data = nil
	j.res.ext = ext
	return nil
}

// appendExtent appends e, merging it into the previous extent when both are
// holes (the repository stores zero runs as one hole) or consecutive bytes
// of one blob (two slices that a compacted run separated only in the plan).
func appendExtent(exts []repository.Extent, r result) []repository.Extent {
	e := r.ext
	if n := len(exts); n > 0 && exts[n-1].Offset+exts[n-1].Length == e.Offset {
		p := &exts[n-1]
		switch {
		case e.Zero && p.Zero:
			p.Length += e.Length
			return exts
		case !e.Zero && !p.Zero && p.ID == e.ID && p.Skip+p.Length == e.Skip && p.Length+e.Length <= repository.MaxBlobSize:
			p.Length += e.Length
			return exts
		}
	}
	return append(exts, e)
}

// checkCoverage verifies that the map covers [0, size) without gap or
// overlap: a chunker bug must never become a silently wrong restore point.
func checkCoverage(exts []repository.Extent, size int64) error {
	var off int64
	for i, e := range exts {
		if e.Offset != off || e.Length <= 0 {
			return fmt.Errorf("disk map extent %d at %d+%d does not follow offset %d (internal error)", i, e.Offset, e.Length, off)
		}
		off += e.Length
	}
	if off != size {
		return fmt.Errorf("disk map covers %d bytes of a %d-byte disk (internal error)", off, size)
	}
	return nil
}
