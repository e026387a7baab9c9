package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
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

// sseClient reads one /stream connection.
type sseClient struct {
	res     *http.Response
	events  chan sseEvent
	cancel  context.CancelFunc
	skipped []sseEvent // passed over by next
}

type sseEvent struct {
	name, data string
}

func (f *fixture) openStream(t *testing.T, opt reqOpt) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/api/v1/stream", nil)
	opt(req)
	res, err := f.http.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	c := &sseClient{res: res, events: make(chan sseEvent, 1000), cancel: cancel}
	go func() {
		defer close(c.events)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ": "):
				c.events <- sseEvent{name: "comment", data: line[2:]}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			case line == "" && ev.name != "":
				c.events <- ev
				ev = sseEvent{}
			}
		}
	}()
	return c
}

// next returns the next event of a kind (skipping others), or fails.
func (c *sseClient) next(t *testing.T, name string) sseEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatalf("stream ended while waiting for %q", name)
			}
			if ev.name == name {
				return ev
			}
			c.skipped = append(c.skipped, ev)
		case <-timeout:
			t.Fatalf("no %q event", name)
		}
	}
}

// ended waits for the stream to end and returns the events it still got.
func (c *sseClient) ended(t *testing.T) []sseEvent {
	t.Helper()
	var rest []sseEvent
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return rest
			}
			rest = append(rest, ev)
		case <-timeout:
			t.Fatal("stream did not end")
		}
	}
}

// nextTask returns the next "task" event of the stream, which must be about id.
func nextTask(t *testing.T, c *sseClient, id string) task.Info {
	t.Helper()
	var ti task.Info
	if err := json.Unmarshal([]byte(c.next(t, "task").data), &ti); err != nil {
		t.Fatal(err)
	}
	if ti.ID != id {
		t.Fatalf("task %s, want %s", ti.ID, id)
	}
	return ti
}

func waitGoroutines(t *testing.T, max int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if runtime.NumGoroutine() <= max {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	t.Fatalf("%d goroutines, want <= %d:\n%s", runtime.NumGoroutine(), max, buf[:n])
}

func TestStream(t *testing.T) {
	// A registry that passes every progress report on: the stream's own
	// throttle is what keeps clients at 4 a second per task.
	fast := task.New(task.Config{ProgressEvery: time.Nanosecond})
	t.Cleanup(func() { fast.Close(context.Background()) })
	f := newFixture(t, func(c *Config) { c.StreamKeepAlive = 50 * time.Millisecond; c.Tasks = fast })
	f.http.Client().Transport.(*http.Transport).DisableKeepAlives = true
	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	before := runtime.NumGoroutine()

	a := f.openStream(t, ro)
	sess, _ := f.login(t, "admin", testAdminPassword)
	b := f.openStream(t, sess) // a browser session (GET: no CSRF needed, sent anyway)
	a.next(t, "comment")       // connected
	waitStreams(t, f, 2)

	// Task updates: queued, running, progress (throttled on the server's
	// clock, f.clk), final state. Running starts the task's interval: a
	// progress report is held until the fake clock passes it, then sent;
	// reports held when the task ends are dropped (the final state carries
	// the progress).
	steps := make(chan int64)
	var endTask sync.Once // the task ends even when the test fails midway
	defer endTask.Do(func() { close(steps) })
	info, err := fast.Start("check", "main", func(ctx context.Context, rep *task.Reporter) (any, error) {
		for n := range steps {
			rep.Progress("read", n, 400)
		}
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	timers := f.clk.Pending()
	steps <- 1
	// Both streams hold it and arm a flush timer on the fake clock.
	wait, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	if !f.clk.BlockUntil(timers+2, wait.Done()) {
		t.Fatal("the streams armed no flush timer on the server's clock")
	}
	f.clk.Advance(streamTaskEvery)
	var progress [2][]int64
	for i, c := range []*sseClient{a, b} {
		for len(progress[i]) == 0 {
			ti := nextTask(t, c, info.ID)
			if ti.State == task.Running && ti.Progress.Done > 0 {
				progress[i] = append(progress[i], ti.Progress.Done)
			}
		}
	}
	steps <- 2 // held: the clock has not moved since the last send
	steps <- 3
	endTask.Do(func() { close(steps) })
	for i, c := range []*sseClient{a, b} {
		for {
			ti := nextTask(t, c, info.ID)
			if ti.State.Final() {
				if ti.State != task.Succeeded {
					t.Fatalf("final state %s", ti.State)
				}
				break
			}
			if ti.Progress.Done > 0 {
				progress[i] = append(progress[i], ti.Progress.Done)
			}
		}
		if !slices.Equal(progress[i], []int64{1}) {
			t.Fatalf("stream %d: progress events %v, want [1] (2 and 3 held by the throttle until the task ended)", i, progress[i])
		}
	}

	// Scheduler events.
	f.srv.ObserveEvent(policy.Event{Time: f.clk.Now(), Severity: policy.SeverityError, Kind: policy.EventVMFailed, Subject: "web01", Message: "snapshot failed"})
	for _, c := range []*sseClient{a, b} {
		var e policy.Event
		if err := json.Unmarshal([]byte(c.next(t, "event").data), &e); err != nil || e.Message != "snapshot failed" {
			t.Fatalf("event %+v %v", e, err)
		}
		if ev := c.next(t, "comment"); ev.data != "keepalive" {
			t.Fatalf("comment %q", ev.data)
		}
	}

	// Client disconnect releases the subscriptions.
	a.cancel()
	a.ended(t)
	waitStreams(t, f, 1)

	// Server shutdown (Close) ends the remaining stream; nothing is left running.
	f.srv.Close()
	b.ended(t)
	waitStreams(t, f, 0)
	if n := fast.Subscribers(); n != 0 {
		t.Fatalf("task subscribers left: %d", n)
	}
	f.http.CloseClientConnections()
	waitGoroutines(t, before)
	// After Close, a new stream ends at once.
	c := f.openStream(t, ro)
	c.ended(t)
}

// Closing the task registry (the daemon does it at shutdown) ends streams
// with an error event telling clients to reconnect.
func TestStreamEndsWithRegistry(t *testing.T) {
	f := newFixture(t, nil)
	c := f.openStream(t, bearer(f.tokens[auth.RoleRestoreOnly]))
	waitStreams(t, f, 1)
	if err := f.tasks.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rest := c.ended(t)
	if len(rest) == 0 || rest[len(rest)-1].name != "error" {
		t.Fatalf("last events %+v", rest)
	}
	waitStreams(t, f, 0)
}

// A subscriber that does not read is dropped by the event hub without
// blocking publishers; the others keep receiving.
func TestEventHubDropsSlow(t *testing.T) {
	h := newEventHub()
	slow, _ := h.subscribe(2)
	fast, unsub := h.subscribe(100)
	defer unsub()
	done := make(chan struct{})
	go func() {
		for i := range 50 {
			h.publish(policy.Event{Message: string(rune('a' + i%26))})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publish blocked on a slow subscriber")
	}
	n := 0
	for range slow {
		n++
	}
	if n != 2 {
		t.Fatalf("slow subscriber got %d events before being dropped, buffer 2", n)
	}
	if len(fast) != 50 || h.count() != 1 {
		t.Fatalf("fast got %d, subscribers %d", len(fast), h.count())
	}
	h.close()
	if _, ok := <-fast; !ok {
		t.Fatal("buffered events are still delivered after close")
	}
	if ch, _ := h.subscribe(1); ch != nil {
		if _, ok := <-ch; ok {
			t.Fatal("subscribe after close must be closed")
		}
	}
}

func waitStreams(t *testing.T, f *fixture, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f.srv.Streams() == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("streams %d, want %d", f.srv.Streams(), n)
}

// blockingRunner is the backup engine's side of policy.Runner for web's
// tests: it reports progress and waits to be released.
type blockingRunner struct {
	started chan string
	release chan struct{}
}

func (b *blockingRunner) RunBackup(ctx context.Context, job policy.Job, vm policy.VM, progress func(policy.Progress)) (policy.BackupResult, error) {
	progress(policy.Progress{Phase: "disk 1/1", BytesDone: 1 << 20, BytesTotal: 4 << 20})
	b.started <- vm.Name
	select {
	case <-b.release:
		return policy.BackupResult{PointID: "0123456789abcdef", Bytes: 4 << 20}, nil
	case <-ctx.Done():
		return policy.BackupResult{}, ctx.Err()
	}
}

// The scheduler's backups are not registry tasks: the dashboard and the
// stream show them from the scheduler's status, with their progress, and
// the stream says when the scheduler goes idle.
func TestSchedulerActivity(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.admin("POST", "/api/v1/jobs", validJob("nightly")); r.status != 201 {
		t.Fatal(r.status)
	}
	runner := &blockingRunner{started: make(chan string, 1), release: make(chan struct{})}
	sched, err := policy.New(policy.Config{Clock: clock.Real(), Store: f.db, Runner: runner, Inventory: f.inv, OnEvent: f.srv.ObserveEvent})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f.srv.cfg.Scheduler = sched

	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	c := f.openStream(t, ro)
	defer c.cancel()
	if r := f.do("POST", "/api/v1/jobs/nightly/run", nil, bearer(f.tokens[auth.RoleOperator])); r.status != 202 {
		t.Fatalf("run now: %d %s", r.status, r.body)
	}
	select {
	case <-runner.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the backup did not start")
	}
	var a Activity
	if err := json.Unmarshal([]byte(c.next(t, "scheduler").data), &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Backups) != 1 || a.Backups[0].VM != "web01" || a.Backups[0].Job != "nightly" || a.Backups[0].Done != 1<<20 || a.Backups[0].Total != 4<<20 || a.Backups[0].Run == "" {
		t.Fatalf("activity %+v", a)
	}
	var d Dashboard
	f.do("GET", "/api/v1/dashboard", nil, ro).json(t, &d)
	if len(d.Scheduler.Backups) != 1 || d.Scheduler.Backups[0].InstanceUUID != testVM.InstanceUUID {
		t.Fatalf("dashboard scheduler %+v", d.Scheduler)
	}
	close(runner.release)
	if err := json.Unmarshal([]byte(c.next(t, "scheduler").data), &a); err != nil || len(a.Backups) != 0 {
		t.Fatalf("after the backup: %+v %v", a, err)
	}
	// The run is in the job's history.
	var runs []JobRunView
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.do("GET", "/api/v1/jobs/nightly/runs", nil, ro).json(t, &runs)
		if len(runs) == 1 && runs[0].State == "succeeded" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(runs) != 1 || runs[0].State != "succeeded" || runs[0].Trigger != "manual" || len(runs[0].VMs) != 1 || runs[0].VMs[0].RestorePoint != "0123456789abcdef" {
		t.Fatalf("runs %+v", runs)
	}
	// And the scheduler's events reached the stream.
	kinds := map[string]bool{}
	for _, ev := range c.skipped {
		var e policy.Event
		if ev.name == "event" && json.Unmarshal([]byte(ev.data), &e) == nil && e.Job == "nightly" {
			kinds[e.Kind] = true
		}
	}
	if !kinds[policy.EventJobStarted] {
		t.Fatalf("scheduler events on the stream: %v (all: %+v)", kinds, c.skipped)
	}
}
