package task

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func newStore(t *testing.T) *BoltStore {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "web.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := NewBoltStore(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitFinal(t *testing.T, r *Registry, id string) Info {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, err := r.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Final() {
			return info
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("task %s did not finish", id)
	return Info{}
}

func TestOutcomes(t *testing.T) {
	store := newStore(t)
	r := New(Config{Store: store})
	defer r.Close(context.Background())
	boom := errors.New("boom")
	tests := []struct {
		name  string
		fn    Func
		state State
		err   string
	}{
		{"ok", func(ctx context.Context, p *Reporter) (any, error) { return map[string]int{"n": 1}, nil }, Succeeded, ""},
		{"fail", func(ctx context.Context, p *Reporter) (any, error) { return nil, boom }, Failed, "boom"},
		{"panic", func(ctx context.Context, p *Reporter) (any, error) { panic("bad") }, Failed, "task panicked: bad"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := r.Start("test", tc.name, tc.fn)
			if err != nil {
				t.Fatal(err)
			}
			got := waitFinal(t, r, info.ID)
			if got.State != tc.state || got.Error != tc.err {
				t.Fatalf("state %s err %q, want %s %q", got.State, got.Error, tc.state, tc.err)
			}
			// The summary is persisted once finished.
			deadline := time.Now().Add(5 * time.Second)
			for {
				st, err := store.Task(context.Background(), info.ID)
				if err == nil && st.State == tc.state {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("final state not stored: %+v %v", st, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	if _, err := r.Get(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestCancelAndQueue(t *testing.T) {
	r := New(Config{MaxRunning: 1})
	started := make(chan struct{})
	block := func(ctx context.Context, p *Reporter) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, fmt.Errorf("work: %w", ctx.Err())
	}
	a, _ := r.Start("test", "a", block)
	<-started
	b, _ := r.Start("test", "b", func(ctx context.Context, p *Reporter) (any, error) { return nil, nil })
	if got, _ := r.Get(context.Background(), b.ID); got.State != Queued {
		t.Fatalf("second task should wait: %s", got.State)
	}
	if err := r.Cancel(b.ID); err != nil {
		t.Fatal(err)
	}
	if got := waitFinal(t, r, b.ID); got.State != Cancelled {
		t.Fatalf("queued cancel: %s", got.State)
	}
	if err := r.Cancel(a.ID); err != nil {
		t.Fatal(err)
	}
	if got := waitFinal(t, r, a.ID); got.State != Cancelled {
		t.Fatalf("running cancel: %s %s", got.State, got.Error)
	}
	if err := r.Cancel(a.ID); !errors.Is(err, ErrFinished) {
		t.Fatalf("cancel finished: %v", err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start("x", "y", block); !errors.Is(err, ErrClosed) {
		t.Fatalf("start after close: %v", err)
	}
}

func TestLogRingAndProgress(t *testing.T) {
	r := New(Config{MaxLogLines: 3, ProgressEvery: time.Nanosecond})
	defer r.Close(context.Background())
	release := make(chan struct{})
	info, _ := r.Start("t", "s", func(ctx context.Context, p *Reporter) (any, error) {
		for i := range 5 {
			p.Logf("line %d", i)
		}
		time.Sleep(2 * time.Millisecond)
		p.Progress("copy", 50, 100)
		<-release
		return nil, nil
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := r.Get(context.Background(), info.ID)
		if got.Progress.Done == 50 {
			if got.Progress.Rate <= 0 || got.Progress.ETASeconds <= 0 || got.Progress.Phase != "copy" {
				t.Fatalf("progress %+v", got.Progress)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no progress")
		}
		time.Sleep(time.Millisecond)
	}
	logs, _ := r.Logs(info.ID)
	if len(logs) != 3 || logs[0].Message != "line 2" || logs[2].Message != "line 4" {
		t.Fatalf("ring: %+v", logs)
	}
	close(release)
	waitFinal(t, r, info.ID)
}

// A subscriber that never reads is dropped; one that reads sees the final state.
func TestSubscribers(t *testing.T) {
	r := New(Config{SubBuffer: 4, ProgressEvery: time.Nanosecond})
	defer r.Close(context.Background())
	gate := make(chan struct{})
	info, _ := r.Start("t", "s", func(ctx context.Context, p *Reporter) (any, error) {
		<-gate
		for i := range 100 {
			p.Progress("x", int64(i), 100)
			p.Logf("l%d", i)
		}
		return "done", nil
	})
	_, _, slow, unsubSlow, err := r.Subscribe(context.Background(), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubSlow()
	_, _, fast, unsub, _ := r.Subscribe(context.Background(), info.ID)
	defer unsub()
	var last Update
	var wg sync.WaitGroup
	wg.Add(1)
	n := 0
	go func() {
		defer wg.Done()
		for u := range fast {
			last = u
			n++
		}
	}()
	close(gate)
	wg.Wait() // closed: either finished or dropped
	final := waitFinal(t, r, info.ID)
	if final.Result != "done" {
		t.Fatalf("result %v", final.Result)
	}
	count := 0
	for range slow {
		count++
	}
	if count > 4 {
		t.Fatalf("slow subscriber got %d updates, buffer is 4", count)
	}
	if n == 0 || (last.Type == "state" && last.Task.State != Succeeded) {
		t.Fatalf("fast subscriber: %d updates, last %+v", n, last)
	}
	// Subscribing to a finished task yields a closed channel and the snapshot.
	snap, _, ch, _, err := r.Subscribe(context.Background(), info.ID)
	if err != nil || snap.State != Succeeded {
		t.Fatalf("late subscribe: %v %s", err, snap.State)
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel should be closed")
	}
}

func TestListMergesStore(t *testing.T) {
	store := newStore(t)
	old := Info{ID: "0000000000000001-aaaa", Kind: "check", State: Succeeded}
	if err := store.PutTask(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	r := New(Config{Store: store})
	defer r.Close(context.Background())
	info, _ := r.Start("t", "s", func(ctx context.Context, p *Reporter) (any, error) { return nil, nil })
	waitFinal(t, r, info.ID)
	list, err := r.List(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != info.ID || list[1].ID != old.ID {
		t.Fatalf("list %+v", list)
	}
	if got, err := r.Get(context.Background(), old.ID); err != nil || got.Kind != "check" {
		t.Fatalf("get stored: %v %+v", err, got)
	}
}

// Tasks a crashed process left queued or running are closed as interrupted.
func TestRecover(t *testing.T) {
	store := newStore(t)
	ctx := context.Background()
	for _, st := range []State{Queued, Running, Succeeded} {
		if err := store.PutTask(ctx, Info{ID: "000000000000000" + string(st[0]) + "-x", Kind: "backup", State: st}); err != nil {
			t.Fatal(err)
		}
	}
	r := New(Config{Store: store})
	defer r.Close(ctx)
	n, err := r.Recover(ctx)
	if err != nil || n != 2 {
		t.Fatalf("recovered %d: %v", n, err)
	}
	all, _ := store.Tasks(ctx, 0)
	for _, ti := range all {
		if !ti.State.Final() || (ti.State == Failed && ti.Error != Interrupted) {
			t.Fatalf("after recover: %+v", ti)
		}
	}
	// A task started now is stored at once, before it finishes.
	release := make(chan struct{})
	info, _ := r.Start("t", "s", func(ctx context.Context, p *Reporter) (any, error) { <-release; return nil, nil })
	if st, err := store.Task(ctx, info.ID); err != nil || st.State != Queued {
		t.Fatalf("not stored at start: %+v %v", st, err)
	}
	close(release)
	waitFinal(t, r, info.ID)
}

// SubscribeAll sees every task's state changes and progress but no log
// lines; a subscriber that does not read is dropped once its buffer is
// full without slowing the task; unsubscribe and Close leave none behind.
func TestSubscribeAll(t *testing.T) {
	r := New(Config{ProgressEvery: time.Nanosecond})
	fast, unsubFast := r.SubscribeAll(1000)
	slow, unsubSlow := r.SubscribeAll(3)
	defer unsubSlow()
	gone, unsubGone := r.SubscribeAll(10)
	if n := r.Subscribers(); n != 3 {
		t.Fatalf("subscribers %d", n)
	}
	unsubGone()
	unsubGone() // twice is harmless
	if _, ok := <-gone; ok {
		t.Fatal("unsubscribed channel still open")
	}
	var ids []string
	for i := range 2 {
		info, err := r.Start("t", fmt.Sprint(i), func(ctx context.Context, p *Reporter) (any, error) {
			for j := range 10 {
				p.Progress("copy", int64(j+1), 10)
				p.Logf("line %d", j)
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	for _, id := range ids {
		waitFinal(t, r, id)
	}
	seen := map[string][]State{}
	progress := 0
	deadline := time.After(5 * time.Second)
	for done := 0; done < 2; {
		select {
		case u := <-fast:
			switch u.Type {
			case "state":
				seen[u.Task.ID] = append(seen[u.Task.ID], u.Task.State)
				if u.Task.State.Final() {
					done++
				}
			case "progress":
				progress++
			default:
				t.Fatalf("unexpected update type %q", u.Type)
			}
		case <-deadline:
			t.Fatalf("missing updates: %v", seen)
		}
	}
	for _, id := range ids {
		if got := seen[id]; len(got) != 3 || got[0] != Queued || got[1] != Running || got[2] != Succeeded {
			t.Fatalf("task %s states %v", id, got)
		}
	}
	if progress == 0 {
		t.Fatal("no progress updates")
	}
	n := 0
	for range slow { // closed when it fell behind
		n++
	}
	if n > 3 {
		t.Fatalf("slow subscriber got %d updates, buffer 3", n)
	}
	if got := r.Subscribers(); got != 1 {
		t.Fatalf("subscribers after the slow one was dropped: %d", got)
	}
	_ = unsubFast
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range fast {
	}
	if got := r.Subscribers(); got != 0 {
		t.Fatalf("subscribers after Close: %d", got)
	}
	if ch, _ := r.SubscribeAll(1); ch != nil {
		if _, ok := <-ch; ok {
			t.Fatal("SubscribeAll after Close must be closed")
		}
	}
}
