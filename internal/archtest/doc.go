// Package archtest holds no code: its tests enforce the layering the
// package docs and docs/ARCHITECTURE.md state ("Imports flow one way"), so a forbidden
// edge fails `make test` instead of surviving review.
//
// rules_test.go lists the rules, each naming the doc that states it: what
// a package may depend on (non-test build, test build, or both: a unit
// test must not start vcsim where its package's doc says the unit tests
// use fakes), who may import a package at all (test support, the lab, the
// daemon, bbolt), and which pair of packages only one adapter may join.
// A rule may exempt today's offending files by name, each with a reason;
// an exemption that no longer applies fails too, so the lists only
// shrink. timenow_test.go keeps time.Now inside internal/clock, with
// today's justified exceptions counted per file. Every rule has a planted
// violation (arch_test.go, on a synthetic import graph or a temporary
// module) proving it fires. The graph comes from `go list -test`.
package archtest
