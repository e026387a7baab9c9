// Package cache holds the one read-through cache the daemon uses for slow
// reads that many requests want at once (a vCenter inventory, a tag listing,
// a repository's statistics): values live for a fixed time, concurrent
// misses for a key share one load, and a failed load is never cached.
package cache

import (
	"context"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

// Loader computes the value for a key. It runs with a context of its own,
// detached from the caller that started it, so that one caller giving up
// never fails the others waiting on the same load.
type Loader[K comparable, V any] func(ctx context.Context, key K) (V, error)

// TTL is a read-through cache whose entries live for a fixed time. The zero
// value is not usable; call New.
type TTL[K comparable, V any] struct {
	ttl     time.Duration
	timeout time.Duration
	clk     clock.Clock
	load    Loader[K, V]

	mu       sync.Mutex
	entries  map[K]entry[V]
	inflight map[K]*call[V]
	loads    int
}

type entry[V any] struct {
	v  V
	at time.Time
}

type call[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// Option changes a cache made by New.
type Option func(*options)

type options struct {
	timeout time.Duration
	clk     clock.Clock
}

// WithTimeout bounds one load (default one minute): the load's context is
// detached from its callers, so something must end it.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithClock sets the clock entries age by (tests use clock.Fake).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clk = c } }

// New returns a cache whose entries live for ttl, filled by load.
func New[K comparable, V any](ttl time.Duration, load Loader[K, V], opts ...Option) *TTL[K, V] {
	o := options{timeout: time.Minute, clk: clock.Real()}
	for _, f := range opts {
		f(&o)
	}
	return &TTL[K, V]{
		ttl: ttl, timeout: o.timeout, clk: o.clk, load: load,
		entries: map[K]entry[V]{}, inflight: map[K]*call[V]{},
	}
}

// Get returns key's value: the cached one if younger than the TTL, else
// the result of one load shared with every concurrent caller for key. It
// returns ctx's error if ctx ends first; the load goes on for the others.
func (c *TTL[K, V]) Get(ctx context.Context, key K) (V, error) {
	c.mu.Lock()
	now := c.clk.Now()
	if e, ok := c.entries[key]; ok && now.Sub(e.at) < c.ttl {
		c.mu.Unlock()
		return e.v, nil
	}
	cl, ok := c.inflight[key]
	if !ok {
		cl = &call[V]{done: make(chan struct{})}
		c.inflight[key] = cl
		go c.run(ctx, key, cl) // owned by cl.done: every waiter and Close wait on it
	}
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	case <-cl.done:
		return cl.v, cl.err
	}
}

func (c *TTL[K, V]) run(ctx context.Context, key K, cl *call[V]) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	cl.v, cl.err = c.load(lctx, key)
	c.mu.Lock()
	delete(c.inflight, key)
	c.loads++
	if cl.err == nil {
		now := c.clk.Now()
		// Drop expired entries so keys that carry a version (a repository
		// name plus its points' signature) do not accumulate.
		for k, e := range c.entries {
			if now.Sub(e.at) >= c.ttl {
				delete(c.entries, k)
			}
		}
		c.entries[key] = entry[V]{v: cl.v, at: now}
	}
	c.mu.Unlock()
	close(cl.done)
}

// Invalidate forgets key's value; the next Get loads it again. A load in
// flight is not interrupted.
func (c *TTL[K, V]) Invalidate(key K) {
	c.mu.Lock()
	delete(c.entries, key)
	c.mu.Unlock()
}

// Loads reports how many loads have finished, failed ones included.
func (c *TTL[K, V]) Loads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads
}

// Wait blocks until no load is in flight or ctx ends; a daemon calls it on
// shutdown so no load outlives the resources it reads.
func (c *TTL[K, V]) Wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		var cl *call[V]
		for _, x := range c.inflight {
			cl = x
			break
		}
		c.mu.Unlock()
		if cl == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cl.done:
		}
	}
}
