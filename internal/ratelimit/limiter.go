package ratelimit

import (
	"context"
	"io"
	"math"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

// MaxBurst caps the bucket: what an idle transfer may send at once.
const MaxBurst = 4 << 20

// MBps converts MB/s (10^6 bytes per second) to bytes per second.
func MBps(v float64) float64 { return v * 1e6 }

// Burst is the bucket's size at rate (bytes/s): one second's worth, at
// most MaxBurst, at least one byte; 0 when unlimited.
func Burst(rate float64) int {
	if rate <= 0 {
		return 0
	}
	return int(max(1, min(rate, MaxBurst)))
}

// Limiter is a token bucket shared by every goroutine that calls WaitN. A
// nil *Limiter is unlimited.
type Limiter struct {
	clk clock.Clock

	mu    sync.Mutex
	sched Schedule
	rate  float64   // bytes/s in force since last; 0 unlimited
	until time.Time // when sched's rate may change next (zero: never)
	// avail is what the refill has added and taken what waiters have
	// reserved, both since the last rebase: avail-taken is the bucket's
	// level (negative while waiters queue), and a waiter whose
	// reservation ends at mark may go once avail >= mark.
	avail, taken float64
	last         time.Time // the refill is counted up to here
	waiters      int
	changed      chan struct{} // closed and replaced when the rate is set

	// armed, for tests, hears of every waiter's timer: armed (at its
	// deadline) and stopped (at the zero time) by waiter id.
	armed func(id uint64, at time.Time)
	seq   uint64
}

// New returns a limiter at rate bytes/s (0: unlimited) on clk (nil: the
// wall clock).
func New(clk clock.Clock, rate float64) *Limiter {
	return NewScheduled(clk, Schedule{Default: rate})
}

// NewScheduled returns a limiter whose rate follows s.
func NewScheduled(clk clock.Clock, s Schedule) *Limiter {
	if clk == nil {
		clk = clock.Real()
	}
	l := &Limiter{clk: clk, changed: make(chan struct{}), last: clk.Now(), sched: s}
	l.setRateLocked(s.At(l.last))
	return l
}

// SetRate replaces the schedule by a constant rate (bytes/s, 0 unlimited).
func (l *Limiter) SetRate(rate float64) { l.SetSchedule(Schedule{Default: rate}) }

// SetSchedule replaces the schedule; waiters recompute their waits at the
// new rate (what the bucket gained until now is counted at the old one).
func (l *Limiter) SetSchedule(s Schedule) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advanceLocked(l.clk.Now())
	l.sched = s
	l.setRateLocked(s.At(l.last))
	close(l.changed)
	l.changed = make(chan struct{})
}

// Rate returns the rate in force now (bytes/s, 0 unlimited).
func (l *Limiter) Rate() float64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advanceLocked(l.clk.Now())
	return l.rate
}

// Schedule returns the schedule the limiter follows.
func (l *Limiter) Schedule() Schedule {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sched
}

func (l *Limiter) setRateLocked(rate float64, until time.Time) {
	if !(rate > 0) || math.IsInf(rate, 1) { // NaN and negatives too
		rate = 0
	}
	if rate == 0 || l.rate == 0 {
		// Unlimited forgets every debt; limited again starts empty.
		l.avail = l.taken
	}
	if !until.IsZero() && !until.After(l.last) {
		// A Period that names no later change: look again in a second
		// rather than spin.
		until = l.last.Add(time.Second)
	}
	l.rate, l.until = rate, until
	if b := float64(Burst(rate)); l.avail-l.taken > b {
		l.avail = l.taken + b
	}
}

// advanceLocked counts the refill up to now, switching rates at the
// schedule's edges on the way.
func (l *Limiter) advanceLocked(now time.Time) {
	if now.Before(l.last) { // the clock was set back
		l.last = now
		l.setRateLocked(l.sched.At(now))
		return
	}
	for {
		if !l.until.IsZero() && !l.last.Before(l.until) {
			l.setRateLocked(l.sched.At(l.last))
		}
		if !l.last.Before(now) {
			return
		}
		end := now
		if !l.until.IsZero() && l.until.Before(now) {
			end = l.until
		}
		if l.rate > 0 {
			l.avail += l.rate * end.Sub(l.last).Seconds()
			if b := float64(Burst(l.rate)); l.avail-l.taken > b {
				l.avail = l.taken + b
			}
		}
		l.last = end
	}
}

// eps absorbs float rounding between a computed wait and the refill it
// buys (bytes).
const eps = 1e-6

// WaitN blocks until n bytes may pass, or ctx ends (its error is
// returned; the bytes the refill had not covered go back to the bucket).
func (l *Limiter) WaitN(ctx context.Context, n int) error {
	if l == nil {
		return nil
	}
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.mu.Lock()
		l.advanceLocked(l.clk.Now())
		if l.rate == 0 {
			l.mu.Unlock()
			return nil
		}
		take := min(n, Burst(l.rate))
		l.taken += float64(take)
		mark := l.taken
		l.waiters++
		err := l.waitLocked(ctx, mark, float64(take))
		l.waiters--
		if l.waiters == 0 {
			// No mark is outstanding: keep the counters small so that
			// float precision does not erode over a long run.
			l.avail -= l.taken
			l.taken = 0
		}
		l.mu.Unlock()
		if err != nil {
			return err
		}
		n -= take
	}
	return nil
}

// waitLocked waits (unlocking meanwhile) until the refill reaches mark or
// the rate becomes unlimited.
func (l *Limiter) waitLocked(ctx context.Context, mark, take float64) error {
	l.seq++
	id := l.seq
	for l.rate > 0 && l.avail < mark-eps {
		// Round to the nanosecond first: 4 MiB at 8 MB/s is 524288000 ns,
		// not one more because of the float division.
		d := time.Duration(max(1, math.Ceil((mark-l.avail)/l.rate*1e9-1e-3)))
		if !l.until.IsZero() {
			d = min(d, l.until.Sub(l.last))
		}
		changed, at := l.changed, l.last.Add(d)
		l.mu.Unlock()
		t := l.clk.NewTimer(d)
		if l.armed != nil {
			l.armed(id, at)
		}
		var err error
		select {
		case <-t.C():
		case <-changed:
			l.stop(id, t)
		case <-ctx.Done():
			l.stop(id, t)
			err = ctx.Err()
		}
		l.mu.Lock()
		l.advanceLocked(l.clk.Now())
		if err != nil {
			if l.rate > 0 && mark > l.avail {
				l.avail += min(take, mark-l.avail)
			}
			return err
		}
	}
	return nil
}

func (l *Limiter) stop(id uint64, t clock.Timer) {
	if t.Stop() && l.armed != nil {
		l.armed(id, time.Time{})
	}
}

// WaitSize is WaitN for a whole object's size (a PUT's or a GET's).
func (l *Limiter) WaitSize(ctx context.Context, size int64) error {
	for size > 0 {
		n := min(size, 1<<30)
		if err := l.WaitN(ctx, int(n)); err != nil {
			return err
		}
		size -= n
	}
	return nil
}

// chunk bounds one Read or Write of the wrappers, so that a large buffer
// is paced smoothly rather than sent at once after a long wait.
const chunk = 256 << 10

// NewReader returns a reader of r whose bytes pass l (after they are read,
// before they are returned).
func NewReader(ctx context.Context, r io.Reader, l *Limiter) io.Reader {
	return &reader{ctx: ctx, r: r, l: l}
}

type reader struct {
	ctx context.Context
	r   io.Reader
	l   *Limiter
}

func (r *reader) Read(p []byte) (int, error) {
	if len(p) > chunk {
		p = p[:chunk]
	}
	n, err := r.r.Read(p)
	if n > 0 {
		if werr := r.l.WaitN(r.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}

// NewWriter returns a writer to w whose bytes pass l before they are
// written.
func NewWriter(ctx context.Context, w io.Writer, l *Limiter) io.Writer {
	return &writer{ctx: ctx, w: w, l: l}
}

type writer struct {
	ctx context.Context
	w   io.Writer
	l   *Limiter
}

func (w *writer) Write(p []byte) (int, error) {
	var done int
	for len(p) > 0 {
		c := p[:min(len(p), chunk)]
		if err := w.l.WaitN(w.ctx, len(c)); err != nil {
			return done, err
		}
		n, err := w.w.Write(c)
		done += n
		if err != nil {
			return done, err
		}
		p = p[n:]
	}
	return done, nil
}
