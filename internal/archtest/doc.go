// Package archtest holds no code: its test enforces the import rules of
// DESIGN.md ("Imports flow one way") with `go list -deps`, so a forbidden edge
// fails `make test` instead of surviving review.
package archtest
