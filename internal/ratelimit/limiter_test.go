package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

const MiB = 1 << 20

var t0 = time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC) // a Monday

// harness drives a Limiter on a fake clock. The limiter tells it of every
// timer a waiter arms or stops, and every WaitN that returns sends an
// event, so a step waits for exactly the outcomes it causes (each fired or
// woken waiter either re-arms or returns) instead of sleeping.
type harness struct {
	t      *testing.T
	f      *clock.Fake
	l      *Limiter
	events chan event
	timers map[uint64]time.Time // the limiter's pending timers
	wg     sync.WaitGroup
	ctx    context.Context // cancelled at cleanup
}

type event struct {
	timer uint64    // an arm (at set) or a stop (at zero) of this waiter's timer
	id    int       // a WaitN that returned (timer 0)
	at    time.Time // the deadline, or when WaitN returned
	err   error
}

func newHarness(t *testing.T, s Schedule) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, f: clock.NewFake(t0), events: make(chan event, 64), timers: map[uint64]time.Time{}, ctx: ctx}
	h.reset(s)
	t.Cleanup(func() {
		cancel() // a failed test leaves no waiter behind
		h.wg.Wait()
	})
	return h
}

// reset replaces the limiter by a new one at the clock's time.
func (h *harness) reset(s Schedule) {
	h.l = NewScheduled(h.f, s)
	h.l.armed = func(id uint64, at time.Time) { h.events <- event{timer: id, at: at} }
}

// start runs WaitN(n) as waiter id.
func (h *harness) start(ctx context.Context, id, n int) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			select {
			case <-h.ctx.Done():
				stop()
			case <-ctx.Done():
			}
		}()
		err := h.l.WaitN(ctx, n)
		h.events <- event{id: id, at: h.f.Now(), err: err}
	}()
}

// next waits for k outcomes (an armed timer or a returned WaitN) and
// returns the WaitN calls that returned among them.
func (h *harness) next(k int) []event {
	h.t.Helper()
	var done []event
	for k > 0 {
		select {
		case e := <-h.events:
			switch {
			case e.timer != 0 && e.at.IsZero():
				delete(h.timers, e.timer)
				continue // not an outcome
			case e.timer != 0:
				h.timers[e.timer] = e.at
			default:
				done = append(done, e)
			}
			k--
		case <-time.After(10 * time.Second): // a hang, not a synchronisation
			h.t.Fatalf("waited 10 s for an event of the limiter")
		}
	}
	return done
}

// deadline is the earliest pending timer.
func (h *harness) deadline() time.Time {
	h.t.Helper()
	var at time.Time
	for _, d := range h.timers {
		if at.IsZero() || d.Before(at) {
			at = d
		}
	}
	if at.IsZero() {
		h.t.Fatalf("no waiter is waiting")
	}
	return at
}

// advance moves the clock to the earliest deadline and waits for the
// outcome of every timer it fires.
func (h *harness) advance() []event {
	h.t.Helper()
	at := h.deadline()
	k := 0
	for id, d := range h.timers {
		if !d.After(at) {
			delete(h.timers, id)
			k++
		}
	}
	h.f.Set(at)
	return h.next(k)
}

// woken waits for the outcomes of every waiter a rate change woke.
func (h *harness) woken() []event {
	h.t.Helper()
	return h.next(len(h.timers))
}

func TestRateAndBurst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  float64
		n     int
		want  time.Duration // from t0, for a cold bucket
		burst int
	}{
		{"one second", MiB, MiB, time.Second, MiB},
		{"half a second", 8e6, 4e6, 500 * time.Millisecond, 4 << 20},
		{"capped burst, pieces", 8e6, 8e6, time.Second, 4 << 20},
		{"4 MiB at 8 MB/s", 8e6, 4 << 20, 524288 * time.Microsecond, 4 << 20},
		{"slow", 1000, 2500, 2500 * time.Millisecond, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Burst(tc.rate); got != tc.burst {
				t.Errorf("Burst(%v) = %d, want %d", tc.rate, got, tc.burst)
			}
			h := newHarness(t, Schedule{Default: tc.rate})
			h.start(context.Background(), 1, tc.n)
			h.next(1) // armed
			var done []event
			for len(done) == 0 {
				done = h.advance() // a piece's end re-arms for the next one
			}
			if got := done[0].at.Sub(t0); got != tc.want {
				t.Errorf("WaitN(%d) at %v B/s returned after %v, want %v", tc.n, tc.rate, got, tc.want)
			}
		})
	}
}

func TestIdleBucketFillsToBurstOnly(t *testing.T) {
	h := newHarness(t, Schedule{Default: MiB})
	h.f.Advance(time.Hour) // idle: the bucket holds one burst, not an hour
	if err := h.l.WaitN(context.Background(), MiB); err != nil {
		t.Fatal(err)
	}
	if len(h.events) != 0 {
		t.Fatal("the first burst after idle waited")
	}
	h.start(context.Background(), 1, MiB)
	h.next(1)
	done := h.advance()
	if got := done[0].at.Sub(t0); got != time.Hour+time.Second {
		t.Errorf("second MiB after idle returned at +%v, want +1h0m1s", got)
	}
}

func TestUnlimited(t *testing.T) {
	var nilL *Limiter
	if err := nilL.WaitN(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
	l := New(clock.NewFake(t0), 0)
	if err := l.WaitSize(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
}

// Four goroutines asking 1 MiB each at 1 MiB/s share the rate: they
// return one second apart, in the order they asked, the last at 4 s.
func TestConcurrentShareRate(t *testing.T) {
	h := newHarness(t, Schedule{Default: MiB})
	for i := range 4 {
		h.start(context.Background(), i, MiB)
		h.next(1) // armed before the next one asks: a known order
	}
	for i := range 4 {
		done := h.advance()
		if len(done) != 1 || done[0].id != i || done[0].at != t0.Add(time.Duration(i+1)*time.Second) {
			t.Fatalf("step %d: %+v, want waiter %d at +%ds", i, done, i, i+1)
		}
	}
}

// A large request is taken in burst-sized pieces, so a small one asked
// meanwhile is served between them instead of after all of it.
func TestLargeRequestInterleaves(t *testing.T) {
	h := newHarness(t, Schedule{Default: MiB})
	h.start(context.Background(), 1, 3*MiB) // pieces due at 1, 2, 3 s
	h.next(1)
	h.start(context.Background(), 2, MiB) // queued behind the first piece
	h.next(1)
	// +1 s: the first piece; the big one re-arms behind the small one.
	if done := h.advance(); len(done) != 0 {
		t.Fatalf("%+v returned at +1s", done)
	}
	var got []event
	for len(got) < 2 {
		got = append(got, h.advance()...)
	}
	if got[0].id != 2 || got[0].at != t0.Add(2*time.Second) || got[1].id != 1 || got[1].at != t0.Add(4*time.Second) {
		t.Errorf("got %+v; want the small request at +2s and the large one at +4s", got)
	}
}

func TestSetRateMidTransfer(t *testing.T) {
	h := newHarness(t, Schedule{Default: MiB})
	h.start(context.Background(), 1, MiB)
	h.next(1) // armed for +1s
	h.f.Advance(500 * time.Millisecond)
	// Half is covered at 1 MiB/s; the other half at 4 MiB/s takes 125 ms.
	h.l.SetRate(4 * MiB)
	h.woken() // re-armed
	if at := h.deadline(); at != t0.Add(625*time.Millisecond) {
		t.Fatalf("after SetRate the waiter waits until +%v, want +625ms", at.Sub(t0))
	}
	done := h.advance()
	if len(done) != 1 || done[0].at != t0.Add(625*time.Millisecond) {
		t.Fatalf("got %+v, want the waiter at +625ms", done)
	}

	// Unlimited releases a waiter at once.
	h.start(context.Background(), 2, 4*MiB)
	h.next(1)
	h.l.SetRate(0)
	if done := h.woken(); len(done) != 1 || done[0].at != t0.Add(625*time.Millisecond) {
		t.Fatalf("SetRate(0) did not release the waiter: %+v", done)
	}
	// Limited again, the bucket starts empty.
	h.l.SetRate(MiB)
	h.start(context.Background(), 3, MiB)
	h.next(1)
	if done := h.advance(); done[0].at != t0.Add(1625*time.Millisecond) {
		t.Fatalf("limited again: returned at +%v, want +1.625s", done[0].at.Sub(t0))
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	h := newHarness(t, Schedule{Default: MiB})
	ctx, cancel := context.WithCancel(context.Background())
	h.start(ctx, 1, MiB) // due at +1s
	h.next(1)
	h.start(context.Background(), 2, MiB) // due at +2s behind it
	h.next(1)
	h.f.Advance(250 * time.Millisecond)
	cancel()
	done := h.next(1)
	if len(done) != 1 || done[0].id != 1 || !errors.Is(done[0].err, context.Canceled) {
		t.Fatalf("cancel: got %+v, want waiter 1 with context.Canceled", done)
	}
	// The 0.75 MiB the refill had not covered went back: waiter 2 needs
	// 1 MiB after the 0.25 MiB already refilled, so it is due at +1.25s
	// once it recomputes (its old timer at +2s fires early enough to
	// find that, or the next advance does).
	h.l.SetRate(MiB) // wake it to recompute
	h.woken()
	if at := h.deadline(); at != t0.Add(1250*time.Millisecond) {
		t.Fatalf("after the cancel waiter 2 waits until +%v, want +1.25s", at.Sub(t0))
	}
	if done := h.advance(); len(done) != 1 || done[0].id != 2 || done[0].err != nil {
		t.Fatalf("got %+v", done)
	}
	// A cancelled context fails at once.
	if err := h.l.WaitN(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitN on a cancelled context: %v", err)
	}
}

// daily is a Period open every day from a UTC hour to another (a test
// stand-in for policy.Window, which the daemon's tests use).
type daily struct{ from, to int }

func (d daily) State(t time.Time) (bool, time.Time) {
	day := t.Truncate(24 * time.Hour)
	open, close := day.Add(time.Duration(d.from)*time.Hour), day.Add(time.Duration(d.to)*time.Hour)
	switch {
	case t.Before(open):
		return false, open
	case t.Before(close):
		return true, close
	default:
		return false, open.Add(24 * time.Hour)
	}
}

func TestScheduleAt(t *testing.T) {
	s := Schedule{Default: 100, Windows: []Window{{Period: daily{8, 18}, Rate: 10}, {Period: daily{12, 20}, Rate: 5}}}
	for _, tc := range []struct {
		at    time.Time
		rate  float64
		until time.Time
	}{
		{t0, 100, t0.Add(time.Hour)},                        // 07:00: default until 08:00
		{t0.Add(time.Hour), 10, t0.Add(5 * time.Hour)},      // 08:00: first window, until the second opens at 12:00
		{t0.Add(6 * time.Hour), 10, t0.Add(11 * time.Hour)}, // 13:00: both open, the first wins, until 18:00
		{t0.Add(11 * time.Hour), 5, t0.Add(13 * time.Hour)}, // 18:00: the second alone until 20:00
		{t0.Add(13 * time.Hour), 100, t0.Add(25 * time.Hour)},
	} {
		rate, until := s.At(tc.at)
		if rate != tc.rate || !until.Equal(tc.until) {
			t.Errorf("At(%s) = %v until %s, want %v until %s", tc.at.Format("15:04"), rate, until.Format("Mon 15:04"), tc.rate, tc.until.Format("Mon 15:04"))
		}
	}
	if !(Schedule{}).Unlimited() || s.Unlimited() || !(Schedule{Windows: []Window{{Period: daily{1, 2}}}}).Unlimited() {
		t.Error("Unlimited is wrong")
	}
}

// A transfer that straddles the window's opening is paced at the default
// rate until the edge and at the window's rate after it.
func TestScheduleSwitchesAtEdge(t *testing.T) {
	// 07:59:59: one second of 2 MiB/s left, then 1 MiB/s business hours.
	h := newHarness(t, Schedule{})
	h.f.Set(t0.Add(time.Hour - time.Second))
	h.reset(Schedule{Default: 2 * MiB, Windows: []Window{{Period: daily{8, 18}, Rate: MiB}}})
	h.start(context.Background(), 1, 3*MiB)
	// Pieces are one burst: 2 MiB at 2 MiB/s, due exactly at the edge.
	h.next(1)
	if at := h.deadline(); at != t0.Add(time.Hour) {
		t.Fatalf("first piece due at %s, want 08:00:00", at.Format("15:04:05.000"))
	}
	h.advance() // re-armed for the rest (1 MiB, the new burst) at 1 MiB/s
	done := h.advance()
	if len(done) != 1 || done[0].at != t0.Add(time.Hour+time.Second) {
		t.Fatalf("got %+v, want the transfer done at 08:00:01", done)
	}

	// A waiter armed before the window closes wakes at the edge and
	// finishes at the faster rate: 17:59:59.5, 1 MiB needed, 0.5 MiB at
	// 1 MiB/s by 18:00, the rest at 4 MiB/s.
	h.f.Set(t0.Add(11*time.Hour - 500*time.Millisecond))
	h.reset(Schedule{Default: 4 * MiB, Windows: []Window{{Period: daily{8, 18}, Rate: MiB}}})
	h.start(context.Background(), 2, MiB)
	h.next(1)
	if at := h.deadline(); at != t0.Add(11*time.Hour) {
		t.Fatalf("waiter not capped at the edge: due %s", at.Format("15:04:05.000"))
	}
	h.advance() // re-armed at the edge
	done = h.advance()
	if len(done) != 1 || done[0].at != t0.Add(11*time.Hour+125*time.Millisecond) {
		t.Fatalf("got %+v, want 18:00:00.125", done)
	}
	if r := h.l.Rate(); r != 4*MiB {
		t.Errorf("Rate after the window = %v", r)
	}
}
