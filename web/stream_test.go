package web

import (
	"slices"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/task"
)

// TestStreamThrottle drives the /stream throttle on a fake clock: the
// first progress of a task passes, later ones within 250 ms are held (the
// latest wins) until due, state changes always pass and drop what is held,
// and tasks are throttled independently.
func TestStreamThrottle(t *testing.T) {
	progress := func(id string, done int64) task.Update {
		return task.Update{Type: "progress", Task: task.Info{ID: id, State: task.Running, Progress: task.Progress{Done: done}}}
	}
	state := func(id string, s task.State, done int64) task.Update {
		return task.Update{Type: "state", Task: task.Info{ID: id, State: s, Progress: task.Progress{Done: done}}}
	}
	type step struct {
		advance time.Duration
		offer   *task.Update
		send    bool          // offer: sent at once
		wait    time.Duration // offer held: due in
		due     []int64       // due(): the Done of what is released (nil: nothing)
		dueWait time.Duration // due(): time to the next held one
	}
	offer := func(u task.Update, send bool, wait time.Duration) step {
		return step{offer: &u, send: send, wait: wait}
	}
	due := func(wait time.Duration, done ...int64) step { return step{due: done, dueWait: wait} }
	advance := func(d time.Duration) step { return step{advance: d} }
	ms := time.Millisecond

	cases := []struct {
		name  string
		steps []step
	}{
		{"first progress passes, the next is held until due", []step{
			offer(progress("a", 1), true, 0),
			offer(progress("a", 2), false, 250*ms),
			due(250 * ms),
			advance(100 * ms),
			offer(progress("a", 3), false, 150*ms), // the latest replaces the held one
			due(150 * ms),
			advance(149 * ms),
			due(1 * ms),
			advance(1 * ms),
			due(0, 3),
			due(0), // released once
			offer(progress("a", 4), false, 250*ms),
		}},
		{"progress after the interval passes at once", []step{
			offer(progress("a", 1), true, 0),
			advance(250 * ms),
			offer(progress("a", 2), true, 0),
			offer(progress("a", 3), false, 250*ms),
		}},
		{"a state change passes and drops the held progress", []step{
			offer(progress("a", 1), true, 0),
			offer(progress("a", 2), false, 250*ms),
			offer(state("a", task.Succeeded, 2), true, 0),
			advance(time.Second),
			due(0),
			// A final task is forgotten: a reused id starts afresh.
			offer(progress("a", 9), true, 0),
		}},
		{"a non-final state restarts the interval", []step{
			offer(state("a", task.Running, 0), true, 0),
			offer(progress("a", 1), false, 250*ms),
		}},
		{"tasks are throttled independently", []step{
			offer(progress("a", 1), true, 0),
			advance(100 * ms),
			offer(progress("b", 10), true, 0),
			offer(progress("a", 2), false, 150*ms),
			offer(progress("b", 11), false, 250*ms),
			advance(150 * ms),
			due(100*ms, 2),
			advance(100 * ms),
			due(0, 11),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			thr := newThrottle(clk, streamTaskEvery)
			for i, s := range c.steps {
				switch {
				case s.advance > 0:
					clk.Advance(s.advance)
				case s.offer != nil:
					send, wait := thr.offer(*s.offer)
					if send != s.send || wait != s.wait {
						t.Fatalf("step %d: offer(%s %d) = %v, %v; want %v, %v", i, s.offer.Task.ID, s.offer.Task.Progress.Done, send, wait, s.send, s.wait)
					}
				default:
					ready, wait := thr.due()
					var done []int64
					for _, r := range ready {
						done = append(done, r.Progress.Done)
					}
					if !slices.Equal(done, s.due) || wait != s.dueWait {
						t.Fatalf("step %d: due() = %v, %v; want %v, %v", i, done, wait, s.due, s.dueWait)
					}
				}
			}
		})
	}
}
