// Package vmstatus owns the one rule set that says what the appliance knows
// of each VM's protection: which VMs there are (the inventory's, and those
// only restore points remember), which jobs select them, their newest
// complete restore point and whether their last backup failed. The API's
// VM list and dashboard and the daily report all read it, so they never
// disagree. Pure: callers read the inventory, jobs, points and states.
package vmstatus

import (
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
}

// Protected reports whether the VM has a complete restore point.
func (s Status) Protected() bool { return s.LastPoint >= 0 }

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
		if !s.LastAttempt.IsZero() && !st.LastAttempt.After(s.LastAttempt) {
			continue
		}
		s.LastAttempt, s.LastError = st.LastAttempt, ""
		if st.LastError != "" && st.LastAttempt.After(st.LastSuccess) {
			s.LastError = st.LastError
		}
	}
	out := make([]Status, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}
