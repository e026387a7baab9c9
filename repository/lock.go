package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// LockHolder describes the process holding locks/repo.lock. The holder
// writes it into the lock file once it has the lock (FORMAT.md §12); it is
// informative only: the flock(2) is the lock.
type LockHolder struct {
	Holder string    `json:"holder"` // who: "daemon", "CLI (appliance repo check)", ...
	PID    int       `json:"pid"`
	Host   string    `json:"host"`
	Since  time.Time `json:"since"`
}

func (h *LockHolder) String() string {
	return fmt.Sprintf("%s (PID %d on host %s, since %s)", h.Holder, h.PID, h.Host, h.Since.Format(time.RFC3339))
}

// LockedError is the ErrLocked of Open: it names the lock file and, when the
// lock file says, the holder.
type LockedError struct {
	Path   string
	Holder *LockHolder   // nil when the lock file names nobody (an older vmvault, or being written)
	Waited time.Duration // how long Open retried (OpenOptions.RetryLock)
}

func (e *LockedError) Error() string {
	s := ErrLocked.Error()
	if e.Holder != nil {
		s += ": held by " + e.Holder.String()
	}
	if e.Waited > 0 {
		s += fmt.Sprintf("; gave up after waiting %s", e.Waited.Round(time.Millisecond))
	}
	return s + fmt.Sprintf(" (lock file %s; is another vmvault running?)", e.Path)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// defaultHolder names this process: the program and its sub-command words
// ("appliance serve", "appliance repo check").
func defaultHolder() string {
	if len(os.Args) == 0 {
		return "unknown"
	}
	words := []string{filepath.Base(os.Args[0])}
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-") || len(words) == 3 {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// readLockHolder returns the holder recorded in the lock file, or nil.
func readLockHolder(path string) *LockHolder {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 || len(b) > 4096 {
		return nil
	}
	var h LockHolder
	if json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return nil
	}
	return &h
}

// lockRefused, set by this package's tests, is called with the lock file's
// path each time acquireRepoLock finds it held and is about to wait: a test
// knows a second Open is waiting without sleeping.
var lockRefused atomic.Pointer[func(path string)]

// acquireRepoLock takes the exclusive flock on path, retrying for up to wait
// (0: fail at once) unless ctx ends first, then records the holder in the
// file.
func acquireRepoLock(ctx context.Context, path string, wait time.Duration, holder string) (*os.File, error) {
	lf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	start := time.Now()
	deadline := start.Add(wait)
	delay := 50 * time.Millisecond
	for {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			lf.Close()
			return nil, fmt.Errorf("lock: flock %s: %w", path, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			lf.Close()
			return nil, &LockedError{Path: path, Holder: readLockHolder(path), Waited: wait}
		}
		if f := lockRefused.Load(); f != nil {
			(*f)(path)
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			lf.Close()
			return nil, fmt.Errorf("%w (stopped waiting after %s: %w)",
				&LockedError{Path: path, Holder: readLockHolder(path), Waited: time.Since(start)}, time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 2*time.Second)
	}
	if holder == "" {
		holder = defaultHolder()
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(LockHolder{Holder: holder, PID: os.Getpid(), Host: host, Since: time.Now().UTC().Truncate(time.Second)})
	// Informative only: a failure to record the holder does not fail Open.
	if lf.Truncate(0) == nil {
		lf.WriteAt(b, 0)
	}
	return lf, nil
}

// releaseRepoLock clears the holder and drops the flock.
func releaseRepoLock(lf *os.File) error {
	lf.Truncate(0)
	syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return lf.Close()
}
