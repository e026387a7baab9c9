// Package clock owns time for vmvault's policy and state code. It is the only
// package that calls time.Now: everything else receives a Clock, so schedules,
// windows, retries and maintenance are testable with Fake, which moves only
// when a test says so.
//
// clock imports nothing but the standard library and must stay that way.
package clock
