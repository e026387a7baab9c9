package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock is the source of time. Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t.
	Since(t time.Time) time.Duration
	// NewTimer returns a timer that delivers the time on its channel once d
	// has elapsed.
	NewTimer(d time.Duration) Timer
	// After is NewTimer(d).C() for callers that never stop the timer.
	After(d time.Duration) <-chan time.Time
}

// Timer is a stoppable one-shot timer, like *time.Timer.
type Timer interface {
	// C is the channel on which the firing time is delivered (buffered, one value).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was still pending.
	Stop() bool
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) Since(t time.Time) time.Duration        { return time.Since(t) }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (realClock) NewTimer(d time.Duration) Timer         { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Fake is a Clock that moves only on Advance or Set. Timers whose deadline is
// reached fire (in deadline order) before Advance/Set returns, so a test that
// advances the clock knows every due timer value is already in its channel.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever the timer set changes
}

// NewFake returns a Fake clock set to now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// After returns the channel of a new timer.
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.NewTimer(d).C() }

// NewTimer registers a timer due at Now()+d. A timer with d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t
	}
	f.timers = append(f.timers, t)
	f.notifyLocked()
	return t
}

// Advance moves the clock forward by d and fires every timer that is due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the clock to t (backwards too) and fires every timer that is due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(t)
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	sort.SliceStable(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	kept := f.timers[:0]
	fired := false
	for _, tm := range f.timers {
		if !tm.at.After(t) {
			tm.c <- t // buffered and sent at most once: never blocks
			fired = true
			continue
		}
		kept = append(kept, tm)
	}
	for i := len(kept); i < len(f.timers); i++ {
		f.timers[i] = nil
	}
	f.timers = kept
	if fired {
		f.notifyLocked()
	}
}

// Pending returns how many timers are registered and not yet fired or stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// NextDeadline returns the earliest pending timer deadline, if any.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	at := f.timers[0].at
	for _, t := range f.timers[1:] {
		if t.at.Before(at) {
			at = t.at
		}
	}
	return at, true
}

// BlockUntil waits until at least n timers are pending or done is closed;
// it reports whether the count was reached. It lets a test wait for a
// goroutine to arm its timer without sleeping.
func (f *Fake) BlockUntil(n int, done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return true
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f  *Fake
	at time.Time
	c  chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, o := range t.f.timers {
		if o == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			t.f.notifyLocked()
			return true
		}
	}
	return false
}
