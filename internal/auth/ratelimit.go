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
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(key, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) * float64(l.every))
	return false, wait
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
