package repository

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLockNamesHolderAndRetries: a refused Open names the holder (who, PID,
// host, since); with RetryLock it waits and succeeds once the holder closes;
// a cancelled context stops the wait.
func TestLockNamesHolderAndRetries(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := Init(ctx, dir, []byte(TestPassword), InitOptions{Chunker: TestChunker, KDF: TestKDF}); err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, wait time.Duration, holder string) (*Repository, error) {
		return Open(ctx, dir, []byte(TestPassword), OpenOptions{NoFsync: true, RetryLock: wait, Holder: holder, Logger: quietLogger})
	}
	r1, err := open(ctx, 0, "daemon")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()

	start := time.Now()
	_, err = open(ctx, 300*time.Millisecond, "CLI (repo check)")
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want a LockedError", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("gave up after %s, RetryLock was 300ms", waited)
	}
	msg := err.Error()
	for _, want := range []string{"daemon", "PID " + strconv.Itoa(os.Getpid()), host, "repo.lock", "waiting 300ms"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("locked error %q does not say %q", msg, want)
		}
	}
	if le.Holder == nil || le.Holder.Holder != "daemon" || le.Holder.Since.IsZero() {
		t.Fatalf("holder %+v", le.Holder)
	}

	// A cancelled context ends the wait early.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = open(cctx, time.Minute, "")
	if !errors.Is(err, ErrLocked) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("Open with a cancelled context: %v after %s", err, time.Since(start))
	}

	// The holder closes while a second Open waits: it gets the repository.
	// lockRefused says when that Open has found the lock held and waits.
	waiting := make(chan struct{})
	var once sync.Once
	refused := func(string) { once.Do(func() { close(waiting) }) }
	lockRefused.Store(&refused)
	t.Cleanup(func() { lockRefused.Store(nil) })
	done := make(chan error, 1)
	go func() {
		r2, err := open(ctx, 30*time.Second, "CLI (repo list)")
		if err == nil {
			if h := readLockHolder(r2.lockFile.Name()); h == nil || h.Holder != "CLI (repo list)" {
				err = errors.New("the new holder is not recorded")
			}
			r2.Close()
		}
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the second Open did not wait for the holder: %v", err)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiting Open: %v", err)
	}
}
