// Package snapcancel proves that a snapshot whose creation is cancelled
// while vCenter is still working on it is removed anyway. It lives in a
// package of its own because it slows vcsim's snapshot task down through the
// simulator's process-wide TaskDelay, which must not touch other suites.
package snapcancel
