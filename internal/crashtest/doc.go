// Package crashtest holds vmvault's crash walk (crash_test.go): every
// failpoint of the repository and state.db write paths (internal/failpoint)
// times several hit counts, each in a child process killed with SIGKILL at
// that step or made to fail with EIO/ENOSPC, and after each the proofs of
// the crash-safety contract: the repository opens, check --read-data is
// clean, every committed restore point restores byte-identical, the next
// backup and reclaim succeed. s3walk_test.go walks the same against an
// S3 repository on versitygw (loopback), with a repacking reclaim and
// copies local -> S3 and S3 -> local, and a catalog cache lost after
// every third kill. It also fills a real loop-mounted ext4 during
// a backup and a reclaim (diskfull_test.go). docs/RELIABILITY.md has the
// figures. The package has no code of its own outside its tests.
package crashtest
