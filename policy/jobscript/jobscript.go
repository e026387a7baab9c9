// Package jobscript runs the administrator's pre/post scripts on the
// appliance: one command (an argv, no shell) in its own process group, with
// a time limit, a given environment, and its output captured within bounds.
//
// It owns the process's lifetime and nothing else: when to run a script,
// what its failure means and how long it took are policy's (the caller's
// clock). It has no clock of its own: the time
// limit is a context deadline, so a job's cancellation and a timeout end a
// script the same way (SIGTERM to the whole group, SIGKILL KillGrace later).
// When the script's main process ends, whatever it left running in its group
// is killed: a backup hook that leaves a child behind would otherwise hold
// the output pipes (and the VM's state) past the hook.
package jobscript

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Limits of what is kept of a script's output.
const (
	MaxOutput  = 64 << 10 // stdout and stderr interleaved, from the start
	StderrTail = 2 << 10  // the end of stderr, for the error message
	// DefaultKillGrace is how long a script has between SIGTERM and SIGKILL.
	DefaultKillGrace = 10 * time.Second
)

// ErrTimedOut is wrapped by Result.Err when the script ran out of time.
var ErrTimedOut = errors.New("script timed out")

// Spec is one script to run.
type Spec struct {
	Command   []string      // argv; Command[0] without a slash is looked up in PATH
	Timeout   time.Duration // 0: no limit but ctx's
	Env       []string      // KEY=value, added to a minimal base (PATH, HOME, LANG)
	Dir       string        // working directory ("" : the appliance's)
	KillGrace time.Duration // SIGTERM to SIGKILL; 0 means DefaultKillGrace
}

// Result is what a script did. Err is nil only when it exited with status 0.
type Result struct {
	ExitCode  int    // -1 when it did not exit by itself (killed, not started)
	TimedOut  bool   // the time limit ended it
	Cancelled bool   // ctx was cancelled (the job was cancelled or the appliance stops)
	Output    []byte // the first MaxOutput bytes of stdout and stderr together
	Truncated int64  // bytes of output beyond MaxOutput, not kept
	Stderr    []byte // the last StderrTail bytes of stderr
	Err       error
}

// Run runs the script and waits for it and its process group to end. It
// never returns before the processes it started are gone or killed.
func Run(ctx context.Context, s Spec) Result {
	r := Result{ExitCode: -1}
	if len(s.Command) == 0 || s.Command[0] == "" {
		r.Err = errors.New("script has no command")
		return r
	}
	grace := s.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	rctx := ctx
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	out := &boundedBuffer{max: MaxOutput}
	tail := &tailBuffer{max: StderrTail}
	cmd := exec.CommandContext(rctx, s.Command[0], s.Command[1:]...)
	cmd.Env = append(baseEnv(), s.Env...)
	cmd.Dir = s.Dir
	// Our own pipes, not exec's: Wait then returns when the script's main
	// process exits, and the group is killed at once rather than after
	// exec waited for a leftover child to close its copy of the pipes.
	outR, outW, err := os.Pipe()
	if err != nil {
		r.Err = fmt.Errorf("start %s: %w", s.Command[0], err)
		return r
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		r.Err = fmt.Errorf("start %s: %w", s.Command[0], err)
		return r
	}
	defer outR.Close()
	defer errR.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The group, not just the leader: sh -c starts children.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	// A leader that ignores SIGTERM is killed grace later by Wait; its
	// group with it, below.
	cmd.WaitDelay = grace
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		r.Err = fmt.Errorf("start %s: %w", s.Command[0], err)
		return r
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); _, _ = io.Copy(out, outR) }()
	go func() { defer readers.Done(); _, _ = io.Copy(multiWriter{out, tail}, errR) }()
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Add(1)
	go func() {
		// A leader that exits on SIGTERM while its children ignore it:
		// they get SIGKILL grace after the SIGTERM, like a leader would.
		defer watcher.Done()
		select {
		case <-rctx.Done():
		case <-done:
			return
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case <-done:
		}
	}()
	waitErr := cmd.Wait()
	// Whatever is left of the group goes with the script.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	close(done)
	watcher.Wait()
	// A process that left the group (setsid) may still hold the pipes:
	// stop reading after grace rather than waiting for it.
	readDone := make(chan struct{})
	go func() { readers.Wait(); close(readDone) }()
	t := time.NewTimer(grace)
	select {
	case <-readDone:
	case <-t.C:
		outR.Close()
		errR.Close()
		<-readDone
	}
	t.Stop()
	err = waitErr
	r.Output, r.Truncated = out.buf.Bytes(), out.dropped
	r.Stderr = tail.bytes()
	if cmd.ProcessState != nil {
		r.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case err == nil: // finished in time, even if the deadline passed since
	case rctx.Err() != nil && ctx.Err() == nil:
		r.TimedOut = true
		r.Err = fmt.Errorf("%s: %w after %v", s.Command[0], ErrTimedOut, s.Timeout)
	case ctx.Err() != nil:
		r.Cancelled = true
		r.Err = fmt.Errorf("%s: %w", s.Command[0], ctx.Err())
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) && r.ExitCode >= 0 {
			r.Err = fmt.Errorf("%s exited with status %d", s.Command[0], r.ExitCode)
		} else {
			r.Err = fmt.Errorf("%s: %w", s.Command[0], err)
		}
	}
	return r
}

// baseEnv is what every script gets from the appliance's environment:
// enough to find programs, nothing else (the appliance's environment may
// hold its secrets).
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return env
}

// boundedBuffer keeps the first max bytes and counts the rest. exec
// serialises writes to one writer per stream but stdout and stderr are
// separate goroutines, hence the lock.
type boundedBuffer struct {
	mu      sync.Mutex
	max     int
	buf     bytes.Buffer
	dropped int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if room > len(p) {
		room = len(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	b.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) bytes() []byte { return bytes.Clone(t.buf) }

// multiWriter writes to each writer in turn.
type multiWriter []io.Writer

func (m multiWriter) Write(p []byte) (int, error) {
	for _, w := range m {
		_, _ = w.Write(p)
	}
	return len(p), nil
}
