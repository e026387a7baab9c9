package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

func TestTTL(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	var n atomic.Int32
	c := New(10*time.Second, func(ctx context.Context, k string) (int, error) {
		return int(n.Add(1)), nil
	}, WithClock(clk))
	ctx := context.Background()
	tests := []struct {
		name    string
		advance time.Duration
		key     string
		want    int
	}{
		{"first read loads", 0, "a", 1},
		{"within the TTL is cached", 9 * time.Second, "a", 1},
		{"another key loads", 0, "b", 2},
		{"at the TTL loads again", time.Second, "a", 3},
	}
	for _, tc := range tests {
		clk.Advance(tc.advance)
		got, err := c.Get(ctx, tc.key)
		if err != nil || got != tc.want {
			t.Fatalf("%s: Get(%q) = %d, %v; want %d", tc.name, tc.key, got, err, tc.want)
		}
	}
	c.Invalidate("a")
	if got, _ := c.Get(ctx, "a"); got != 4 {
		t.Fatalf("after Invalidate: %d, want a new load (4)", got)
	}
	clk.Advance(20 * time.Second)
	if got, _ := c.Get(ctx, "a"); got != 5 {
		t.Fatalf("after the TTL: %d, want a new load (5)", got)
	}
	if c.Loads() != 5 {
		t.Fatalf("Loads = %d, want 5", c.Loads())
	}
	// "b" expired long ago and was dropped when "a" was stored.
	c.mu.Lock()
	_, kept := c.entries["b"]
	c.mu.Unlock()
	if kept {
		t.Error("an expired entry was kept after a later store")
	}
}

func TestFailedLoadNotCached(t *testing.T) {
	fail := true
	c := New(time.Hour, func(ctx context.Context, k int) (string, error) {
		if fail {
			return "", errors.New("vCenter away")
		}
		return "ok", nil
	})
	if _, err := c.Get(context.Background(), 1); err == nil {
		t.Fatal("want the load's error")
	}
	fail = false
	if v, err := c.Get(context.Background(), 1); err != nil || v != "ok" {
		t.Fatalf("after a failure: %q, %v; want a fresh load", v, err)
	}
}

func TestConcurrentMissesShareOneLoad(t *testing.T) {
	release := make(chan struct{})
	var loads atomic.Int32
	c := New(time.Hour, func(ctx context.Context, k string) (int, error) {
		loads.Add(1)
		<-release
		return 7, nil
	})
	const callers = 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			v, err := c.Get(context.Background(), "inv")
			if err == nil && v != 7 {
				err = errors.New("wrong value")
			}
			errs <- err
		})
	}
	// Every caller is waiting on the one load before it finishes.
	for {
		c.mu.Lock()
		n := len(c.inflight)
		c.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if loads.Load() != 1 {
		t.Fatalf("%d loads for %d concurrent callers, want 1", loads.Load(), callers)
	}
}

func TestCallerCancelDoesNotFailOthers(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	c := New(time.Hour, func(ctx context.Context, k string) (int, error) {
		close(started)
		select {
		case <-release:
			return 1, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	first, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Get(first, "k"); done <- err }()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v, want context.Canceled", err)
	}
	second := make(chan int, 1)
	go func() { v, _ := c.Get(context.Background(), "k"); second <- v }()
	close(release)
	if v := <-second; v != 1 {
		t.Fatalf("second caller got %d: the first caller's cancel reached the shared load", v)
	}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}
