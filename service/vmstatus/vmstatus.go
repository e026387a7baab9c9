// Package vmstatus owns the one rule set that says what the appliance knows
// of each VM's protection: which VMs there are (the inventory's, and those
// only restore points remember), which jobs select them, their newest
// complete restore point and whether their last backup failed. The API's
// VM list and dashboard and the daily report all read it, so they never
// disagree. Pure: callers read the inventory, jobs, points and states.
//
// Protected means a job covers the VM: an enabled job selects it and its
// newest complete point is recent for that job's schedule (made in or after
// the job's last closed window, a day of grace before it). A point made by
// "Back up now" of a VM no enabled job selects is an ad-hoc point: the VM
// has a copy, but nothing keeps it current, so it is not protected.
package vmstatus

import (
	"slices"
	"time"

	"github.com/vmvault/vmvault/policy"
)

// Point is what the rules need of a restore point.
type Point struct {
	InstanceUUID, Name, MoRef string
	Time                      time.Time
	Partial                   bool
}

// Key identifies the VM a point belongs to: its instance UUID, else its name.
func (p Point) Key() string {
	if p.InstanceUUID != "" {
		return p.InstanceUUID
	}
	return p.Name
}

// VMPoints sums up one VM's restore points (in one repository, or all):
// how many, and when its newest complete one was made. A caller with an
// index of its points passes these; Summarize makes them from a list.
type VMPoints struct {
	InstanceUUID, Name, MoRef string
	Points                    int
	HasComplete               bool      // the VM has a complete point
	LastComplete              time.Time // when the newest complete one was made
}

// Key identifies the VM: its instance UUID, else its name.
func (v VMPoints) Key() string {
	return Point{InstanceUUID: v.InstanceUUID, Name: v.Name}.Key()
}

// Summarize sums up points (newest first) per VM, in order of each VM's
// newest point.
func Summarize(points []Point) []VMPoints {
	var out []VMPoints
	at := map[string]int{}
	for _, p := range points {
		k := p.Key()
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, VMPoints{InstanceUUID: p.InstanceUUID, Name: p.Name, MoRef: p.MoRef})
		}
		out[i].Points++
		if !p.Partial && !out[i].HasComplete {
			out[i].HasComplete, out[i].LastComplete = true, p.Time
		}
	}
	return out
}

// Input is everything the rules read.
type Input struct {
	Inventory     []policy.VM
	HaveInventory bool         // false: vCenter is unavailable or not configured
	Jobs          []policy.Job // every job, enabled or not
	Points        []VMPoints   // per VM (a VM may come once per repository)
	States        []policy.VMState
	// Now is when a point's recency is judged; zero: every complete point
	// is recent (callers without a clock, tests of other rules).
	Now time.Time
}

// Status is one VM.
type Status struct {
	Key         string // instance UUID, else the name of a VM known only from points
	Name, MoRef string
	InInventory bool
	Tags        []string
	Jobs        []string // ids of the jobs whose selection matches the VM now (inventory VMs)
	EnabledJobs []string // the enabled ones among Jobs
	Points      int
	LastPoint   int       // index in Input.Points of the newest complete point, -1 without one
	LastError   string    // of the latest attempt, when it failed after its job's last success
	LastAttempt time.Time // the latest attempt in a job that still selects the VM
	// Recent: the newest complete point is recent enough for one of the
	// enabled jobs that select the VM (see Due).
	Recent bool
}

// HasPoint reports whether the VM has a complete restore point.
func (s Status) HasPoint() bool { return s.LastPoint >= 0 }

// Protected reports whether a job covers the VM: an enabled job selects
// it and its newest complete point is recent for that job.
func (s Status) Protected() bool { return s.HasPoint() && len(s.EnabledJobs) > 0 && s.Recent }

// AdHoc reports whether the VM's complete points are all it has: no
// enabled job selects it (a "Back up now" of a VM outside every job).
func (s Status) AdHoc() bool { return s.HasPoint() && len(s.EnabledJobs) == 0 }

// Overdue reports whether an enabled job selects the VM but its newest
// complete point is older than that job's schedule expects.
func (s Status) Overdue() bool { return s.HasPoint() && len(s.EnabledJobs) > 0 && !s.Recent }

// Grace is how much older than the open of a job's last closed window a
// point may be and still count as recent: a "Back up now" the day before.
const Grace = 24 * time.Hour

// lookBack bounds the search for a job's last closed window: a valid
// window opens at least once a week.
const lookBack = 15 * 24 * time.Hour

// Due is the time from which a point is recent for job at now: the open of
// its window's last occurrence closed by now, less Grace. A job whose
// window closed in none of the last 15 days (an empty window) expects
// nothing: the zero time.
func Due(job policy.Job, now time.Time) time.Time {
	var last policy.Occurrence
	for _, o := range job.Window.Between(now.Add(-lookBack), now) {
		if !o.Close.After(now) {
			last = o
		}
	}
	if last.Open.IsZero() {
		return time.Time{}
	}
	return last.Open.Add(-Grace)
}

// Failed reports whether the VM's latest backup attempt, in a job that
// still selects it, failed after that job's last success of the VM.
func (s Status) Failed() bool { return s.LastError != "" }

// State is "failed", "protected" or "unprotected", in that order of
// precedence: a VM with an old good point whose last backup failed needs
// attention.
func (s Status) State() string {
	switch {
	case s.Failed():
		return "failed"
	case s.Protected():
		return "protected"
	}
	return "unprotected"
}

// Compute applies the rules: the inventory's VMs in its order, then VMs
// known only from restore points or job states, newest point first. A job
// state counts only while the job still selects the VM (an old error of a
// VM taken out of a job says nothing now).
func Compute(in Input) []Status {
	byKey := map[string]*Status{}
	var order []string
	add := func(key, name, moref string) *Status {
		if s := byKey[key]; s != nil {
			return s
		}
		s := &Status{Key: key, Name: name, MoRef: moref, LastPoint: -1, Jobs: []string{}, EnabledJobs: []string{}, Tags: []string{}}
		byKey[key] = s
		order = append(order, key)
		return s
	}
	// One compiled matcher per job, not a scan of its VM list per VM.
	matches := make([]func(policy.VM) bool, len(in.Jobs))
	for i, j := range in.Jobs {
		matches[i] = j.Selection.Matcher()
	}
	enabled := map[string]bool{}
	for _, j := range in.Jobs {
		enabled[j.ID] = j.Enabled
	}
	for _, vm := range in.Inventory {
		s := add(vm.InstanceUUID, vm.Name, vm.MoRef)
		s.InInventory = true
		s.Tags = append(s.Tags, vm.Tags...)
		for i, j := range in.Jobs {
			if matches[i](vm) {
				s.Jobs = append(s.Jobs, j.ID)
				if j.Enabled {
					s.EnabledJobs = append(s.EnabledJobs, j.ID)
				}
			}
		}
	}
	for i, p := range in.Points {
		s := add(p.Key(), p.Name, p.MoRef)
		s.Points += p.Points
		if p.HasComplete && (s.LastPoint < 0 || p.LastComplete.After(in.Points[s.LastPoint].LastComplete)) {
			s.LastPoint = i
		}
	}
	// Per VM, the latest attempt among the jobs that still select it.
	for _, st := range in.States {
		if !st.Selected {
			continue
		}
		s := byKey[st.VM]
		if s == nil {
			s = add(st.VM, st.Name, "")
		}
		// Without the inventory, the jobs' last resolved selections say
		// which jobs select a VM (vCenter down must not unprotect it).
		if !in.HaveInventory && enabled[st.Job] && !slices.Contains(s.EnabledJobs, st.Job) {
			s.Jobs = append(s.Jobs, st.Job)
			s.EnabledJobs = append(s.EnabledJobs, st.Job)
		}
		if !s.LastAttempt.IsZero() && !st.LastAttempt.After(s.LastAttempt) {
			continue
		}
		s.LastAttempt, s.LastError = st.LastAttempt, ""
		if st.LastError != "" && st.LastAttempt.After(st.LastSuccess) {
			s.LastError = st.LastError
		}
	}
	due := map[string]time.Time{}
	jobByID := map[string]policy.Job{}
	for _, j := range in.Jobs {
		jobByID[j.ID] = j
	}
	out := make([]Status, 0, len(order))
	for _, k := range order {
		s := byKey[k]
		if s.LastPoint >= 0 {
			at := in.Points[s.LastPoint].LastComplete
			for _, id := range s.EnabledJobs {
				if in.Now.IsZero() {
					s.Recent = true
					break
				}
				d, ok := due[id]
				if !ok {
					d = Due(jobByID[id], in.Now)
					due[id] = d
				}
				if !at.Before(d) {
					s.Recent = true
					break
				}
			}
		}
		out = append(out, *s)
	}
	return out
}
