// Package testutil holds test-data builders shared by several packages'
// tests and benchmarks: disk images holding real file systems made by the
// system's own tools. It is imported only from _test.go files.
package testutil
