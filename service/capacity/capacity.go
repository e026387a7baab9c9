// Package capacity owns the arithmetic of repository space: how fast a
// repository grows, when it will fill the space left at that rate, and
// when free space is low enough to warn. Pure functions over samples the
// callers read (a repository's usage over time, statfs of its volume).
package capacity

import (
	"math"
	"sort"
	"time"
)

// Sample is a repository's stored size at a time.
type Sample struct {
	Time time.Time
	Used int64 // bytes stored
}

// Forecast is the growth of a repository and what it means for its space.
type Forecast struct {
	// Known is false when the samples cannot say: fewer than two, or all
	// within an hour (the first backups of a new repository).
	Known bool
	// PerDay is the growth in bytes per day (negative: shrinking).
	PerDay float64
	// FullAt is when the free space runs out at that rate; zero when the
	// repository is not growing or the free space is not known.
	FullAt time.Time
}

// Window is how far back the growth is measured: recent enough to follow a
// change of jobs or retention, long enough to span a week's rhythm.
const Window = 30 * 24 * time.Hour

// Predict fits a least-squares line through the samples of the last Window
// before now and projects free (bytes; negative: unknown) forward.
func Predict(samples []Sample, free int64, now time.Time) Forecast {
	var use []Sample
	for _, s := range samples {
		if !s.Time.After(now) && now.Sub(s.Time) <= Window {
			use = append(use, s)
		}
	}
	if len(use) < 2 {
		return Forecast{}
	}
	sort.Slice(use, func(i, j int) bool { return use[i].Time.Before(use[j].Time) })
	if use[len(use)-1].Time.Sub(use[0].Time) < time.Hour {
		return Forecast{}
	}
	// Days since the first sample keep the sums small and exact enough.
	t0 := use[0].Time
	var n, sx, sy, sxx, sxy float64
	for _, s := range use {
		x := s.Time.Sub(t0).Hours() / 24
		y := float64(s.Used)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return Forecast{}
	}
	f := Forecast{Known: true, PerDay: (n*sxy - sx*sy) / den}
	if free >= 0 && f.PerDay > 0 {
		days := float64(free) / f.PerDay
		// Beyond a century the date means "not in any planning horizon";
		// also keeps the Duration from overflowing.
		if days < 36500 {
			f.FullAt = now.Add(time.Duration(math.Round(days * 24 * float64(time.Hour))))
		}
	}
	return f
}

// Low reports whether free space is below the threshold: percent of total
// (0 disables that test) or fewer than minBytes (0 disables it).
func Low(total, free int64, percent float64, minBytes int64) bool {
	if total <= 0 || free < 0 {
		return false
	}
	if percent > 0 && float64(free) < float64(total)*percent/100 {
		return true
	}
	return minBytes > 0 && free < minBytes
}
