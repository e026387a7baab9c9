package benchstage

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPU returns the CPU time (user + system) of the calling thread.
// Callers lock the goroutine to its thread (runtime.LockOSThread) around
// the measured work.
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// ProcessCPU returns the CPU time (user + system) of the process, every
// thread, from getrusage.
func ProcessCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// OnThread runs fn with the goroutine locked to one thread and returns the
// thread CPU time it used.
func OnThread(fn func() error) (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := ThreadCPU()
	err := fn()
	return ThreadCPU() - t0, err
}
