// Package failpoint owns vmvault's named failpoints: places on the write
// paths (pack fsync, catalog transaction, commit record rename, ...) where a
// crash test can kill the process or make the step fail, at the N-th time the
// step runs. They exist to prove the crash-safety contract step by step
// (docs/RELIABILITY.md) instead of by random timing.
//
// Failpoints are off unless the environment variable VMVAULT_FAILPOINTS is
// set when the process starts (or when Reload is called, which re-reads the
// variable; tests use t.Setenv and Reload). Nothing else turns them on, so a
// production daemon never runs one. Disabled, Hit costs one atomic load.
//
// The variable is a comma-separated list of NAME=ACTION[@N[+]]:
//
//	VMVAULT_FAILPOINTS="pack.fsync=kill@3,catalog.point=eio@1"
//
// ACTION is one of
//
//	kill    SIGKILL the process (no deferred function, no flush: a crash)
//	eio     Hit returns an error wrapping syscall.EIO
//	enospc  Hit returns an error wrapping syscall.ENOSPC
//
// @N fires on the N-th hit of NAME only (default 1); @N+ fires on the N-th
// and every later hit. The entry "count" (no '=') enables counting only: a
// test learns how often each failpoint is hit by one run (Counts) and then
// walks every hit. Whenever failpoints are enabled, every hit of every name
// is counted.
//
// Names are lower-case dotted words, the first naming the component
// ("pack.fsync", "reclaim.condemn", "state.tx"). The list of names lives in
// the code that calls Hit; docs/RELIABILITY.md lists them.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// EnvVar is the environment variable that enables failpoints.
const EnvVar = "VMVAULT_FAILPOINTS"

// Action is what a failpoint does when it fires.
type Action int

const (
	Kill   Action = iota + 1 // SIGKILL the process
	EIO                      // return an error wrapping syscall.EIO
	ENOSPC                   // return an error wrapping syscall.ENOSPC
)

func (a Action) String() string {
	switch a {
	case Kill:
		return "kill"
	case EIO:
		return "eio"
	case ENOSPC:
		return "enospc"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Error is what Hit returns when an eio or enospc failpoint fires. It
// unwraps to the errno, so errors.Is(err, syscall.EIO) holds as it would for
// a real failing disk.
type Error struct {
	Name  string
	Hit   int64
	Errno syscall.Errno
}

func (e *Error) Error() string {
	return fmt.Sprintf("failpoint %s (hit %d): %v", e.Name, e.Hit, e.Errno)
}

func (e *Error) Unwrap() error { return e.Errno }

// rule is one parsed NAME=ACTION@N[+] entry.
type rule struct {
	action Action
	at     int64
	after  bool // fire on every hit >= at
}

// registry is immutable after parse except for the counters.
type registry struct {
	rules  map[string]rule
	mu     sync.Mutex
	counts map[string]int64
}

// active is nil when failpoints are disabled: the only thing Hit reads then.
var active atomic.Pointer[registry]

// killSelf is replaced by the unit tests of this package.
var killSelf = func(name string, n int64) {
	fmt.Fprintf(os.Stderr, "failpoint %s: kill at hit %d\n", name, n)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is asynchronous: never run past the failpoint
}

func init() {
	if err := Reload(); err != nil {
		// A typo in a test's variable must not silently test nothing.
		fmt.Fprintf(os.Stderr, "%s: %v\n", EnvVar, err)
		os.Exit(2)
	}
}

// Reload re-reads VMVAULT_FAILPOINTS and resets every counter. An empty or
// unset variable disables failpoints. On a parse error the previous setting
// stays.
func Reload() error {
	spec := os.Getenv(EnvVar)
	if spec == "" {
		active.Store(nil)
		return nil
	}
	reg, err := parse(spec)
	if err != nil {
		return err
	}
	active.Store(reg)
	return nil
}

// Enabled reports whether failpoints are enabled in this process.
func Enabled() bool { return active.Load() != nil }

func parse(spec string) (*registry, error) {
	reg := &registry{rules: map[string]rule{}, counts: map[string]int64{}}
	for _, ent := range strings.Split(spec, ",") {
		ent = strings.TrimSpace(ent)
		if ent == "" || ent == "count" {
			continue
		}
		name, act, ok := strings.Cut(ent, "=")
		if !ok || !validName(name) {
			return nil, fmt.Errorf("failpoint entry %q: want NAME=ACTION[@N[+]] with a dotted lower-case NAME", ent)
		}
		if _, dup := reg.rules[name]; dup {
			return nil, fmt.Errorf("failpoint %s is given twice", name)
		}
		ru := rule{at: 1}
		act, at, hasAt := strings.Cut(act, "@")
		if hasAt {
			if strings.HasSuffix(at, "+") {
				ru.after, at = true, strings.TrimSuffix(at, "+")
			}
			n, err := strconv.ParseInt(at, 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("failpoint %s: hit %q is not a positive number", name, at)
			}
			ru.at = n
		}
		switch act {
		case "kill":
			ru.action = Kill
		case "eio":
			ru.action = EIO
		case "enospc":
			ru.action = ENOSPC
		default:
			return nil, fmt.Errorf("failpoint %s: unknown action %q (kill, eio, enospc)", name, act)
		}
		reg.rules[name] = ru
	}
	return reg, nil
}

func validName(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// Hit marks one pass through the step name. It returns nil unless
// failpoints are enabled and name's rule fires; a kill rule does not return.
func Hit(name string) error {
	reg := active.Load()
	if reg == nil {
		return nil
	}
	return reg.hit(name)
}

func (reg *registry) hit(name string) error {
	reg.mu.Lock()
	reg.counts[name]++
	n := reg.counts[name]
	reg.mu.Unlock()
	ru, ok := reg.rules[name]
	if !ok || n < ru.at || (n > ru.at && !ru.after) {
		return nil
	}
	switch ru.action {
	case Kill:
		killSelf(name, n)
		return errors.New("failpoint " + name + ": killed") // only reached in this package's tests
	case EIO:
		return &Error{Name: name, Hit: n, Errno: syscall.EIO}
	default:
		return &Error{Name: name, Hit: n, Errno: syscall.ENOSPC}
	}
}

// Counts returns how often each failpoint was hit since the last Reload
// (nil when failpoints are disabled).
func Counts() map[string]int64 {
	reg := active.Load()
	if reg == nil {
		return nil
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	out := make(map[string]int64, len(reg.counts))
	for k, v := range reg.counts {
		out[k] = v
	}
	return out
}

// FormatCounts renders counts as "name=n" lines sorted by name, the format
// ParseCounts reads (a child process reports its counts to a crash test).
func FormatCounts(c map[string]int64) string {
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s=%d\n", k, c[k])
	}
	return b.String()
}

// ParseCounts reads what FormatCounts wrote.
func ParseCounts(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || !validName(k) || n < 0 {
			return nil, fmt.Errorf("failpoint counts: bad line %q", line)
		}
		out[k] = n
	}
	return out, nil
}
