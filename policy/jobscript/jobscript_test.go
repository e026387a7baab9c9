package jobscript

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func TestRunOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		spec     Spec
		exit     int
		ok       bool
		timedOut bool
		output   string // contained in Output
		stderr   string // equal to Stderr
	}{
		{"success", Spec{Command: sh("echo hello")}, 0, true, false, "hello\n", ""},
		{"exit status", Spec{Command: sh("echo oops >&2; exit 3")}, 3, false, false, "oops\n", "oops\n"},
		{"path lookup", Spec{Command: []string{"true"}}, 0, true, false, "", ""},
		{"timeout", Spec{Command: sh("sleep 30"), Timeout: 200 * time.Millisecond}, -1, false, true, "", ""},
		{"finishes within its timeout", Spec{Command: sh("echo fast"), Timeout: 30 * time.Second}, 0, true, false, "fast", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(context.Background(), tc.spec)
			if (r.Err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", r.Err, tc.ok)
			}
			if r.ExitCode != tc.exit {
				t.Errorf("exit code %d, want %d", r.ExitCode, tc.exit)
			}
			if r.TimedOut != tc.timedOut || (tc.timedOut && !errors.Is(r.Err, ErrTimedOut)) {
				t.Errorf("timedOut %v (err %v), want %v", r.TimedOut, r.Err, tc.timedOut)
			}
			if !strings.Contains(string(r.Output), tc.output) {
				t.Errorf("output %q lacks %q", r.Output, tc.output)
			}
			if string(r.Stderr) != tc.stderr {
				t.Errorf("stderr %q, want %q", r.Stderr, tc.stderr)
			}
		})
	}
}

func TestRunTimeoutIsPrompt(t *testing.T) {
	start := time.Now()
	r := Run(context.Background(), Spec{Command: sh("sleep 30"), Timeout: 200 * time.Millisecond})
	if !r.TimedOut {
		t.Fatalf("not timed out: %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a 200ms timeout took %v", d)
	}
}

func TestRunMissingProgram(t *testing.T) {
	r := Run(context.Background(), Spec{Command: []string{"/nonexistent/vmvault-hook"}})
	if r.Err == nil || !errors.Is(r.Err, os.ErrNotExist) || r.ExitCode != -1 {
		t.Fatalf("missing program: %+v", r)
	}
	if r := Run(context.Background(), Spec{}); r.Err == nil {
		t.Fatal("empty command ran")
	}
}

func TestRunEnvironment(t *testing.T) {
	t.Setenv("VMVAULT_SECRET_FOR_TEST", "hunter2")
	r := Run(context.Background(), Spec{Command: []string{"env"}, Env: []string{"VMVAULT_VM_NAME=web 01", "VMVAULT_JOB_ID=j1"}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lines := strings.Split(string(r.Output), "\n")
	has := func(kv string) bool {
		for _, l := range lines {
			if l == kv {
				return true
			}
		}
		return false
	}
	for _, kv := range []string{"VMVAULT_VM_NAME=web 01", "VMVAULT_JOB_ID=j1", "PATH=" + os.Getenv("PATH")} {
		if !has(kv) {
			t.Errorf("env lacks %q:\n%s", kv, r.Output)
		}
	}
	if strings.Contains(string(r.Output), "hunter2") {
		t.Errorf("the appliance's own environment leaked into the script:\n%s", r.Output)
	}
}

func TestRunOutputBounds(t *testing.T) {
	// 200 KiB on stdout then a recognisable end on stderr.
	r := Run(context.Background(), Spec{Command: sh("head -c 204800 /dev/zero | tr '\\0' a; printf 'x%.0s' $(seq 1 3000) >&2; echo END >&2")})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(r.Output) != MaxOutput {
		t.Errorf("output kept %d bytes, want %d", len(r.Output), MaxOutput)
	}
	if want := int64(204800 + 3000 + 4 - MaxOutput); r.Truncated != want {
		t.Errorf("truncated %d, want %d", r.Truncated, want)
	}
	if len(r.Stderr) != StderrTail || !bytes.HasSuffix(r.Stderr, []byte("xxEND\n")) {
		t.Errorf("stderr tail %d bytes ending %q", len(r.Stderr), r.Stderr[max(0, len(r.Stderr)-10):])
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone waits for the kernel to finish a SIGKILL already sent: the
// signal is delivered asynchronously, so "gone" is polled with a deadline.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d outlived its script", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func childPid(t *testing.T, out []byte) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		t.Fatalf("no child pid in %q", out)
	}
	return pid
}

func TestRunKillsProcessGroup(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
	}{
		// The leader times out; its child would sleep on.
		{"timeout", Spec{Command: sh("sleep 60 & echo $!; wait"), Timeout: 200 * time.Millisecond}},
		// Both ignore SIGTERM: SIGKILL after the grace.
		{"timeout ignoring SIGTERM", Spec{Command: sh("trap '' TERM; sleep 60 & echo $!; wait; wait"), Timeout: 200 * time.Millisecond, KillGrace: 300 * time.Millisecond}},
		// The leader exits at once and leaves a child holding the pipes.
		{"leftover child", Spec{Command: sh("sleep 60 & echo $!"), Timeout: 30 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := Run(context.Background(), tc.spec)
			pid := childPid(t, r.Output)
			waitGone(t, pid)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan Result, 1)
	// The script signals it is running by writing to a FIFO-less file the
	// test waits on: cancellation must hit a running script.
	dir := t.TempDir()
	ready := dir + "/ready"
	go func() {
		res <- Run(ctx, Spec{Command: sh("sleep 60 & echo $! > " + ready + ".tmp; mv " + ready + ".tmp " + ready + "; wait"), Timeout: time.Minute})
	}()
	deadline := time.Now().Add(10 * time.Second)
	var pidb []byte
	for {
		b, err := os.ReadFile(ready)
		if err == nil {
			pidb = b
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("script never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	r := <-res
	if !r.Cancelled || r.TimedOut || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled run: %+v", r)
	}
	waitGone(t, childPid(t, pidb))
}
