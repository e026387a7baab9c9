package policy

import (
	"fmt"
	"math"
	"time"
)

// State reports whether the window is open at t and when that next
// changes: the close of the occurrence open at t, else the next opening
// (the zero time for an empty window). It makes a Window an
// internal/ratelimit Period, so a bandwidth limit follows a weekly window
// (business hours) with the same DST rules as a backup window.
func (w Window) State(t time.Time) (open bool, next time.Time) {
	if o, ok := w.At(t); ok {
		return true, o.Close
	}
	if o, ok := w.Next(t); ok {
		return false, o.Open
	}
	return false, time.Time{}
}

// MaxMBps bounds a bandwidth limit (MB/s, 10^6 bytes per second): 100 GB/s
// is beyond any link an appliance has; more is a typo.
const MaxMBps = 100_000

// RateWindow is a bandwidth limit in force while its window is open, e.g.
// 10 MB/s during business hours.
type RateWindow struct {
	Window Window  `json:"window"`
	MBps   float64 `json:"mbps"` // MB/s (10^6 bytes/s); 0: unlimited while open
}

// ValidateMBps reports a limit that is not a number from 0 (unlimited) to
// MaxMBps.
func ValidateMBps(v float64) error {
	if math.IsNaN(v) || v < 0 || v > MaxMBps {
		return fmt.Errorf("%v: a rate in MB/s from 0 (unlimited) to %d", v, MaxMBps)
	}
	return nil
}

// ValidateRateWindows checks a schedule of limits: each window valid and
// open some time, each rate valid. field names the list in the errors.
func ValidateRateWindows(field string, ws []RateWindow) []error {
	var errs []error
	for i, w := range ws {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := w.Window.Validate(); err != nil {
			errs = append(errs, &ValidationError{Field: f + ".window", Msg: err.Error()})
		} else if w.Window.IsEmpty() {
			errs = append(errs, &ValidationError{Field: f + ".window", Msg: "has no open time"})
		}
		if err := ValidateMBps(w.MBps); err != nil {
			errs = append(errs, &ValidationError{Field: f + ".mbps", Msg: err.Error()})
		}
	}
	return errs
}
