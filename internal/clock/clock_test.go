package clock

import (
	"testing"
	"time"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestFakeTimersFireInOrderOnAdvance(t *testing.T) {
	f := NewFake(epoch)
	a := f.NewTimer(2 * time.Hour)
	b := f.NewTimer(time.Hour)
	c := f.NewTimer(3 * time.Hour)
	if f.Pending() != 3 {
		t.Fatalf("pending = %d, want 3", f.Pending())
	}
	if at, ok := f.NextDeadline(); !ok || !at.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("next deadline = %v %v", at, ok)
	}
	f.Advance(90 * time.Minute)
	select {
	case got := <-b.C():
		if !got.Equal(epoch.Add(90 * time.Minute)) {
			t.Fatalf("b fired with %v", got)
		}
	default:
		t.Fatal("b did not fire")
	}
	select {
	case <-a.C():
		t.Fatal("a fired early")
	default:
	}
	if !c.Stop() {
		t.Fatal("stop of pending timer reported false")
	}
	if c.Stop() {
		t.Fatal("second stop reported true")
	}
	f.Set(epoch.Add(10 * time.Hour))
	select {
	case <-a.C():
	default:
		t.Fatal("a did not fire on Set")
	}
	select {
	case <-c.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if f.Pending() != 0 {
		t.Fatalf("pending = %d after all fired", f.Pending())
	}
	if got := f.Since(epoch); got != 10*time.Hour {
		t.Fatalf("since = %v", got)
	}
}

func TestFakeZeroDurationFiresImmediately(t *testing.T) {
	f := NewFake(epoch)
	select {
	case <-f.After(0):
	default:
		t.Fatal("After(0) did not fire")
	}
}

func TestFakeBlockUntil(t *testing.T) {
	f := NewFake(epoch)
	armed := make(chan struct{})
	go func() {
		<-armed
		f.NewTimer(time.Minute)
	}()
	close(armed)
	if !f.BlockUntil(1, nil) {
		t.Fatal("BlockUntil returned false")
	}
	done := make(chan struct{})
	close(done)
	if f.BlockUntil(5, done) {
		t.Fatal("BlockUntil(5) reached with one timer")
	}
}

func TestRealClock(t *testing.T) {
	c := Real()
	before := c.Now()
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if c.Since(before) <= 0 {
		t.Fatal("real clock did not move")
	}
	<-c.After(time.Millisecond)
}
