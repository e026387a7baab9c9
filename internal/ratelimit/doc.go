// Package ratelimit owns the appliance's bandwidth limits: a token bucket
// (Limiter) that many goroutines share, paced by an internal/clock Clock so
// that tests drive it with clock.Fake, with a rate that may change while
// transfers run (SetRate) or by a weekly Schedule (a default rate and other
// rates inside windows such as business hours).
//
// Rates are bytes per second; 0 means unlimited. The configuration speaks
// MB/s (10^6 bytes per second, as links are rated): MBps converts.
//
// The bucket holds at most Burst(rate) bytes: one second's worth, at most
// 4 MiB, so a transfer that was idle sends at most that much at line rate
// before the limit bites, and a limit of a few MB/s is met within a few per
// cent over any stretch of a few seconds. The bucket starts empty (a new
// limiter, and a limited one after an unlimited stretch): a transfer that
// starts cold never gets a free second.
//
// Waiters are served in the order they asked (each takes its share of the
// bucket, which may go negative, and waits until the refill has covered
// it), so a large request is not starved by many small ones; a request
// larger than the burst is taken in burst-sized pieces, so that others
// interleave. A rate change wakes every waiter to recompute its wait at the
// new rate; a cancelled wait gives back the share the refill had not yet
// covered.
//
// This package imports only internal/clock: the repository's storage layer
// (which may import neither) takes anything with WaitN, and the daemon turns
// policy windows into Periods (policy.Window has the State method).
package ratelimit
