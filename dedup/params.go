package dedup

import (
	"context"
	"fmt"
	"io"
	"math/bits"

	"github.com/restic/chunker"
)

// Algorithm names stored in the repository configuration.
const (
	AlgorithmCDC   = "cdc"
	AlgorithmFixed = "fixed"
)

// Default CDC sizes (docs/PERFORMANCE.md measures the average against fixed-size chunks).
const (
	DefaultMinSize = 512 << 10
	DefaultAvgSize = 1 << 20
	DefaultMaxSize = 8 << 20
)

// Limits that keep memory bounded and the rolling hash meaningful.
const (
	windowSize   = 64       // restic/chunker's window: a cut is decided by the last 64 bytes
	maxChunkSize = 64 << 20 // upper bound on any chunk, so buffers stay bounded
)

// Params are the chunker parameters recorded in the repository configuration and in every disk map.
type Params struct {
	Algorithm  string // "cdc" (default when empty) or "fixed"
	Polynomial uint64 // CDC irreducible polynomial (restic/chunker.Pol)
	// CDC: MinSize <= AvgSize <= MaxSize; AvgSize is a power of two (restic's SetAverageBits).
	// fixed: every chunk but the last has AvgSize bytes; MinSize and MaxSize are ignored.
	MinSize, AvgSize, MaxSize int
}

// DefaultParams returns the CDC defaults with a fresh random irreducible polynomial.
func DefaultParams() (Params, error) {
	pol, err := chunker.RandomPolynomial()
	if err != nil {
		return Params{}, fmt.Errorf("choose chunker polynomial: %w", err)
	}
	return Params{Algorithm: AlgorithmCDC, Polynomial: uint64(pol),
		MinSize: DefaultMinSize, AvgSize: DefaultAvgSize, MaxSize: DefaultMaxSize}, nil
}

// Validate reports whether p can drive a chunker.
func (p Params) Validate() error {
	switch p.Algorithm {
	case AlgorithmCDC, "":
		pol := chunker.Pol(p.Polynomial)
		// restic's digest arithmetic needs 8 < degree <= 53.
		if d := pol.Deg(); d <= 8 || d > 53 {
			return fmt.Errorf("%w: polynomial %#x has degree %d, want 9..53", ErrInvalidParams, p.Polynomial, d)
		}
		if !pol.Irreducible() {
			return fmt.Errorf("%w: polynomial %#x is not irreducible", ErrInvalidParams, p.Polynomial)
		}
		if p.MinSize < windowSize {
			return fmt.Errorf("%w: min size %d is below the %d-byte hash window", ErrInvalidParams, p.MinSize, windowSize)
		}
		if p.AvgSize <= 0 || p.AvgSize&(p.AvgSize-1) != 0 {
			return fmt.Errorf("%w: average size %d is not a power of two", ErrInvalidParams, p.AvgSize)
		}
		if bits.TrailingZeros(uint(p.AvgSize)) >= pol.Deg() {
			return fmt.Errorf("%w: average size %d needs more bits than the polynomial's degree", ErrInvalidParams, p.AvgSize)
		}
		if p.MinSize > p.AvgSize || p.AvgSize > p.MaxSize {
			return fmt.Errorf("%w: sizes must satisfy min <= avg <= max, got %d/%d/%d", ErrInvalidParams, p.MinSize, p.AvgSize, p.MaxSize)
		}
		if p.MaxSize > maxChunkSize {
			return fmt.Errorf("%w: max size %d exceeds %d", ErrInvalidParams, p.MaxSize, maxChunkSize)
		}
	case AlgorithmFixed:
		if p.AvgSize < windowSize || p.AvgSize > maxChunkSize {
			return fmt.Errorf("%w: fixed chunk size %d outside %d..%d", ErrInvalidParams, p.AvgSize, windowSize, maxChunkSize)
		}
	default:
		return fmt.Errorf("%w: unknown algorithm %q (want %q or %q)", ErrInvalidParams, p.Algorithm, AlgorithmCDC, AlgorithmFixed)
	}
	return nil
}

// Extent is a byte range of a disk.
type Extent struct{ Offset, Length int64 }

// Chunk is one chunk of a disk, handed to the emit callback in offset order.
type Chunk struct {
	Offset int64
	Length int
	// Data holds the chunk's bytes; nil when Zero or reused (Parent >= 0). Ownership passes to the
	// receiver of emit (even when emit returns an error); it calls ReleaseBuffer(Data) when done so
	// that buffers are pooled and memory stays bounded.
	Data []byte
	// Zero is set for all-zero chunks: recognised by word comparison or known from the sparse map,
	// never hashed, never stored.
	Zero bool
	// Parent (Rechunk and Incremental) is the index in the parent's list of an extent whose bytes at
	// the same disk offsets this chunk is (unchanged, NOT read); -1 otherwise. Rechunk: the chunk is
	// exactly that parent chunk (same offset and length). Incremental: the chunk lies within that
	// parent extent (a slice of it: blob offset = the extent's Skip + Offset - its Offset). A zero
	// chunk carved out of a coalesced zero parent extent has Parent -1 and Zero set.
	Parent int
	// Group (Incremental only) marks a chunk that covers no disk bytes (Length 0, Offset = its
	// first piece's offset): Data holds the bytes of the InGroup chunks that follow it, back to
	// back, to be stored as ONE blob. Incremental coalesces the changed pieces of one window this
	// way, so that 10,000 scattered 4 KiB writes cost one hash, seal and catalog entry per window
	// instead of one per write.
	Group bool
	// InGroup (Incremental only): the chunk's bytes are [Skip, Skip+Length) of the last Group
	// chunk's Data (a slice of that blob); Data is nil, Parent -1.
	InGroup bool
	Skip    int64
}

// ParentChunk is one extent of a parent disk's chunk list. A Zero extent may be a coalesced run of
// several zero chunks.
type ParentChunk struct {
	Offset, Length int64
	Zero           bool
}

// Stats counts the bytes a Split or Rechunk read; see WithStats.
type Stats struct{ SourceBytesRead, ParentBytesRead int64 }

type statsKey struct{}

// WithStats returns a context that makes Split and Rechunk add the bytes they read to *st when they
// return (also on error). st must not be read while the call runs.
func WithStats(ctx context.Context, st *Stats) context.Context {
	return context.WithValue(ctx, statsKey{}, st)
}

// Chunker cuts disks into chunks. Implementations are safe for concurrent use by several calls.
type Chunker interface {
	// Split chunks a whole disk of the given size. allocated lists the extents that may hold data
	// (any order, overlaps merged; nil means the whole disk, an empty non-nil slice means none);
	// everything outside is known zero and is never read nor byte-walked. The result is identical to
	// chunking every byte of the disk. emit is called in offset order from the calling goroutine; it
	// may block, and an error from it stops Split. Reads go through src.ReadAt in large blocks with
	// read-ahead on one owned goroutine with bounded buffers. ctx cancels.
	Split(ctx context.Context, src io.ReaderAt, size int64, allocated []Extent, emit func(Chunk) error) error
	// Rechunk produces the chunk list of a new disk version from its parent's chunk list, reading
	// from src only the changed extents (each changed byte exactly once). The unchanged bytes that
	// re-chunking needs around a change are read from parent (the parent disk's content); elsewhere
	// parent chunks are reused without reading (Chunk.Parent >= 0). parentChunks must be the parent's
	// chunk list, made with the same Params, covering [0,size) in order (zero runs may be coalesced).
	// The result equals Split over the new disk (same boundaries, same Zero flags).
	Rechunk(ctx context.Context, src, parent io.ReaderAt, size int64, parentChunks []ParentChunk, changed []Extent,
		emit func(Chunk) error) error
	// Params returns the parameters, with the algorithm name filled in.
	Params() Params
}

// New returns the chunker for p: "cdc" uses restic/chunker's Rabin fingerprint (bit-identical cut
// points), "fixed" cuts every AvgSize bytes.
func New(p Params) (Chunker, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Algorithm == "" {
		p.Algorithm = AlgorithmCDC
	}
	c := &impl{p: p, blockSize: defaultBlockSize}
	if p.Algorithm == AlgorithmFixed {
		c.zeroLen = int64(p.AvgSize)
		return c, nil
	}
	c.rabin = newRabin(chunker.Pol(p.Polynomial), bits.TrailingZeros(uint(p.AvgSize)))
	// The length of a chunk that starts inside a long zero run, measured once by chunking zeros (a
	// zero window hashes to 0, which always cuts, so this is MinSize).
	z, err := c.zeroRunLength()
	if err != nil {
		return nil, err
	}
	c.zeroLen = z
	return c, nil
}
