// Package backup is the backup engine: it turns VMs (and disk images) into
// restore points.
//
// It joins the layers below it: vsphere gives snapshots, changed areas and
// disk bytes; dedup cuts a disk into chunks; repository stores them. The disk
// pipeline (WriteDisk) reads a source through the chunker (a full read, or an
// incremental by slices or by re-chunking: INCREMENTAL.md), hashes, compresses
// and seals chunks in a bounded pool of workers, and returns the disk map to
// commit. The Engine (BackupVM, BackupVMs) drives one VM at a time through
// sweep, CBT, snapshot, configuration capture, per-disk read-set choice
// (CBT incremental, allocated "*", or the whole disk), commit and the
// always-run snapshot removal. It depends only on small interfaces
// (VMSource, Snapshotter, ChangeTracker, DiskOpener, Store) so unit tests use
// fakes and end-to-end tests use the vcsim lab (vcsim-tests/backupe2e).
//
// backup imports vsphere, dedup, repository and vmconfig; it never imports restore,
// policy, web or cmd.
package backup
