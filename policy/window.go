package policy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// minutesPerDay is the length of a wall-clock day; 24:00 is a valid range end.
const minutesPerDay = 24 * 60

// Range is one time range of a weekday, in wall-clock minutes since local
// midnight. End <= Start means the range crosses midnight and ends on the next
// day; End == 1440 means midnight at the end of the day.
type Range struct {
	Start int // 0..1439
	End   int // 1..1440; End <= Start crosses midnight
}

// crossesMidnight reports whether the range ends on the following day.
func (r Range) crossesMidnight() bool { return r.End <= r.Start }

// length returns the nominal length in minutes (ignoring DST).
func (r Range) length() int {
	if r.crossesMidnight() {
		return minutesPerDay - r.Start + r.End
	}
	return r.End - r.Start
}

func (r Range) String() string {
	return fmt.Sprintf("%02d:%02d-%02d:%02d", r.Start/60, r.Start%60, r.End/60, r.End%60)
}

// ParseRange parses "HH:MM-HH:MM" (24:00 allowed as an end).
func ParseRange(s string) (Range, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return Range{}, fmt.Errorf("range %q: want HH:MM-HH:MM", s)
	}
	start, err := parseHHMM(a, false)
	if err != nil {
		return Range{}, fmt.Errorf("range %q start: %w", s, err)
	}
	end, err := parseHHMM(b, true)
	if err != nil {
		return Range{}, fmt.Errorf("range %q end: %w", s, err)
	}
	if end == 0 {
		end = minutesPerDay // "22:00-00:00" ends at midnight; "00:00-00:00" is the whole day
	}
	return Range{Start: start, End: end}, nil
}

func parseHHMM(s string, allow24 bool) (int, error) {
	var h, m int
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	if _, err := fmt.Sscanf(s, "%02d:%02d", &h, &m); err != nil {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	v := h*60 + m
	switch {
	case m < 0 || m > 59 || h < 0:
		return 0, fmt.Errorf("%q is not a time of day", s)
	case v == minutesPerDay && allow24:
		return v, nil
	case v >= minutesPerDay:
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	return v, nil
}

// Window is a weekly schedule: per weekday (indexed by time.Weekday) zero or
// more ranges of wall-clock time in Location.
//
// An occurrence is a stretch of time the window is open without a break:
// ranges that touch (one ends at the instant the next starts, also across
// midnight and from Saturday into Sunday into Monday) form one occurrence,
// so "at most once per window" holds over a whole Friday-night-plus-weekend
// and a VM is not backed up just before and again just after midnight. A
// gap of even one minute separates two occurrences. Touching is decided on
// instants, so two ranges separated only by a spring-forward gap (22:00-02:00
// and 03:00-06:00 on that night) are one occurrence that night: the window is
// never closed in between. A window that is open every minute of the week
// has no closing to delimit an occurrence; there each configured range stays
// its own occurrence (AlwaysOpen: one per day).
//
// DST: wall times are mapped to instants in Location. A wall time that does
// not exist (spring forward) maps to the first instant after the gap; a wall
// time that exists twice (fall back) maps to its first occurrence. So a
// 22:00-06:00 night is 7 hours long on a spring-forward night and 9 hours on a
// fall-back night, and a range lying entirely inside a gap is empty that day.
type Window struct {
	Days     [7][]Range
	Location *time.Location // nil means UTC
}

// Occurrence is one concrete opening of a window: [Open, Close).
type Occurrence struct {
	Open, Close time.Time
}

// ID identifies the occurrence stably across restarts (its opening instant).
func (o Occurrence) ID() string { return o.Open.UTC().Format(time.RFC3339) }

// Contains reports whether t lies in [Open, Close).
func (o Occurrence) Contains(t time.Time) bool { return !t.Before(o.Open) && t.Before(o.Close) }

func (w Window) loc() *time.Location {
	if w.Location == nil {
		return time.UTC
	}
	return w.Location
}

// IsEmpty reports whether no range is configured.
func (w Window) IsEmpty() bool {
	for _, d := range w.Days {
		if len(d) > 0 {
			return false
		}
	}
	return true
}

// DefaultWindow is the reference product's default: every weekday night
// (18:00-06:00) and all weekend, from Friday 18:00 to Monday 06:00.
func DefaultWindow(loc *time.Location) Window {
	night := []Range{{0, 6 * 60}, {18 * 60, minutesPerDay}}
	all := []Range{{0, minutesPerDay}}
	return Window{
		Days: [7][]Range{
			time.Sunday:    all,
			time.Monday:    night,
			time.Tuesday:   night,
			time.Wednesday: night,
			time.Thursday:  night,
			time.Friday:    night,
			time.Saturday:  all,
		},
		Location: loc,
	}
}

// AlwaysOpen is a window open around the clock (useful for "run as soon as possible" jobs).
func AlwaysOpen(loc *time.Location) Window {
	var w Window
	for d := range w.Days {
		w.Days[d] = []Range{{0, minutesPerDay}}
	}
	w.Location = loc
	return w
}

// Validate reports an empty window, malformed ranges and ranges that overlap
// (also across midnight and from Saturday into Sunday... and Sunday into Monday).
func (w Window) Validate() error {
	type span struct {
		day   time.Weekday
		r     Range
		s, e  int // minutes of the week, e may exceed a week (wraps)
		label string
	}
	var spans []span
	for d, rs := range w.Days {
		for _, r := range rs {
			label := fmt.Sprintf("%s %s", time.Weekday(d), r)
			if r.Start < 0 || r.Start >= minutesPerDay || r.End <= 0 || r.End > minutesPerDay {
				return fmt.Errorf("%s: times out of range", label)
			}
			if r.Start == r.End {
				return fmt.Errorf("%s: empty range", label)
			}
			s := d*minutesPerDay + r.Start
			spans = append(spans, span{time.Weekday(d), r, s, s + r.length(), label})
		}
	}
	if len(spans) == 0 {
		return fmt.Errorf("no time ranges")
	}
	const week = 7 * minutesPerDay
	for i := range spans {
		for j := i + 1; j < len(spans); j++ {
			a, b := spans[i], spans[j]
			for _, shift := range []int{-week, 0, week} {
				if a.s < b.e+shift && b.s+shift < a.e {
					return fmt.Errorf("%s overlaps %s", a.label, b.label)
				}
			}
		}
	}
	return nil
}

// Contains reports whether the window is open at t.
func (w Window) Contains(t time.Time) bool {
	_, ok := w.At(t)
	return ok
}

// At returns the occurrence open at t, if any. Occurrences never touch
// (touching ranges are merged), except in a window open around the clock,
// where the one that opens at t wins.
func (w Window) At(t time.Time) (Occurrence, bool) {
	for _, o := range w.occurrencesAround(t, 2, 1) {
		if o.Contains(t) {
			return o, true
		}
	}
	return Occurrence{}, false
}

// Next returns the occurrence open at t or, if the window is closed at t, the
// first one that opens after t. A scheduler sleeps until Open when it lies in
// the future and until Close otherwise. ok is false for an empty window.
func (w Window) Next(t time.Time) (Occurrence, bool) {
	if o, ok := w.At(t); ok {
		return o, true
	}
	// A valid window opens at least once a week; 9 days covers DST-empty
	// ranges. Merged occurrences are complete whatever the span (see
	// occurrencesAround), so a later chain cannot be mistaken for its tail.
	for _, o := range w.occurrencesAround(t, 1, 9) {
		if o.Open.After(t) {
			return o, true
		}
	}
	return Occurrence{}, false
}

// Between returns the occurrences that open in [from, to), in order.
func (w Window) Between(from, to time.Time) []Occurrence {
	if !to.After(from) {
		return nil
	}
	days := int(to.Sub(from)/(24*time.Hour)) + 2
	var out []Occurrence
	for _, o := range w.occurrencesAround(from, 1, days) {
		if !o.Open.Before(from) && o.Open.Before(to) {
			out = append(out, o)
		}
	}
	return out
}

// mergeMargin is how many days beyond the asked span occurrencesAround
// looks, so a chain of touching ranges that reaches into the span is built
// whole: a chain that starts further back than the margin would be cut short.
// It bounds the longest chain from the weekly pattern, treating gaps of up to
// dstSlack as closed (a DST transition can close a gap that short), and falls
// back to 15 days when such chains wrap the whole week (a spring-forward gap
// can then join two weeks).
func (w Window) mergeMargin() int {
	type span struct{ s, e int }
	const week = 7 * minutesPerDay
	const dstSlack = 3 * 60 // more than any zone's DST shift
	var spans []span
	for k := range 3 { // three weeks: chains that cross the Saturday-Sunday wrap
		for d, rs := range w.Days {
			for _, r := range rs {
				s := k*week + d*minutesPerDay + r.Start
				spans = append(spans, span{s, s + r.length()})
			}
		}
	}
	if len(spans) == 0 {
		return 1
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].s < spans[j].s })
	longest, cur := 0, spans[0]
	for _, sp := range spans[1:] {
		if sp.s <= cur.e+dstSlack {
			cur.e = max(cur.e, sp.e)
			continue
		}
		longest = max(longest, cur.e-cur.s)
		cur = sp
	}
	longest = max(longest, cur.e-cur.s)
	if longest >= week {
		return 15
	}
	return longest/minutesPerDay + 2
}

// occurrencesAround lists the occurrences that start on local dates from t's
// date minus before days to plus after days, sorted by Open, without empty
// ones, touching ranges merged into one occurrence. Occurrences that start
// earlier are included too when they are still open on the first date.
func (w Window) occurrencesAround(t time.Time, before, after int) []Occurrence {
	if w.openAllWeek() {
		return w.rawOccurrences(t, before, after)
	}
	return w.mergedAround(t, before, after, w.mergeMargin())
}

// mergedAround is occurrencesAround with an explicit merge margin in days.
func (w Window) mergedAround(t time.Time, before, after, margin int) []Occurrence {
	raw := w.rawOccurrences(t, before+margin, after+margin)
	var merged []Occurrence
	for _, o := range raw {
		if n := len(merged); n > 0 && !o.Open.After(merged[n-1].Close) {
			if o.Close.After(merged[n-1].Close) {
				merged[n-1].Close = o.Close
			}
			continue
		}
		merged = append(merged, o)
	}
	// Chains at the edges of the margin may be cut short; they lie outside
	// the asked span, which is all callers look at.
	loc := w.loc()
	y, m, d := t.In(loc).Date()
	first := wallToInstant(y, m, d-before, 0, loc)
	last := wallToInstant(y, m, d+after+1, 0, loc)
	out := merged[:0]
	for _, o := range merged {
		if o.Close.After(first) && o.Open.Before(last) {
			out = append(out, o)
		}
	}
	return out
}

// openAllWeek reports whether the ranges cover every minute of the week (a
// valid window without a gap), where merging would make one endless occurrence.
func (w Window) openAllWeek() bool {
	total := 0
	for _, rs := range w.Days {
		for _, r := range rs {
			total += r.length()
		}
	}
	return total >= 7*minutesPerDay
}

// rawOccurrences lists one occurrence per configured range and local date,
// from t's date minus before days to plus after days, sorted by Open, without
// empty ones.
func (w Window) rawOccurrences(t time.Time, before, after int) []Occurrence {
	loc := w.loc()
	lt := t.In(loc)
	y, m, d := lt.Date()
	var out []Occurrence
	for i := -before; i <= after; i++ {
		day := time.Date(y, m, d+i, 12, 0, 0, 0, time.UTC) // noon UTC: only the calendar date matters
		dy, dm, dd := day.Date()
		for _, r := range w.Days[day.Weekday()] {
			end := r.End
			if r.crossesMidnight() {
				end += minutesPerDay
			}
			o := Occurrence{
				Open:  wallToInstant(dy, dm, dd, r.Start, loc),
				Close: wallToInstant(dy, dm, dd, end, loc),
			}
			if o.Close.After(o.Open) {
				out = append(out, o)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Open.Before(out[j].Open) })
	return out
}

// wallToInstant maps a wall-clock time (minutes since midnight of the date,
// may exceed a day) in loc to an instant: the earliest instant showing that
// wall time, or for a wall time skipped by a DST gap, the end of the gap.
func wallToInstant(y int, m time.Month, d, minutes int, loc *time.Location) time.Time {
	naive := time.Date(y, m, d, 0, minutes, 0, 0, time.UTC) // normalises day overflow
	var offsets []int
	for _, probe := range []time.Duration{-36 * time.Hour, 36 * time.Hour} {
		_, off := naive.Add(probe).In(loc).Zone()
		offsets = append(offsets, off)
	}
	var best time.Time
	found := false
	for _, off := range offsets {
		cand := naive.Add(-time.Duration(off) * time.Second)
		if sameWall(cand.In(loc), naive) && (!found || cand.Before(best)) {
			best, found = cand, true
		}
	}
	if found {
		return best
	}
	// In a gap: the smaller offset puts the candidate after the transition;
	// the zone that starts there starts at the end of the gap.
	small := offsets[0]
	if offsets[1] < small {
		small = offsets[1]
	}
	cand := naive.Add(-time.Duration(small) * time.Second).In(loc)
	start, _ := cand.ZoneBounds()
	if start.IsZero() {
		return cand
	}
	return start
}

func sameWall(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}

// windowJSON is the stored and API form: {"location":"Europe/Berlin","days":{"monday":["22:00-06:00"]}}.
type windowJSON struct {
	Location string              `json:"location"`
	Days     map[string][]string `json:"days"`
}

// MarshalJSON encodes the window with its time zone name and HH:MM ranges.
func (w Window) MarshalJSON() ([]byte, error) {
	j := windowJSON{Location: w.loc().String(), Days: map[string][]string{}}
	for d, rs := range w.Days {
		for _, r := range rs {
			name := strings.ToLower(time.Weekday(d).String())
			j.Days[name] = append(j.Days[name], r.String())
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes MarshalJSON's form; unknown days, bad ranges and
// unknown zones are errors.
func (w *Window) UnmarshalJSON(b []byte) error {
	var j windowJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("decode window: %w", err)
	}
	var out Window
	loc, err := time.LoadLocation(j.Location)
	if err != nil {
		return fmt.Errorf("window location %q: %w", j.Location, err)
	}
	out.Location = loc
	for name, rs := range j.Days {
		d, ok := parseWeekday(name)
		if !ok {
			return fmt.Errorf("window day %q: not a weekday", name)
		}
		for _, s := range rs {
			r, err := ParseRange(s)
			if err != nil {
				return fmt.Errorf("window %s: %w", name, err)
			}
			out.Days[d] = append(out.Days[d], r)
		}
		sort.Slice(out.Days[d], func(a, b int) bool { return out.Days[d][a].Start < out.Days[d][b].Start })
	}
	*w = out
	return nil
}

func parseWeekday(s string) (time.Weekday, bool) {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(d.String(), s) || strings.EqualFold(d.String()[:3], s) {
			return d, true
		}
	}
	return 0, false
}
