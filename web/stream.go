package web

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
)

const (
	// streamBuffer bounds what one /stream subscriber may fall behind, per
	// source (tasks, events), before it is dropped.
	streamBuffer = 256
	// streamTaskEvery is the fastest a /stream client sees one task's
	// progress: 4 per second, whatever the registry's own throttle.
	streamTaskEvery = 250 * time.Millisecond
	// streamActivityEvery is how often /stream looks at the scheduler's
	// running backups and maintenance (polled: they are not registry tasks).
	streamActivityEvery = time.Second
)

// throttle holds back a task's progress so a /stream client sees at most
// one progress update per interval per task: a report that comes too soon
// is kept (the latest wins) until it is due. State changes always pass.
// It reads time from the server's clock, so tests drive it with clock.Fake.
type throttle struct {
	clk      clock.Clock
	every    time.Duration
	lastSent map[string]time.Time
	pending  map[string]task.Info // progress held back
}

func newThrottle(clk clock.Clock, every time.Duration) *throttle {
	return &throttle{clk: clk, every: every, lastSent: map[string]time.Time{}, pending: map[string]task.Info{}}
}

// offer takes a task update and says whether to send it now; a progress
// update that comes too soon is held instead, and wait says when it is due.
func (t *throttle) offer(u task.Update) (send bool, wait time.Duration) {
	id := u.Task.ID
	now := t.clk.Now()
	if u.Type == "progress" {
		if last, ok := t.lastSent[id]; ok && now.Sub(last) < t.every {
			t.pending[id] = u.Task
			return false, t.every - now.Sub(last)
		}
	}
	delete(t.pending, id)
	if u.Task.State.Final() {
		delete(t.lastSent, id)
	} else {
		t.lastSent[id] = now
	}
	return true, 0
}

// due returns the held updates whose interval has passed (and forgets
// them) and how long until the next held one is due (0: none held).
func (t *throttle) due() (ready []task.Info, wait time.Duration) {
	now := t.clk.Now()
	for id, info := range t.pending {
		if left := t.every - now.Sub(t.lastSent[id]); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		delete(t.pending, id)
		t.lastSent[id] = now
		ready = append(ready, info)
	}
	return ready, wait
}

// eventHub fans the scheduler's events out to /stream subscribers. publish
// never blocks: a subscriber whose buffer is full is dropped (its channel
// closed), like the task registry does.
type eventHub struct {
	mu     sync.Mutex
	subs   map[chan policy.Event]struct{}
	closed bool
}

func newEventHub() *eventHub { return &eventHub{subs: map[chan policy.Event]struct{}{}} }

func (h *eventHub) subscribe(buffer int) (<-chan policy.Event, func()) {
	ch := make(chan policy.Event, buffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	h.subs[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

func (h *eventHub) publish(e policy.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- e:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

func (h *eventHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Streams returns how many /stream clients are connected (for tests and
// metrics): each holds one event subscription.
func (s *Server) Streams() int { return s.hub.count() }

// Close ends every /stream and task event stream (the daemon calls it, or
// closes the task registry, before shutting the HTTP server down: streams
// never end by themselves). Requests keep being served.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.hub.close()
	})
}

// idleActivity is the JSON of a scheduler doing nothing.
const idleActivity = `{"backups":[],"maintenance":[]}`

// stream is GET /stream: "task" events (a task's snapshot, as GET
// /tasks/{id} without the log) on every state change and at most 4 progress
// updates a second per task, "event" events as the scheduler records them,
// "scheduler" (its running backups with their progress, and maintenance:
// polled once a second, sent when changed, once more when it goes idle),
// and a keepalive comment when idle. A client that falls behind gets an
// "error" event and the stream ends; it reconnects and reloads what it shows.
func (s *Server) stream(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	// A scoped principal's stream leaves out what its scope does not allow
	// (judged on the inventory as the stream starts, refreshed every 15 s).
	scoped := principal(c).Scoped()
	judge := func() *scopeJudge {
		if !scoped {
			return nil
		}
		return s.newJudge(ctx, principal(c))
	}
	j := judge()
	jAt := s.cfg.Clock.Now()
	refresh := func() *scopeJudge {
		if scoped && s.cfg.Clock.Now().Sub(jAt) >= scopeInvTTL {
			j, jAt = judge(), s.cfg.Clock.Now()
		}
		return j
	}
	tasks, unsubTasks := s.cfg.Tasks.SubscribeAll(streamBuffer)
	defer unsubTasks()
	events, unsubEvents := s.hub.subscribe(streamBuffer)
	defer unsubEvents()

	sse := startSSE(c.Writer)
	send := sse.send
	// The retry hint and a first comment tell the client it is connected.
	if _, err := fmt.Fprint(c.Writer, "retry: 3000\n"); err != nil || !sse.comment("connected") {
		return nil, nil
	}
	keep := time.NewTicker(s.keepAlive)
	defer keep.Stop()
	activity := time.NewTicker(streamActivityEvery)
	defer activity.Stop()
	var lastActivity []byte // what the client last got (nil: nothing yet)
	thr := newThrottle(s.cfg.Clock, streamTaskEvery)
	// flush is armed on the server's clock while the throttle holds
	// progress back, and nil otherwise (a nil channel never fires).
	var flush clock.Timer
	var flushC <-chan time.Time
	var flushAt time.Time
	defer func() {
		if flush != nil {
			flush.Stop()
		}
	}()
	arm := func(wait time.Duration) { // fire by now+wait (no-op for 0)
		if wait <= 0 {
			return
		}
		at := s.cfg.Clock.Now().Add(wait)
		if flush != nil {
			if !at.Before(flushAt) {
				return
			}
			flush.Stop()
		}
		flush, flushAt = s.cfg.Clock.NewTimer(wait), at
		flushC = flush.C()
	}
	dropped := func() {
		send("error", ErrorDetail{Code: "too_slow", Message: "the stream fell behind or the appliance is stopping; reconnect"})
	}
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-s.done:
			return nil, nil
		case <-keep.C:
			if !sse.comment("keepalive") {
				return nil, nil
			}
		case <-activity.C:
			// "scheduler" while the scheduler works, once more when it stops.
			b, err := json.Marshal(filterActivity(refresh(), s.activity()))
			if err != nil || string(b) == string(lastActivity) || (lastActivity == nil && string(b) == idleActivity) {
				continue
			}
			lastActivity = b
			if !sse.raw("scheduler", b) {
				return nil, nil
			}
		case <-flushC:
			flush, flushC = nil, nil
			ready, wait := thr.due()
			for _, info := range ready {
				if !s.allowsTask(ctx, refresh(), info) {
					continue
				}
				if !send("task", info) {
					return nil, nil
				}
			}
			arm(wait)
		case u, ok := <-tasks:
			if !ok {
				dropped()
				return nil, nil
			}
			if !s.allowsTask(ctx, refresh(), u.Task) {
				continue
			}
			if now, wait := thr.offer(u); !now {
				arm(wait)
				continue
			}
			if !send("task", u.Task) {
				return nil, nil
			}
		case e, ok := <-events:
			if !ok {
				select {
				case <-s.done:
				default:
					dropped()
				}
				return nil, nil
			}
			if !refresh().allowsEvent(e) {
				continue
			}
			if !send("event", e) {
				return nil, nil
			}
		}
	}
}
