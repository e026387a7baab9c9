// Package progress draws one long operation's progress on a terminal: a
// single line on stderr, redrawn in place, with a bar, the rate and the time
// left. It owns the terminal detection (VMVAULT_PROGRESS overrides it), the
// redraw throttle and the line's layout; what is measured belongs to the
// engines, which report through their own progress callbacks.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Every bounds how often the bar is redrawn: a terminal redrawn on every
// chunk costs CPU and flickers. Engines that throttle their own reports use
// it too.
const Every = 200 * time.Millisecond

// Bar draws one long operation's progress. A nil *Bar draws nothing, so
// commands call it unconditionally. Its methods are goroutine-safe (engines
// report from worker goroutines).
type Bar struct {
	w     io.Writer
	width int
	now   func() time.Time

	mu         sync.Mutex
	phase      string
	phaseStart time.Time
	lastReport time.Time // of any phase: when the next phase's work began
	last       time.Time // of the last redraw
	lastDone   int64
	drawn      bool
}

// New returns a bar on w when it is a terminal and the command's output is
// for people (quiet is --json or an explicit line-by-line --progress), or
// nil. getenv reads the environment: VMVAULT_PROGRESS=always forces the bar
// (for `script` and tests), VMVAULT_PROGRESS=never turns it off.
func New(w io.Writer, getenv func(string) string, quiet bool) *Bar {
	if quiet {
		return nil
	}
	width := 80
	switch getenv("VMVAULT_PROGRESS") {
	case "never", "off", "0":
		return nil
	case "always", "1":
		if w, ok := terminalWidth(w); ok && w > 0 {
			width = w
		}
	default:
		w, ok := terminalWidth(w)
		if !ok {
			return nil
		}
		if w > 0 {
			width = w
		}
	}
	return NewWriter(w, width, time.Now)
}

// NewWriter returns a bar that draws on w, width columns wide, reading the
// time from now (tests pass a fake clock).
func NewWriter(w io.Writer, width int, now func() time.Time) *Bar {
	return &Bar{w: w, width: width, now: now, lastReport: now()}
}

// terminalWidth reports whether w is a terminal (TIOCGWINSZ succeeds only on
// a tty) and its width in columns (0 when the terminal does not say).
func terminalWidth(w io.Writer) (int, bool) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, false
	}
	return int(ws.Col), true
}

// Update reports that phase has done of total units (bytes when bytes is
// true, items otherwise; total 0 when unknown). It redraws at most every
// Every, and always when a phase starts or completes.
func (p *Bar) Update(phase string, done, total int64, bytes bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	newPhase := phase != p.phase
	if newPhase {
		start := p.lastReport
		if start.IsZero() {
			start = now
		}
		p.phase, p.phaseStart, p.lastDone = phase, start, -1
	}
	p.lastReport = now
	complete := total > 0 && done >= total && p.lastDone != done
	if !newPhase && !complete && now.Sub(p.last) < Every {
		return
	}
	p.last, p.lastDone = now, done
	line := Render(phase, done, total, bytes, now.Sub(p.phaseStart), p.width)
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	p.drawn = true
}

// Finish erases the bar so that the command's own output starts on a clean
// line.
func (p *Bar) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// Render formats one line of at most width-1 columns (the last
// column would make some terminals wrap):
//
//	restore disk 0 [#########...........]  45%  1.2 GiB/2.7 GiB  85.3 MiB/s  ETA 0:18
func Render(phase string, done, total int64, bytes bool, elapsed time.Duration, width int) string {
	amount := func(n int64) string {
		if bytes {
			return Bytes(n)
		}
		return fmt.Sprint(n)
	}
	var rate float64
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	var tail []string
	pct := -1
	if total > 0 {
		pct = int(min(done, total) * 100 / total)
		tail = append(tail, fmt.Sprintf("%3d%%", pct), amount(done)+"/"+amount(total))
	} else if done > 0 {
		tail = append(tail, amount(done))
	}
	if rate > 0 {
		if bytes {
			tail = append(tail, Bytes(int64(rate))+"/s")
		} else {
			tail = append(tail, fmt.Sprintf("%.0f/s", rate))
		}
	}
	switch {
	case total > 0 && done >= total:
		tail = append(tail, "in "+clockDuration(elapsed))
	case total > 0 && rate > 0:
		tail = append(tail, "ETA "+clockDuration(time.Duration(float64(total-done)/rate*float64(time.Second))))
	default:
		tail = append(tail, clockDuration(elapsed))
	}
	rest := strings.Join(tail, "  ")
	max := width - 1
	if max < 20 {
		max = 20
	}
	if pct >= 0 {
		// The bar gets what the text leaves, between 10 and 40 cells. The
		// text is counted at its widest (tailWidth) so that the bar keeps
		// its length while the figures change.
		cells := max - len(phase) - maxInt(len(rest), tailWidth) - 3
		if cells > 40 {
			cells = 40
		}
		if cells >= 10 {
			fill := pct * cells / 100
			bar := "[" + strings.Repeat("#", fill) + strings.Repeat(".", cells-fill) + "]"
			return phase + " " + bar + " " + rest
		}
	}
	line := phase + "  " + rest
	if len(line) > max {
		line = line[:max]
	}
	return line
}

// tailWidth is the widest usual text after the bar:
// "100%  999.9 MiB/999.9 MiB  999.9 MiB/s  ETA 0:00:00".
const tailWidth = 50

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// clockDuration formats d as M:SS or H:MM:SS.
func clockDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s < 0 {
		s = 0
	}
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// Bytes formats n in binary units as the bar shows it: "512 B", "1.5 KiB",
// "85.3 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
