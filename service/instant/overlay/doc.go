// Package overlay owns the copy-on-write store of an instant export: what
// the clients of one exported disk wrote, on local disk, never in the
// repository.
//
// A Store is three files in its directory: NAME.data, a sparse file the
// size of the disk holding the written bytes at their offsets; NAME.map, a
// checksummed snapshot of the extent map (which byte ranges were written),
// replaced atomically (temporary file, fsync, rename, fsync of the
// directory); and NAME.journal, checksummed records of the extents written
// since the snapshot. Sync makes every write before it durable: it fsyncs
// the data first and only then appends and fsyncs the journal records that
// claim it, so after a crash a range is either the new bytes or the
// repository's, never a hole. Open replays the snapshot and the journal's
// valid records (a torn last record is dropped); the map is a union of
// ranges, so replaying a record twice is harmless and compaction (a new
// snapshot, then an empty journal) needs no ordering beyond that.
//
// The store is capped: a write that would make the written bytes exceed
// the limit fails with an error matching syscall.ENOSPC (NFS3ERR_NOSPC in
// go-nfs) and changes nothing. ReadAt merges the written ranges over a
// base io.ReaderAt (the repository's disk).
//
// It imports nothing of vmvault's but internal/extent.
package overlay
