package api

import (
	"time"

	"github.com/vmvault/vmvault/policy"
)

// Verification jobs: a job, its runs and its running run as
// /verification-jobs shows them.

// VerificationJob verifies, in a window, the newest complete restore point
// of each selected VM (POST /restore-points/{id}/verify's check, on a
// schedule).
type VerificationJob struct {
	ID      string        `json:"id"`
	Name    string        `json:"name"`
	Enabled bool          `json:"enabled"`
	Window  policy.Window `json:"window"`
	// VMs are VM names, instance UUIDs or name patterns with * ("web-*");
	// empty: every VM with restore points.
	VMs []string `json:"vms"`
	// Mode is walk (default), boot or both; Network, Ports and URL are the
	// boot's isolated port group and probes.
	Mode    string `json:"mode,omitempty"`
	Network string `json:"network,omitempty"`
	Ports   []int  `json:"ports,omitempty"`
	URL     string `json:"url,omitempty"`
	// MaxConcurrent bounds the job's verifications at once (default 1).
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// OnlyNew verifies a VM's newest point only when it has no result yet;
	// false verifies the newest point again in every window opening.
	OnlyNew bool `json:"onlyNew"`
}

// VerificationRun is one run of a verification job.
type VerificationRun struct {
	ID      string    `json:"id"`
	Job     string    `json:"job"`
	Trigger string    `json:"trigger"`          // window or manual
	Window  string    `json:"window,omitempty"` // the occurrence's id
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
	// State is running, finished (every chosen point verified, or the
	// window closed first: Skipped says how many were left), failed (the
	// points could not be listed) or interrupted (the appliance stopped).
	State string `json:"state"`
	// Points were verified; Passed + Failed = Points; Errors could not be
	// verified at all; Skipped were left when the window closed.
	Points  int                    `json:"points"`
	Passed  int                    `json:"passed"`
	Failed  int                    `json:"failed"`
	Errors  int                    `json:"errors"`
	Skipped int                    `json:"skipped"`
	Error   string                 `json:"error,omitempty"`
	Results []VerificationRunPoint `json:"results"`
}

// VerificationRunPoint is one point of a run.
type VerificationRunPoint struct {
	Point        string `json:"point"`
	VM           string `json:"vm"`
	Verification string `json:"verification,omitempty"` // the result's id
	Result       string `json:"result,omitempty"`       // passed | failed; "" on error
	Reason       string `json:"reason,omitempty"`
	Error        string `json:"error,omitempty"`
}

// VerificationJobView is a job with its running run and last run.
type VerificationJobView struct {
	VerificationJob
	Running *VerificationRun `json:"running,omitempty"`
	LastRun *VerificationRun `json:"lastRun,omitempty"`
}
