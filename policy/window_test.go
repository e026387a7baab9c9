package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load zone %s (install tzdata): %v", name, err)
	}
	return loc
}

func mustRange(t *testing.T, s string) Range {
	t.Helper()
	r, err := ParseRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func nightly(t *testing.T, loc *time.Location, spec string) Window {
	t.Helper()
	w := Window{Location: loc}
	for d := range w.Days {
		w.Days[d] = []Range{mustRange(t, spec)}
	}
	return w
}

func TestWindowValidate(t *testing.T) {
	r := func(s string) Range { return mustRange(t, s) }
	tests := []struct {
		name string
		w    Window
		want string // substring of the error, "" for valid
	}{
		{"default", DefaultWindow(time.UTC), ""},
		{"always", AlwaysOpen(time.UTC), ""},
		{"empty", Window{}, "no time ranges"},
		{"empty range", Window{Days: [7][]Range{time.Monday: {{60, 60}}}}, "empty range"},
		{"out of range", Window{Days: [7][]Range{time.Monday: {{-1, 60}}}}, "out of range"},
		{"overlap same day", Window{Days: [7][]Range{time.Monday: {r("01:00-03:00"), r("02:00-04:00")}}}, "overlaps"},
		{"overlap across midnight", Window{Days: [7][]Range{time.Monday: {r("22:00-02:00")}, time.Tuesday: {r("01:00-03:00")}}}, "overlaps"},
		{"overlap saturday into sunday", Window{Days: [7][]Range{time.Saturday: {r("22:00-02:00")}, time.Sunday: {r("00:00-01:00")}}}, "overlaps"},
		{"adjacent is fine", Window{Days: [7][]Range{time.Monday: {r("22:00-24:00")}, time.Tuesday: {r("00:00-06:00")}}}, ""},
		{"touching across week wrap", Window{Days: [7][]Range{time.Saturday: {r("22:00-00:00")}, time.Sunday: {r("00:00-01:00")}}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want))):
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseRangeErrors(t *testing.T) {
	for _, s := range []string{"", "22:00", "25:00-01:00", "22:60-01:00", "24:00-01:00", "2200-0100", "aa:bb-01:00", "01:00-24:01"} {
		if _, err := ParseRange(s); err == nil {
			t.Errorf("ParseRange(%q) accepted", s)
		}
	}
	if r, err := ParseRange("22:30-24:00"); err != nil || r != (Range{22*60 + 30, 1440}) {
		t.Errorf("ParseRange 24:00 end = %v, %v", r, err)
	}
}

func TestWindowContainsAndNext(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	ny := mustLoc(t, "America/New_York")
	at := func(loc *time.Location, s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	utc := func(s string) time.Time { return at(time.UTC, s) }
	tests := []struct {
		name        string
		w           Window
		t           time.Time
		contains    bool
		open, close time.Time
	}{
		// 2026-03-29 is the spring-forward Sunday in Berlin (02:00 CET -> 03:00 CEST).
		{"berlin spring night open before gap", nightly(t, berlin, "22:00-06:00"), at(berlin, "2026-03-29 01:30"), true, utc("2026-03-28 21:00"), utc("2026-03-29 04:00")},
		{"berlin spring range inside gap starts at gap end", nightly(t, berlin, "02:30-05:00"), utc("2026-03-29 00:30"), false, utc("2026-03-29 01:00"), utc("2026-03-29 03:00")},
		{"berlin spring range entirely in gap is skipped", nightly(t, berlin, "02:10-02:50"), utc("2026-03-28 12:00"), false, utc("2026-03-30 00:10"), utc("2026-03-30 00:50")},
		// 2026-10-25 is the fall-back Sunday in Berlin (03:00 CEST -> 02:00 CET).
		{"berlin fall night is 9h", nightly(t, berlin, "22:00-06:00"), utc("2026-10-25 04:30"), true, utc("2026-10-24 20:00"), utc("2026-10-25 05:00")},
		{"berlin fall ambiguous start takes first", nightly(t, berlin, "02:30-04:00"), utc("2026-10-24 23:00"), false, utc("2026-10-25 00:30"), utc("2026-10-25 03:00")},
		// 2026-03-08 spring forward in New York (02:00 EST -> 03:00 EDT).
		{"ny spring night is 7h", nightly(t, ny, "23:00-06:00"), utc("2026-03-08 09:59"), true, utc("2026-03-08 04:00"), utc("2026-03-08 10:00")},
		// 2026-11-01 fall back in New York (02:00 EDT -> 01:00 EST).
		{"ny fall night is 9h", nightly(t, ny, "23:00-06:00"), utc("2026-11-01 10:30"), true, utc("2026-11-01 03:00"), utc("2026-11-01 11:00")},
		{"ny closed returns next", nightly(t, ny, "23:00-06:00"), utc("2026-11-01 11:00"), false, utc("2026-11-02 04:00"), utc("2026-11-02 11:00")},
		{"midnight crossing open just after midnight", nightly(t, time.UTC, "22:00-02:00"), utc("2026-05-05 00:00"), true, utc("2026-05-04 22:00"), utc("2026-05-05 02:00")},
		{"close instant is outside", nightly(t, time.UTC, "22:00-02:00"), utc("2026-05-05 02:00"), false, utc("2026-05-05 22:00"), utc("2026-05-06 02:00")},
		{"open instant is inside", nightly(t, time.UTC, "22:00-02:00"), utc("2026-05-05 22:00"), true, utc("2026-05-05 22:00"), utc("2026-05-06 02:00")},
		// 2026-05-08 is a Friday: the default window's Friday night, Saturday,
		// Sunday and Monday morning touch and are one occurrence.
		{"default friday night is the weekend", DefaultWindow(time.UTC), utc("2026-05-08 23:59"), true, utc("2026-05-08 18:00"), utc("2026-05-11 06:00")},
		{"default saturday midnight is the same weekend", DefaultWindow(time.UTC), utc("2026-05-09 00:00"), true, utc("2026-05-08 18:00"), utc("2026-05-11 06:00")},
		{"default monday morning ends the weekend", DefaultWindow(time.UTC), utc("2026-05-11 05:00"), true, utc("2026-05-08 18:00"), utc("2026-05-11 06:00")},
		{"default monday day closed, next is one night", DefaultWindow(time.UTC), utc("2026-05-11 12:00"), false, utc("2026-05-11 18:00"), utc("2026-05-12 06:00")},
		{"one day a week", Window{Days: [7][]Range{time.Wednesday: {mustRange(t, "01:00-02:00")}}}, utc("2026-05-07 12:00"), false, utc("2026-05-13 01:00"), utc("2026-05-13 02:00")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.w.Validate(); err != nil {
				t.Fatalf("validate: %v", err)
			}
			if got := tc.w.Contains(tc.t); got != tc.contains {
				t.Errorf("Contains = %v, want %v", got, tc.contains)
			}
			o, ok := tc.w.Next(tc.t)
			if !ok || !o.Open.Equal(tc.open) || !o.Close.Equal(tc.close) {
				t.Errorf("Next = [%v, %v) %v, want [%v, %v)", o.Open.UTC(), o.Close.UTC(), ok, tc.open.UTC(), tc.close.UTC())
			}
		})
	}
	if _, ok := (Window{}).Next(time.Now()); ok {
		t.Error("empty window has a next occurrence")
	}
}

func TestWindowJSONRoundTrip(t *testing.T) {
	w := DefaultWindow(mustLoc(t, "Europe/Berlin"))
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var back Window
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Location.String() != "Europe/Berlin" || fmt.Sprint(back.Days) != fmt.Sprint(w.Days) {
		t.Fatalf("round trip changed the window: %s -> %+v", b, back)
	}
	for _, bad := range []string{`{"location":"Mars/Base","days":{}}`, `{"location":"UTC","days":{"funday":["01:00-02:00"]}}`, `{"location":"UTC","days":{"monday":["1-2"]}}`, `[]`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestWindowGolden lists every occurrence around the DST weeks of Berlin and
// New York for the default window and for midnight-crossing nights.
func TestWindowGolden(t *testing.T) {
	var buf bytes.Buffer
	cases := []struct {
		zone       string
		from, to   string
		rangeSpecs []string
	}{
		{"Europe/Berlin", "2026-03-27", "2026-03-31", []string{"default", "22:00-06:00", "01:30-03:30", "02:00-03:00"}},
		{"Europe/Berlin", "2026-10-23", "2026-10-27", []string{"default", "22:00-06:00", "01:30-03:30", "02:00-03:00"}},
		{"America/New_York", "2026-03-06", "2026-03-10", []string{"default", "23:00-05:00", "01:30-03:30"}},
		{"America/New_York", "2026-10-30", "2026-11-03", []string{"default", "23:00-05:00", "01:00-02:00"}},
	}
	for _, c := range cases {
		loc := mustLoc(t, c.zone)
		from, _ := time.ParseInLocation("2006-01-02", c.from, loc)
		to, _ := time.ParseInLocation("2006-01-02", c.to, loc)
		for _, spec := range c.rangeSpecs {
			w := DefaultWindow(loc)
			if spec != "default" {
				w = nightly(t, loc, spec)
			}
			fmt.Fprintf(&buf, "== %s %s .. %s window %s\n", c.zone, c.from, c.to, spec)
			for _, o := range w.Between(from, to) {
				fmt.Fprintf(&buf, "%s  %s -> %s  (%s)  utc %s -> %s\n",
					o.Open.In(loc).Format("Mon"), o.Open.In(loc).Format("2006-01-02 15:04 MST"), o.Close.In(loc).Format("2006-01-02 15:04 MST"),
					o.Close.Sub(o.Open), o.Open.UTC().Format("01-02 15:04"), o.Close.UTC().Format("01-02 15:04"))
			}
		}
	}
	checkGolden(t, "windows", buf.Bytes())
}

// TestWindowOccurrencesMerge proves that ranges which touch form one
// occurrence (so "at most once per window" holds over a night or a weekend)
// and that any gap splits: for every probe instant At must return exactly
// the expected occurrence, and Between must list exactly the expected ones.
func TestWindowOccurrencesMerge(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	in := func(loc *time.Location, s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	days := func(loc *time.Location, spec map[time.Weekday][]string) Window {
		w := Window{Location: loc}
		for d, rs := range spec {
			for _, r := range rs {
				w.Days[d] = append(w.Days[d], mustRange(t, r))
			}
		}
		if err := w.Validate(); err != nil {
			t.Fatalf("window %v: %v", spec, err)
		}
		return w
	}
	type occ = occSpan
	// 2026-05-04 is a Monday, 2026-05-08 a Friday.
	tests := []struct {
		name     string
		w        Window
		from, to time.Time // probe every 15 minutes in [from, to) and list Between(from, to)
		want     []occ     // every occurrence open at some probe, in order
	}{
		{"default: friday 18:00 through monday 06:00 is one", DefaultWindow(time.UTC), utc("2026-05-08 12:00"), utc("2026-05-11 12:00"),
			[]occ{{utc("2026-05-08 18:00"), utc("2026-05-11 06:00")}}},
		{"default: a week is four nights and one weekend", DefaultWindow(time.UTC), utc("2026-05-04 12:00"), utc("2026-05-11 12:00"),
			[]occ{
				{utc("2026-05-04 18:00"), utc("2026-05-05 06:00")},
				{utc("2026-05-05 18:00"), utc("2026-05-06 06:00")},
				{utc("2026-05-06 18:00"), utc("2026-05-07 06:00")},
				{utc("2026-05-07 18:00"), utc("2026-05-08 06:00")},
				{utc("2026-05-08 18:00"), utc("2026-05-11 06:00")},
			}},
		{"default across spring forward in Berlin (59 hours)", DefaultWindow(berlin), in(berlin, "2026-03-27 12:00"), in(berlin, "2026-03-30 12:00"),
			[]occ{{in(berlin, "2026-03-27 18:00"), in(berlin, "2026-03-30 06:00")}}},
		{"a one-minute gap before midnight splits", days(time.UTC, map[time.Weekday][]string{time.Friday: {"18:00-23:59"}, time.Saturday: {"00:00-24:00"}}),
			utc("2026-05-08 12:00"), utc("2026-05-10 12:00"),
			[]occ{{utc("2026-05-08 18:00"), utc("2026-05-08 23:59")}, {utc("2026-05-09 00:00"), utc("2026-05-10 00:00")}}},
		{"a one-minute gap after midnight splits", days(time.UTC, map[time.Weekday][]string{time.Friday: {"18:00-24:00"}, time.Saturday: {"00:01-06:00"}}),
			utc("2026-05-08 12:00"), utc("2026-05-09 12:00"),
			[]occ{{utc("2026-05-08 18:00"), utc("2026-05-09 00:00")}, {utc("2026-05-09 00:01"), utc("2026-05-09 06:00")}}},
		{"saturday into sunday into monday wraps the week", days(time.UTC, map[time.Weekday][]string{time.Saturday: {"22:00-24:00"}, time.Sunday: {"00:00-24:00"}, time.Monday: {"00:00-02:00"}}),
			utc("2026-05-09 12:00"), utc("2026-05-11 12:00"),
			[]occ{{utc("2026-05-09 22:00"), utc("2026-05-11 02:00")}}},
		{"a range crossing midnight touches the next day's range", days(time.UTC, map[time.Weekday][]string{time.Tuesday: {"22:00-02:00"}, time.Wednesday: {"02:00-04:00", "04:00-05:00"}}),
			utc("2026-05-05 12:00"), utc("2026-05-06 12:00"),
			[]occ{{utc("2026-05-05 22:00"), utc("2026-05-06 05:00")}}},
		{"same-day ranges that touch", days(time.UTC, map[time.Weekday][]string{time.Monday: {"01:00-02:00", "02:00-03:00", "03:30-04:00"}}),
			utc("2026-05-04 00:00"), utc("2026-05-04 12:00"),
			[]occ{{utc("2026-05-04 01:00"), utc("2026-05-04 03:00")}, {utc("2026-05-04 03:30"), utc("2026-05-04 04:00")}}},
		// 2026-03-29: Berlin skips 02:00-03:00, so 22:00-02:00 and 03:00-06:00
		// leave no closed instant that night; on other nights they are two.
		{"a gap swallowed by spring forward joins", days(berlin, map[time.Weekday][]string{time.Saturday: {"22:00-02:00"}, time.Sunday: {"03:00-06:00"}}),
			in(berlin, "2026-03-28 12:00"), in(berlin, "2026-03-29 12:00"),
			[]occ{{in(berlin, "2026-03-28 22:00"), in(berlin, "2026-03-29 06:00")}}},
		{"the same gap on an ordinary night splits", days(berlin, map[time.Weekday][]string{time.Saturday: {"22:00-02:00"}, time.Sunday: {"03:00-06:00"}}),
			in(berlin, "2026-04-04 12:00"), in(berlin, "2026-04-05 12:00"),
			[]occ{{in(berlin, "2026-04-04 22:00"), in(berlin, "2026-04-05 02:00")}, {in(berlin, "2026-04-05 03:00"), in(berlin, "2026-04-05 06:00")}}},
		{"open all week stays one occurrence per day", AlwaysOpen(time.UTC), utc("2026-05-04 00:00"), utc("2026-05-06 00:00"),
			[]occ{{utc("2026-05-04 00:00"), utc("2026-05-05 00:00")}, {utc("2026-05-05 00:00"), utc("2026-05-06 00:00")}}},
		{"open all but one minute a week is one long occurrence", days(time.UTC, map[time.Weekday][]string{
			time.Sunday: {"00:00-24:00"}, time.Monday: {"00:00-24:00"}, time.Tuesday: {"00:00-24:00"}, time.Wednesday: {"00:00-12:00", "12:01-24:00"},
			time.Thursday: {"00:00-24:00"}, time.Friday: {"00:00-24:00"}, time.Saturday: {"00:00-24:00"}}),
			utc("2026-05-06 13:00"), utc("2026-05-13 11:00"),
			[]occ{{utc("2026-05-06 12:01"), utc("2026-05-13 12:00")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seen []occ
			for p := tc.from; p.Before(tc.to); p = p.Add(15 * time.Minute) {
				o, ok := tc.w.At(p)
				if !ok {
					continue
				}
				if !o.Contains(p) {
					t.Fatalf("At(%v) = [%v, %v) does not contain it", p.UTC(), o.Open.UTC(), o.Close.UTC())
				}
				if n := len(seen); n == 0 || !seen[n-1].open.Equal(o.Open) || !seen[n-1].close.Equal(o.Close) {
					seen = append(seen, occ{o.Open, o.Close})
				}
			}
			if len(seen) != len(tc.want) {
				t.Fatalf("occurrences seen %v, want %v", fmtOccs(seen), fmtOccs(tc.want))
			}
			for i := range seen {
				if !seen[i].open.Equal(tc.want[i].open) || !seen[i].close.Equal(tc.want[i].close) {
					t.Fatalf("occurrences seen %v, want %v", fmtOccs(seen), fmtOccs(tc.want))
				}
			}
			// Between lists those that open inside the span, each merged too.
			var between []occ
			for _, o := range tc.w.Between(tc.from, tc.to) {
				between = append(between, occ{o.Open, o.Close})
			}
			var opening []occ
			for _, o := range tc.want {
				if !o.open.Before(tc.from) {
					opening = append(opening, o)
				}
			}
			if fmtOccs(between) != fmtOccs(opening) {
				t.Fatalf("Between = %v, want %v", fmtOccs(between), fmtOccs(opening))
			}
			// From just before it (when closed there), Next finds the first occurrence whole.
			if before := tc.want[0].open.Add(-time.Minute); tc.w.Contains(before) {
				// open all week: nothing to look ahead to
			} else if o, ok := tc.w.Next(before); !ok || !o.Open.Equal(tc.want[0].open) || !o.Close.Equal(tc.want[0].close) {
				t.Fatalf("Next before the first = [%v, %v) %v, want %v", o.Open.UTC(), o.Close.UTC(), ok, fmtOccs(tc.want[:1]))
			}
		})
	}
}

type occSpan struct{ open, close time.Time }

func fmtOccs(os []occSpan) string {
	var b bytes.Buffer
	for _, o := range os {
		fmt.Fprintf(&b, "[%s, %s) ", o.open.UTC().Format("Mon 01-02 15:04"), o.close.UTC().Format("Mon 01-02 15:04"))
	}
	return b.String()
}

// TestWindowMergeMarginSuffices compares the occurrences built with the
// window's own merge margin against a brute-force margin of five weeks, for
// windows with short, long and DST-joined chains, at every hour of the weeks
// around both Berlin transitions: a margin too small would cut a chain short
// and give a different Open.
func TestWindowMergeMarginSuffices(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	r := func(s string) Range { return mustRange(t, s) }
	all := Range{0, minutesPerDay}
	windows := map[string]Window{
		"default":     DefaultWindow(berlin),
		"nightly":     nightly(t, berlin, "22:00-06:00"),
		"five days":   {Location: berlin, Days: [7][]Range{time.Friday: {all}, time.Saturday: {all}, time.Sunday: {all}, time.Monday: {all}, time.Tuesday: {all}}},
		"gap at 2:30": {Location: berlin, Days: [7][]Range{time.Saturday: {r("00:00-24:00")}, time.Sunday: {r("00:00-02:30"), r("02:40-24:00")}, time.Monday: {all}, time.Tuesday: {all}, time.Wednesday: {all}, time.Thursday: {all}, time.Friday: {all}}},
		"short gaps":  {Location: berlin, Days: [7][]Range{time.Saturday: {r("22:00-02:00")}, time.Sunday: {r("03:00-06:00"), r("07:00-08:00")}}},
	}
	for name, w := range windows {
		if err := w.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, start := range []time.Time{time.Date(2026, 3, 22, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 18, 0, 0, 0, 0, time.UTC)} {
			for h := 0; h < 14*24; h++ {
				at := start.Add(time.Duration(h) * time.Hour)
				got := w.occurrencesAround(at, 2, 1)
				want := w.mergedAround(at, 2, 1, 35)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s at %v (margin %d):\n got %v\nwant %v", name, at, w.mergeMargin(), got, want)
				}
			}
		}
	}
}
