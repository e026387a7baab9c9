package ratelimit

import "time"

// Period is a recurring stretch of time such as a weekly window
// (policy.Window implements it).
type Period interface {
	// State reports whether the period is open at t and when that next
	// changes (the zero time: never).
	State(t time.Time) (open bool, next time.Time)
}

// Window is a rate in force while Period is open.
type Window struct {
	Period Period
	Rate   float64 // bytes/s; 0 unlimited
}

// Schedule is a default rate and the windows that override it; the first
// open window wins.
type Schedule struct {
	Default float64 // bytes/s; 0 unlimited
	Windows []Window
}

// At returns the rate in force at t and the earliest instant after t at
// which any window opens or closes (zero: never).
func (s Schedule) At(t time.Time) (rate float64, until time.Time) {
	rate = s.Default
	found := false
	for _, w := range s.Windows {
		if w.Period == nil {
			continue
		}
		open, next := w.Period.State(t)
		if open && !found {
			rate, found = w.Rate, true
		}
		if next.After(t) && (until.IsZero() || next.Before(until)) {
			until = next
		}
	}
	return rate, until
}

// Unlimited reports whether the schedule never limits.
func (s Schedule) Unlimited() bool {
	if s.Default > 0 {
		return false
	}
	for _, w := range s.Windows {
		if w.Rate > 0 {
			return false
		}
	}
	return true
}
