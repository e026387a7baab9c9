package backup

import (
	"context"
	"io"
	"sort"
	"sync"

	"github.com/vmvault/vmvault/dedup"
)

// Prefetch limits: small extents are grouped into batches of at most
// prefetchBatchBytes / prefetchBatchExtents; prefetchParallel batches are
// fetched at once and at most prefetchWindow batches are held (about
// prefetchWindow*prefetchBatchBytes of memory per disk).
const (
	prefetchSmall        = 1 << 20 // larger extents are read directly (the disk reader parallelises them itself)
	prefetchBatchBytes   = 512 << 10
	prefetchBatchExtents = 8
	prefetchParallel     = 8
	prefetchWindow       = 16
)

// prefetchConfig bounds one prefetch reader: extents above small bytes are
// not prefetched; a batch holds at most batchBytes/batchExtents; parallel
// batches are fetched at once; at most window batches are held.
type prefetchConfig struct {
	small, batchBytes      int64
	batchExtents, parallel int
	window                 int
}

// sourcePrefetch is for the snapshot's scattered extents (round trips).
var sourcePrefetch = prefetchConfig{small: prefetchSmall, batchBytes: prefetchBatchBytes, batchExtents: prefetchBatchExtents,
	parallel: prefetchParallel, window: prefetchWindow}

// parentPrefetch is for the parent chunks Rechunk re-reads (each a blob to
// read, verify and decompress: CPU-bound, so a few at once; one chunk per
// batch, at most 4 x 8 MiB held).
var parentPrefetch = prefetchConfig{small: 8 << 20, batchBytes: 8 << 20, batchExtents: 1, parallel: 2, window: 4}

// prefetchReader hides the round trip of each small read. The chunker reads
// a disk's changed (or allocated) extents one at a time, in order, on one
// goroutine; over HTTP each is a round trip, so thousands of scattered 64 KiB
// extents are latency-bound. Knowing the plan, prefetchReader fetches the
// small extents ahead in parallel into a bounded window and serves ReadAt
// from it. Reads it did not plan for go straight to the source.
type prefetchReader struct {
	src     io.ReaderAt
	batches []*pbatch
	starts  []int64 // batches[i].exts[0].Offset, for search

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	window chan struct{}

	mu       sync.Mutex
	released int // batches below this index are freed
}

type pbatch struct {
	exts []dedup.Extent
	data [][]byte
	err  error
	done chan struct{}
	// guarded by prefetchReader.mu
	dispatched, fetched, released bool
}

// newPrefetchReader starts fetching plan's small extents. Close stops it.
func newPrefetchReader(ctx context.Context, src io.ReaderAt, plan []dedup.Extent) *prefetchReader {
	return newPrefetchReaderWith(ctx, src, plan, sourcePrefetch)
}

// newPrefetchReaderWith is newPrefetchReader with explicit limits.
func newPrefetchReaderWith(ctx context.Context, src io.ReaderAt, plan []dedup.Extent, cfg prefetchConfig) *prefetchReader {
	p := &prefetchReader{src: src, window: make(chan struct{}, cfg.window)}
	var cur *pbatch
	var curBytes int64
	for _, e := range plan {
		if e.Length <= 0 || e.Length > cfg.small {
			cur = nil
			continue
		}
		if cur == nil || len(cur.exts) >= cfg.batchExtents || curBytes+e.Length > cfg.batchBytes {
			cur = &pbatch{done: make(chan struct{})}
			curBytes = 0
			p.batches = append(p.batches, cur)
			p.starts = append(p.starts, e.Offset)
		}
		cur.exts = append(cur.exts, e)
		curBytes += e.Length
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.ctx = ctx
	if len(p.batches) == 0 {
		return p
	}
	next := make(chan *pbatch)
	p.wg.Add(1 + cfg.parallel)
	go func() {
		defer p.wg.Done()
		defer close(next)
		for _, b := range p.batches {
			select {
			case p.window <- struct{}{}:
			case <-ctx.Done():
				return
			}
			p.mu.Lock()
			skip := b.released // the reader is already past it
			b.dispatched = !skip
			p.mu.Unlock()
			if skip {
				<-p.window
				continue
			}
			select {
			case next <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range cfg.parallel {
		go func() {
			defer p.wg.Done()
			for b := range next {
				data := make([][]byte, len(b.exts))
				var ferr error
				for i, e := range b.exts {
					if ctx.Err() != nil {
						ferr = ctx.Err()
						break
					}
					buf := make([]byte, e.Length)
					n, err := src.ReadAt(buf, e.Offset)
					if n < len(buf) {
						if err == nil {
							err = io.ErrUnexpectedEOF
						}
						ferr = err
						break
					}
					data[i] = buf
				}
				b.data, b.err = data, ferr
				close(b.done)
				p.mu.Lock()
				b.fetched = true
				if b.released {
					b.data = nil
					<-p.window
				}
				p.mu.Unlock()
			}
		}()
	}
	return p
}

// ReadAt serves p from a prefetched extent when one covers it.
func (p *prefetchReader) ReadAt(buf []byte, off int64) (int, error) {
	i := sort.Search(len(p.starts), func(i int) bool { return p.starts[i] > off }) - 1
	if i >= 0 {
		b := p.batches[i]
		for k, e := range b.exts {
			if off < e.Offset || off+int64(len(buf)) > e.Offset+e.Length {
				continue
			}
			p.mu.Lock()
			p.releaseBefore(i)
			waitable := b.dispatched || !b.released
			p.mu.Unlock()
			if !waitable {
				break
			}
			select {
			case <-b.done:
			case <-p.ctx.Done():
				return 0, p.ctx.Err()
			}
			if b.err != nil || b.data == nil || b.data[k] == nil {
				break // the direct read below retries and reports
			}
			return copy(buf, b.data[k][off-e.Offset:]), nil
		}
	}
	return p.src.ReadAt(buf, off)
}

// releaseBefore frees the batches before i: the chunker reads in order, so
// it will not come back to them. p.mu is held.
func (p *prefetchReader) releaseBefore(i int) {
	for ; p.released < i; p.released++ {
		b := p.batches[p.released]
		b.released = true
		if b.fetched {
			b.data = nil
			<-p.window
		}
	}
}

// Close stops the prefetching and waits for the fetchers; cancel the
// source's reads first if they may stall.
func (p *prefetchReader) Close() {
	p.cancel()
	p.wg.Wait()
}

// rechunkParentPlan lists the parent chunks Rechunk will read: every data
// chunk a change touches and the chunk after each run of them (where the
// chain falls back onto the parent's cuts), in disk order.
func rechunkParentPlan(par []dedup.MapExtent, changed []dedup.Extent) []dedup.Extent {
	var plan []dedup.Extent
	last := -1
	add := func(j int) {
		if j > last && j < len(par) {
			if !par[j].Zero {
				plan = append(plan, dedup.Extent{Offset: par[j].Offset, Length: par[j].Length})
			}
			last = j
		}
	}
	pi := 0
	for _, c := range changed {
		for pi < len(par) && par[pi].Offset+par[pi].Length <= c.Offset {
			pi++
		}
		j := pi
		for ; j < len(par) && par[j].Offset < c.Offset+c.Length; j++ {
			add(j)
		}
		add(j)
	}
	return plan
}
