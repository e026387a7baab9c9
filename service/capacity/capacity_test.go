package capacity

import (
	"testing"
	"time"
)

func TestPredict(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	day := func(d int, used int64) Sample { return Sample{Time: now.AddDate(0, 0, d), Used: used} }
	const gib = 1 << 30
	tests := []struct {
		name      string
		samples   []Sample
		free      int64
		known     bool
		perDay    float64
		fullInDay float64 // 0: no date
	}{
		{"no samples", nil, 100 * gib, false, 0, 0},
		{"one sample", []Sample{day(0, gib)}, 100 * gib, false, 0, 0},
		{"all within the hour", []Sample{{now.Add(-30 * time.Minute), gib}, {now, 2 * gib}}, 100 * gib, false, 0, 0},
		{"steady 1 GiB a day, 10 GiB free", []Sample{day(-3, 10*gib), day(-2, 11*gib), day(-1, 12*gib), day(0, 13*gib)}, 10 * gib, true, gib, 10},
		{"shrinking: no date", []Sample{day(-2, 12*gib), day(-1, 11*gib), day(0, 10*gib)}, 10 * gib, true, -gib, 0},
		{"free unknown (object store): rate only", []Sample{day(-1, gib), day(0, 2*gib)}, -1, true, gib, 0},
		{"samples older than the window are ignored", []Sample{day(-90, 0), day(-1, 50*gib), day(0, 51*gib)}, 5 * gib, true, gib, 5},
		{"future samples (a clock that jumped) are ignored", []Sample{day(-1, gib), day(0, 2*gib), day(5, 100*gib)}, 4 * gib, true, gib, 4},
		{"growth too slow for a date within a century", []Sample{day(-10, gib), day(0, gib+10)}, 100 * gib, true, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := Predict(tc.samples, tc.free, now)
			if f.Known != tc.known {
				t.Fatalf("Known = %v, want %v (%+v)", f.Known, tc.known, f)
			}
			if d := f.PerDay - tc.perDay; d > 1e-3*gib || d < -1e-3*gib {
				t.Errorf("PerDay = %.0f, want %.0f", f.PerDay, tc.perDay)
			}
			switch {
			case tc.fullInDay == 0 && !f.FullAt.IsZero():
				t.Errorf("FullAt = %v, want none", f.FullAt)
			case tc.fullInDay != 0:
				got := f.FullAt.Sub(now).Hours() / 24
				if d := got - tc.fullInDay; d > 0.01 || d < -0.01 {
					t.Errorf("full in %.3f days, want %.3f", got, tc.fullInDay)
				}
			}
		})
	}
}

func TestLow(t *testing.T) {
	tests := []struct {
		total, free int64
		pct         float64
		min         int64
		want        bool
	}{
		{100, 9, 10, 0, true},
		{100, 10, 10, 0, false},
		{100, 50, 0, 60, true},
		{100, 50, 0, 0, false},
		{0, 0, 10, 10, false},    // unknown total
		{100, -1, 10, 10, false}, // unknown free
	}
	for _, tc := range tests {
		if got := Low(tc.total, tc.free, tc.pct, tc.min); got != tc.want {
			t.Errorf("Low(%d, %d, %v, %d) = %v, want %v", tc.total, tc.free, tc.pct, tc.min, got, tc.want)
		}
	}
}

func TestWatch(t *testing.T) {
	w := &Watch{T: Threshold{Percent: 10}}
	const total = 1000
	steps := []struct {
		free int64
		want Change
	}{
		{500, Unchanged},
		{99, BecameLow},
		{50, Unchanged},  // still low: no second alert
		{105, Unchanged}, // above 10% but inside the margin
		{111, Recovered},
		{120, Unchanged},
		{80, BecameLow},
	}
	for i, s := range steps {
		if got := w.Observe("r1", total, s.free); got != s.want {
			t.Fatalf("step %d (free %d): %v, want %v", i, s.free, got, s.want)
		}
	}
	if got := w.Observe("r2", total, 500); got != Unchanged {
		t.Fatalf("another repository shares state: %v", got)
	}
}
