// Package repository is vmvault's deduplication store: immutable pack files
// holding compressed (zstd) and, by default, encrypted (AES-256-GCM) blobs,
// a rebuildable bbolt catalog (index.db), disk maps stored as
// content-addressed segments under a Merkle root, restore point manifests,
// and the maintenance operations (check, reclaim, recatalog, stats).
//
// Truth lives in files: packs (each ends with a header listing its blobs) and
// one tiny commit record per restore point under points/. index.db is a cache
// that Recatalog rebuilds from those files alone; Open verifies it page by
// page before bbolt maps it and rebuilds it when it is damaged, and reclaim
// decides what is live from the commit records on disk, never from it. The exact bytes are
// documented in FORMAT.md; the write order (pack -> fsync -> rename -> fsync
// dir -> index transaction -> commit record last) is the crash-safety
// contract.
//
// Storage: every file operation on packs, commit records and the config goes
// through storage.Storage (repository/storage): the local directory is its
// first implementation, repository/s3store the S3 one (a location
// "s3:http(s)://HOST[:PORT]/BUCKET[/PREFIX]", see ParseLocation; any other
// scheme is refused), storage.Faulty injects failures in tests. The write
// order above holds on every backend with "rename + fsync dir" read as "the
// backend acknowledged the object". index.db and the process lock are
// always local: in the repository directory, or for a remote repository in
// a cache directory (OpenOptions.CacheDir).
//
// Concurrency: a Repository is goroutine-safe. Sessions share a small pool of
// open pack files; blobs are hashed, compressed and sealed in the calling
// goroutine and only the append happens under a short per-pack lock. Reclaim
// may run while sessions write: blobs any open session has used are part of
// the live set, condemned blobs are invisible to deduplication, and deletion
// waits (a barrier) for every session that started before the condemn step.
//
// Slices (format v1.1): a disk map extent may reference a byte range of a
// data blob, so an incremental stores only the changed bytes and points into
// its parent's blobs for the rest. Readers decode each blob once per run of
// extents (blobs sliced across job boundaries are handed over), reclaim keeps
// a blob while any slice references it, check verifies every slice fits.
//
// Close may run while readers are in flight (Check, Reclaim, Stats, disk
// readers, LoadBlob): it waits for them; calls that start later fail with
// ErrClosed.
//
// Self-healing: Check with ReadData quarantines corrupt blobs in the
// catalog; deduplication ignores them, so the next backup of the same data
// stores a fresh copy and every point referencing that id reads again.
//
// Test helpers for other packages: TestRepository (testing.go) creates an
// encrypted repository with a cheap KDF and no fsync in t.TempDir().
//
// This package imports nothing of vmvault's except its own subpackages,
// internal/failpoint (crash-test hooks, off unless VMVAULT_FAILPOINTS is set)
// and internal/clock (OpenOptions.Clock: when time locks and Object Lock
// retention expire), and its tests internal/ratelimit (the bandwidth limits
// that OpenOptions.Upload/Download take through storage.Limiter); in
// particular it never imports vsphere, backup or dedup.
package repository
