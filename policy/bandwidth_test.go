package policy

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"
)

func TestWindowState(t *testing.T) {
	var w Window
	if err := json.Unmarshal([]byte(`{"location":"Europe/Berlin","days":{"monday":["08:00-18:00"],"tuesday":["08:00-18:00"]}}`), &w); err != nil {
		t.Fatal(err)
	}
	berlin := w.Location
	at := func(d, h, m int) time.Time { return time.Date(2026, 12, d, h, m, 0, 0, berlin) } // 7 December 2026 is a Monday
	for _, tc := range []struct {
		name string
		t    time.Time
		open bool
		next time.Time
	}{
		{"before the opening", at(7, 7, 59), false, at(7, 8, 0)},
		{"at the opening", at(7, 8, 0), true, at(7, 18, 0)},
		{"just before the close", at(7, 17, 59), true, at(7, 18, 0)},
		{"at the close", at(7, 18, 0), false, at(8, 8, 0)},
		{"after the last day", at(8, 19, 0), false, at(14, 8, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open, next := w.State(tc.t)
			if open != tc.open || !next.Equal(tc.next) {
				t.Errorf("State(%s) = %v, %s; want %v, %s", tc.t, open, next, tc.open, tc.next)
			}
		})
	}
	if open, next := (Window{}).State(at(7, 9, 0)); open || !next.IsZero() {
		t.Errorf("an empty window: %v, %s", open, next)
	}
}

func TestValidateRates(t *testing.T) {
	for _, v := range []float64{0, 0.5, 1000, MaxMBps} {
		if err := ValidateMBps(v); err != nil {
			t.Errorf("ValidateMBps(%v): %v", v, err)
		}
	}
	for _, v := range []float64{-1, MaxMBps + 1, math.NaN(), math.Inf(1)} {
		if err := ValidateMBps(v); err == nil {
			t.Errorf("ValidateMBps(%v) accepted", v)
		}
	}
	ok := AlwaysOpen(time.UTC)
	errs := ValidateRateWindows("upload_schedule", []RateWindow{{Window: ok, MBps: 10}, {Window: Window{}, MBps: -2}})
	if len(errs) != 2 {
		t.Fatalf("got %v, want the empty window and the negative rate of item 1", errs)
	}
	var ve *ValidationError
	if !errors.As(errs[0], &ve) || ve.Field != "upload_schedule[1].window" {
		t.Errorf("first error %v", errs[0])
	}
	if !errors.As(errs[1], &ve) || ve.Field != "upload_schedule[1].mbps" {
		t.Errorf("second error %v", errs[1])
	}
}
