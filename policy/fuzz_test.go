package policy

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzWindowJSON feeds arbitrary bytes to the window decoder; whatever it
// accepts and validates must answer At/Next/Between consistently.
func FuzzWindowJSON(f *testing.F) {
	for _, s := range []string{
		`{"location":"UTC","days":{"monday":["22:00-06:00"]}}`,
		`{"location":"Europe/Berlin","days":{"sunday":["02:00-03:00","22:00-00:00"],"sat":["00:00-00:00"]}}`,
		`{"location":"America/New_York","days":{"friday":["18:00-24:00"],"saturday":["00:00-24:00"]}}`,
		`{"location":"Europe/Berlin","days":{"saturday":["22:00-02:00"],"sunday":["03:00-06:00"]}}`,
		`{"location":"Mars/Base"}`,
		`{"days":{"funday":["x"]}}`,
	} {
		f.Add([]byte(s), int64(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, offsetMinutes int64) {
		var w Window
		if err := json.Unmarshal(b, &w); err != nil || w.Validate() != nil {
			return
		}
		at := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC).Add(time.Duration(offsetMinutes%(60*24*400)) * time.Minute)
		occ, ok := w.Next(at)
		if !ok {
			t.Fatalf("valid window %s has no next occurrence after %v", b, at)
		}
		if !occ.Close.After(occ.Open) {
			t.Fatalf("empty occurrence %v", occ)
		}
		if occ.Contains(at) != w.Contains(at) && !occ.Open.After(at) {
			t.Fatalf("Next and Contains disagree at %v: %v", at, occ)
		}
		if !occ.Contains(at) && !occ.Open.After(at) {
			t.Fatalf("Next returned a past occurrence %v at %v", occ, at)
		}
		// An occurrence is the same seen from its first and last instant, and
		// (unless the window never closes) the window is closed at its end:
		// touching ranges were merged.
		for _, probe := range []time.Time{occ.Open, occ.Close.Add(-time.Nanosecond)} {
			if o, ok := w.At(probe); !ok || !o.Open.Equal(occ.Open) || !o.Close.Equal(occ.Close) {
				t.Fatalf("At(%v) = %v %v, want %v", probe, o, ok, occ)
			}
		}
		if !w.openAllWeek() && w.Contains(occ.Close) {
			t.Fatalf("window %s still open at the close of %v: touching occurrences not merged", b, occ)
		}
		for _, o := range w.Between(at, at.Add(8*24*time.Hour)) {
			if !o.Close.After(o.Open) || o.Open.Before(at) {
				t.Fatalf("Between returned %v", o)
			}
		}
		if _, err := json.Marshal(w); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"22:00-06:00", "00:00-24:00", "24:00-01:00", "9:00-10:00", "ab:cd-ef:gh", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			return
		}
		if r.Start < 0 || r.Start >= minutesPerDay || r.End <= 0 || r.End > minutesPerDay {
			t.Fatalf("ParseRange(%q) = %+v out of bounds", s, r)
		}
		back, err := ParseRange(r.String())
		if err != nil || back != r {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v %v", s, r, r.String(), back, err)
		}
	})
}
