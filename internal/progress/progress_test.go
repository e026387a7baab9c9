package progress

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPty returns a pseudo-terminal's master and slave ends, made with
// /dev/ptmx as a terminal emulator does, the slave 100 columns wide.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("SKIP LOUDLY: no pseudo-terminals on this machine (%v): terminal detection is untested here", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100}); err != nil {
		t.Fatalf("set pty size: %v", err)
	}
	return m, s
}

// TestNew: a bar only on a terminal, unless VMVAULT_PROGRESS says
// otherwise; never when the output is quiet.
func TestNew(t *testing.T) {
	_, pty := openPty(t)
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeR.Close()
	defer pipeW.Close()
	cases := []struct {
		name  string
		w     interface{ Write([]byte) (int, error) }
		env   string
		quiet bool
		want  bool
		width int
	}{
		{"pty", pty, "", false, true, 100},
		{"pty quiet", pty, "", true, false, 0},
		{"pty never", pty, "never", false, false, 0},
		{"pipe", pipeW, "", false, false, 0},
		{"buffer", &bytes.Buffer{}, "", false, false, 0},
		{"buffer always", &bytes.Buffer{}, "always", false, true, 80},
		{"pty always", pty, "1", false, true, 100},
		{"buffer always quiet", &bytes.Buffer{}, "always", true, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(c.w, func(k string) string {
				if k == "VMVAULT_PROGRESS" {
					return c.env
				}
				return ""
			}, c.quiet)
			if (b != nil) != c.want {
				t.Fatalf("bar %v, want %v", b != nil, c.want)
			}
			if b != nil && b.width != c.width {
				t.Errorf("width %d, want %d", b.width, c.width)
			}
		})
	}
}

// TestProgressThrottled: a thousand reports in one second redraw the bar a
// handful of times, and the last one (100%) is always drawn.
func TestProgressThrottled(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	p := NewWriter(&buf, 80, func() time.Time { return now })
	for i := int64(1); i <= 1000; i++ {
		now = now.Add(time.Millisecond)
		p.Update("restore disk 0", i<<20, 1000<<20, true)
	}
	draws := strings.Count(buf.String(), "\x1b[K")
	if draws < 2 || draws > 8 {
		t.Fatalf("%d redraws for 1000 reports in 1 s, want a few (at most 5 per second)", draws)
	}
	if !strings.Contains(buf.String(), "100%") {
		t.Fatalf("the final state was not drawn: %q", buf.String())
	}
	p.Finish()
	if !strings.HasSuffix(buf.String(), "\r\x1b[K") {
		t.Fatal("finish did not erase the bar")
	}
	var nilBar *Bar
	nilBar.Update("x", 1, 2, true) // no bar: no-ops, no panic
	nilBar.Finish()
}

// TestPhaseStart: a phase is timed from the previous report (when its work
// began), the first one from the bar's creation.
func TestPhaseStart(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	p := NewWriter(&buf, 100, func() time.Time { return now })
	now = now.Add(5 * time.Second)
	p.Update("scan", 10, 10, false)
	now = now.Add(20 * time.Second)
	p.Update("copy", 20, 20, false)
	if got := buf.String(); !strings.Contains(got, "scan [") || !strings.Contains(got, "in 0:05") || !strings.Contains(got, "in 0:20") {
		t.Fatalf("phases not timed from their start: %q", got)
	}
}

func TestRenderProgress(t *testing.T) {
	cases := []struct {
		name        string
		done, total int64
		bytes       bool
		elapsed     time.Duration
		width       int
		want        []string
		wantNot     []string
	}{
		{"half way", 50 << 20, 100 << 20, true, 10 * time.Second, 100, []string{"restore disk 0 [", " 50%", "50.0 MiB/100.0 MiB", "5.0 MiB/s", "ETA 0:10"}, nil},
		{"done", 100 << 20, 100 << 20, true, 65 * time.Second, 100, []string{"100%", "in 1:05"}, []string{"ETA"}},
		{"counts", 30, 120, false, 3 * time.Second, 100, []string{"30/120", "10/s", "ETA 0:09"}, []string{"MiB"}},
		{"unknown total", 0, 0, false, 2 * time.Second, 100, []string{"restore disk 0  0:02"}, []string{"%"}},
		{"narrow terminal", 50, 100, false, time.Second, 30, []string{"50%"}, []string{"["}},
		{"hours", 1, 4000, false, time.Second, 100, []string{"ETA 1:06:39"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Render("restore disk 0", c.done, c.total, c.bytes, c.elapsed, c.width)
			if len(got) >= c.width {
				t.Errorf("%q is %d columns on a %d-column terminal", got, len(got), c.width)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("%q has %q", got, w)
				}
			}
		})
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB", 1 << 60: "1.0 EiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
