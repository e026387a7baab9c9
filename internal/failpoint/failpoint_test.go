package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// setSpec enables spec for one test the way a process would get it: through
// the environment variable.
func setSpec(t *testing.T, spec string) {
	t.Helper()
	t.Cleanup(func() {
		if err := Reload(); err != nil { // after t.Setenv restored the variable
			t.Errorf("reload: %v", err)
		}
	})
	t.Setenv(EnvVar, spec)
	if err := Reload(); err != nil {
		t.Fatalf("reload %q: %v", spec, err)
	}
}

func TestDisabledHitsNothing(t *testing.T) {
	setSpec(t, "")
	if Enabled() {
		t.Fatal("enabled without the variable")
	}
	for range 3 {
		if err := Hit("pack.fsync"); err != nil {
			t.Fatalf("disabled hit: %v", err)
		}
	}
	if Counts() != nil {
		t.Fatal("counts while disabled")
	}
}

func TestFiresOnNthHit(t *testing.T) {
	tests := []struct {
		spec  string
		name  string
		hits  int
		fire  []int // 1-based hits that return an error
		errno syscall.Errno
	}{
		{"pack.fsync=eio", "pack.fsync", 3, []int{1}, syscall.EIO},
		{"pack.fsync=eio@3", "pack.fsync", 5, []int{3}, syscall.EIO},
		{"catalog.tx=enospc@2+", "catalog.tx", 5, []int{2, 3, 4, 5}, syscall.ENOSPC},
		{" a.b=eio@1 , c.d=enospc@9 ", "a.b", 2, []int{1}, syscall.EIO},
		{"other.name=eio@1", "pack.fsync", 3, nil, 0},
		{"count", "pack.fsync", 3, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			setSpec(t, tc.spec)
			want := map[int]bool{}
			for _, n := range tc.fire {
				want[n] = true
			}
			for n := 1; n <= tc.hits; n++ {
				err := Hit(tc.name)
				if got := err != nil; got != want[n] {
					t.Fatalf("hit %d: error %v, want error %v", n, err, want[n])
				}
				if err == nil {
					continue
				}
				if !errors.Is(err, tc.errno) {
					t.Fatalf("hit %d: %v does not wrap %v", n, err, tc.errno)
				}
				var fe *Error
				if !errors.As(err, &fe) || fe.Name != tc.name || fe.Hit != int64(n) {
					t.Fatalf("hit %d: %#v", n, err)
				}
				if !strings.Contains(err.Error(), tc.name) {
					t.Fatalf("message %q does not name the failpoint", err)
				}
			}
			if got := Counts()[tc.name]; got != int64(tc.hits) {
				t.Fatalf("count %d, want %d", got, tc.hits)
			}
		})
	}
}

func TestBadSpecs(t *testing.T) {
	for _, spec := range []string{
		"pack.fsync", "pack.fsync=", "pack.fsync=explode", "pack.fsync=kill@0", "pack.fsync=kill@x",
		"pack.fsync=kill@-1", "Pack.Fsync=kill", ".a=kill", "a.=kill", "=kill", "a=kill,a=eio", "a b=kill",
	} {
		if _, err := parse(spec); err == nil {
			t.Errorf("parse(%q) accepted", spec)
		}
	}
	// A bad variable keeps the previous setting.
	setSpec(t, "a.b=eio@2")
	t.Setenv(EnvVar, "a.b=bogus")
	if err := Reload(); err == nil {
		t.Fatal("Reload accepted a bad variable")
	}
	Hit("a.b")
	if err := Hit("a.b"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("previous setting lost: %v", err)
	}
}

func TestKillAction(t *testing.T) {
	var killed []int64
	old := killSelf
	killSelf = func(name string, n int64) { killed = append(killed, n) }
	t.Cleanup(func() { killSelf = old })
	setSpec(t, "record.rename=kill@2")
	for range 4 {
		Hit("record.rename")
	}
	if len(killed) != 1 || killed[0] != 2 {
		t.Fatalf("killed at %v, want [2]", killed)
	}
}

func TestCountsRoundTrip(t *testing.T) {
	c := map[string]int64{"pack.fsync": 3, "catalog.point": 1, "x": 0}
	got, err := ParseCounts(FormatCounts(c))
	if err != nil || len(got) != len(c) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for k, v := range c {
		if got[k] != v {
			t.Fatalf("%s: %d, want %d", k, got[k], v)
		}
	}
	for _, bad := range []string{"a", "a=x", "A=1", "a=-1"} {
		if _, err := ParseCounts(bad); err == nil {
			t.Errorf("ParseCounts(%q) accepted", bad)
		}
	}
}

// TestRealKill re-executes the test binary with a kill failpoint: the child
// must die of SIGKILL at the third hit, not before and not by exiting.
func TestRealKill(t *testing.T) {
	if os.Getenv("FAILPOINT_TEST_CHILD") == "1" {
		for i := 1; i <= 5; i++ {
			os.Stdout.WriteString("hit\n")
			Hit("child.step")
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRealKill$")
	cmd.Env = append(os.Environ(), "FAILPOINT_TEST_CHILD=1", EnvVar+"=child.step=kill@3")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child was not killed: %v, output %q", err, out)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL", ws)
	}
	if n := strings.Count(string(out), "hit\n"); n != 3 {
		t.Fatalf("child passed %d steps before the kill, want 3", n)
	}
	if !strings.Contains(string(ee.Stderr), "failpoint child.step: kill at hit 3") {
		t.Fatalf("stderr %q does not say which failpoint killed", ee.Stderr)
	}
}

// BenchmarkHitDisabled is the cost every write path pays in production.
func BenchmarkHitDisabled(b *testing.B) {
	active.Store(nil)
	b.Cleanup(func() { Reload() })
	for b.Loop() {
		if err := Hit("pack.fsync"); err != nil {
			b.Fatal(err)
		}
	}
}
