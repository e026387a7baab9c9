package policy

import (
	"fmt"
	"time"
)

// A job's window says when backups may run; its slots say how often a run
// starts while the window is open. An opening is cut into slots of
// EveryHours from its start (the last one shorter), and each slot is a run
// of its own: "every 4 hours inside the window". Without EveryHours an
// opening longer than a day is still cut into days, so a weekend that is one
// 60-hour opening backs up on Saturday and on Sunday, not once on Friday.
const defaultSlot = 24 * time.Hour

// MaxEveryHours bounds Job.EveryHours: a week, the window's own period.
const MaxEveryHours = 7 * 24

// slot returns the length of j's slots.
func (j Job) slot() time.Duration {
	if j.EveryHours > 0 {
		return time.Duration(j.EveryHours) * time.Hour
	}
	return defaultSlot
}

// cut returns the slot of o that holds t (t inside o).
func (j Job) cut(o Occurrence, t time.Time) Occurrence {
	p := j.slot()
	if o.Close.Sub(o.Open) <= p {
		return o
	}
	k := t.Sub(o.Open) / p
	open := o.Open.Add(k * p)
	return Occurrence{Open: open, Close: minTime(open.Add(p), o.Close)}
}

// Slot returns the run slot that holds t: the part of the window's opening
// at t that one run covers.
func (j Job) Slot(t time.Time) (Occurrence, bool) {
	o, ok := j.Window.At(t)
	if !ok {
		return Occurrence{}, false
	}
	return j.cut(o, t), true
}

// NextSlot returns the slot that holds t, or else the next one to open.
func (j Job) NextSlot(t time.Time) (Occurrence, bool) {
	if s, ok := j.Slot(t); ok {
		return s, true
	}
	o, ok := j.Window.Next(t)
	if !ok {
		return Occurrence{}, false
	}
	return j.cut(o, o.Open), true
}

// SlotsBetween returns the slots that open in [from, to), in order.
func (j Job) SlotsBetween(from, to time.Time) []Occurrence {
	if !to.After(from) {
		return nil
	}
	// An opening that started before from may still have slots opening
	// inside the span.
	occs := j.Window.Between(from.Add(-8*24*time.Hour), to)
	var out []Occurrence
	p := j.slot()
	for _, o := range occs {
		for open := o.Open; open.Before(o.Close); open = open.Add(p) {
			if !open.Before(from) && open.Before(to) {
				out = append(out, Occurrence{Open: open, Close: minTime(open.Add(p), o.Close)})
			}
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// fmtHours says a slot length in words: "4 h", "24 h".
func fmtHours(d time.Duration) string {
	return fmt.Sprintf("%d h", int(d/time.Hour))
}
