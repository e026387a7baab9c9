package auth

import (
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

// Limiter is a set of token buckets keyed by a string (client IP, username).
// Each key holds at most Burst tokens and regains one every Every. Idle full
// buckets are forgotten, so memory stays bounded by recent activity (and
// by MaxKeys: beyond it the oldest bucket is dropped).
type Limiter struct {
	clk     clock.Clock
	burst   float64
	every   time.Duration
	maxKeys int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
	locked bool // refused since the last token it gave: one lockout episode
}

// NewLimiter returns a limiter.
func NewLimiter(clk clock.Clock, burst int, every time.Duration, maxKeys int) *Limiter {
	if maxKeys <= 0 {
		maxKeys = 10000
	}
	return &Limiter{clk: clk, burst: float64(burst), every: every, maxKeys: maxKeys, buckets: map[string]*bucket{}}
}

// Allow takes a token for key. When none is left it returns false and how
// long until one is.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	ok, wait, _ := l.take(key)
	return ok, wait
}

// take is Allow that also reports whether this refusal is the first of
// an episode (the key had been given a token since it was last refused).
func (l *Limiter) take(key string) (ok bool, wait time.Duration, newlyLocked bool) {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(key, now)
	if b.tokens >= 1 {
		b.tokens--
		b.locked = false
		return true, 0, false
	}
	wait = time.Duration((1 - b.tokens) * float64(l.every))
	first := !b.locked
	b.locked = true
	return false, wait, first
}

// Refund gives back a token taken for an attempt that turned out not to
// count (a successful login, vCenter not answering).
func (l *Limiter) Refund(key string) {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(key, now)
	b.tokens = min(l.burst, b.tokens+1)
}

// Peek reports, without taking a token, whether key could proceed.
func (l *Limiter) Peek(key string) (bool, time.Duration) {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(key, now)
	if b.tokens >= 1 {
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(l.every))
}

func (l *Limiter) refillLocked(key string, now time.Time) *bucket {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.maxKeys {
			l.evictLocked(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
		return b
	}
	if el := now.Sub(b.at); el > 0 {
		b.tokens = min(l.burst, b.tokens+float64(el)/float64(l.every))
		b.at = now
	}
	return b
}

func (l *Limiter) evictLocked(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for k, b := range l.buckets {
		if b.tokens+float64(now.Sub(b.at))/float64(l.every) >= l.burst {
			delete(l.buckets, k)
			continue
		}
		if oldest == "" || b.at.Before(oldestAt) {
			oldest, oldestAt = k, b.at
		}
	}
	if len(l.buckets) >= l.maxKeys && oldest != "" {
		delete(l.buckets, oldest)
	}
}

// FailureCounter counts recent failures per key (a user name): each
// failure adds one, and one is forgotten every Every. Like Limiter it
// holds at most MaxKeys keys, dropping the stalest beyond.
type FailureCounter struct {
	clk     clock.Clock
	every   time.Duration
	maxKeys int

	mu     sync.Mutex
	counts map[string]*failures
}

type failures struct {
	n       float64
	at      time.Time
	flagged bool // reported as over the threshold in this episode
}

// NewFailureCounter returns a counter.
func NewFailureCounter(clk clock.Clock, every time.Duration, maxKeys int) *FailureCounter {
	if maxKeys <= 0 {
		maxKeys = 10000
	}
	return &FailureCounter{clk: clk, every: every, maxKeys: maxKeys, counts: map[string]*failures{}}
}

func (c *FailureCounter) decayLocked(key string, now time.Time) *failures {
	f, ok := c.counts[key]
	if !ok {
		return nil
	}
	if el := now.Sub(f.at); el > 0 {
		f.n = max(0, f.n-float64(el)/float64(c.every))
		f.at = now
	}
	return f
}

// Count returns key's recent failures.
func (c *FailureCounter) Count(key string) float64 {
	now := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.decayLocked(key, now); f != nil {
		return f.n
	}
	return 0
}

// Add records a failure of key and returns its recent failures, and
// whether they just reached threshold (once per episode: the flag clears
// when the count decays below threshold again).
func (c *FailureCounter) Add(key string, threshold float64) (float64, bool) {
	now := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.decayLocked(key, now)
	if f == nil {
		if len(c.counts) >= c.maxKeys {
			c.evictLocked(now)
		}
		f = &failures{at: now}
		c.counts[key] = f
	}
	if f.n < threshold {
		f.flagged = false
	}
	f.n++
	crossed := f.n >= threshold && !f.flagged
	if crossed {
		f.flagged = true
	}
	return f.n, crossed
}

func (c *FailureCounter) evictLocked(now time.Time) {
	var stalest string
	var stalestAt time.Time
	for k, f := range c.counts {
		if f.n-float64(now.Sub(f.at))/float64(c.every) <= 0 {
			delete(c.counts, k)
			continue
		}
		if stalest == "" || f.at.Before(stalestAt) {
			stalest, stalestAt = k, f.at
		}
	}
	if len(c.counts) >= c.maxKeys && stalest != "" {
		delete(c.counts, stalest)
	}
}
