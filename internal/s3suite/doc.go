// Package s3suite holds the end-to-end S3 suite: the appliance binary run
// against a real S3 server (versitygw, started by the tests on loopback)
// through init, image backup, byte-identical restore, check --read-data,
// delete + reclaim, and kill -9 in the middle of a backup. It has no
// non-test code besides this comment. copy_test.go adds a copy into an
// immutable (Object Lock) S3 repository and its refused delete;
// crash_test.go kills a backup inside a multipart upload and proves the
// next reclaim aborts it. The failpoint walk against S3 lives in
// internal/crashtest (TestCrashWalkS3).
package s3suite
