// Package dedup cuts disk images into chunks for the deduplicating repository.
//
// It owns the chunking algorithms (content-defined chunking on
// github.com/restic/chunker's Rabin fingerprint, and fixed-size chunks), the
// sparse fast path (unallocated or known-zero areas are never read nor
// byte-walked: cut positions in zero runs are computed), all-zero chunk
// recognition by word comparison, and the two ways an incremental derives a new
// disk version from its parent's map while reading from the source only the
// changed extents: CBT-aware re-chunking (Rechunk: an exact CDC map) and the
// slice planner (Incremental: changed bytes become new pieces, unchanged bytes
// slices of the parent's blobs, fragmented windows are rewritten with CDC),
// chosen per disk by ChooseIncremental's cost rule (backup/INCREMENTAL.md).
//
// Why the incremental path is exact: restic's chunker restarts its rolling
// hash at every cut and only tests windows that lie wholly inside the current
// chunk, so the cut after position s is a pure function of s and the bytes in
// [s, cut). Whether a window of 64 bytes ends a chunk does not depend on where
// the chunk started; a run of zeros always hashes to 0 and therefore cuts
// every MinSize bytes. A parent chunk whose start is reached by the new chain
// and whose bytes did not change is therefore a chunk of the new disk too.
//
// Speed and memory: the digest depends on the 64-byte window alone, so the scan hashes eight
// stretches of a block at once (independent dependency chains) and is bit-identical to restic's
// one-byte-at-a-time loop. Source reads are 8 MiB blocks packed with the allocated extents, read
// by one goroutine at most two blocks ahead; at most MaxSize/8MiB+5 blocks exist per call. Each
// data chunk is copied once, from the read block into a pooled buffer that the receiver returns
// with ReleaseBuffer.
//
// dedup must never import any other vmvault package (it depends only on the
// standard library, restic/chunker and x/sync).
package dedup
