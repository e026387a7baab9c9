package verifyjob

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/web/api"
)

// Job and Run are the API's types: this package fills them as they are.
type (
	Job = api.VerificationJob
	Run = api.VerificationRun
)

// Event kinds of runs.
const (
	EventFinished = "verification.finished"
	EventFailed   = "verification.failed"
)

// Run states.
const (
	RunRunning     = "running"
	RunFinished    = "finished"
	RunFailed      = "failed"
	RunInterrupted = "interrupted"
)

// MaxConcurrentLimit bounds a job's maxConcurrent (each boot runs a VM;
// the Manager's own MaxBoots bounds boots across jobs too).
const MaxConcurrentLimit = 16

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Validate reports every bad field (policy.ValidationError, matching
// policy.ErrInvalid).
func Validate(j Job) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &policy.ValidationError{Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if !idRE.MatchString(j.ID) {
		bad("id", "must be 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if len(j.Name) > 200 {
		bad("name", "at most 200 characters")
	}
	if err := j.Window.Validate(); err != nil {
		bad("window", "%v", err)
	}
	for i, v := range j.VMs {
		if v == "" || len(v) > 255 {
			bad(fmt.Sprintf("vms[%d]", i), "must be a VM name, instance UUID or name pattern with * (1-255 characters)")
		}
	}
	mode := modeOf(j)
	switch mode {
	case verification.ModeWalk, verification.ModeBoot, verification.ModeBoth:
	default:
		bad("mode", "%q: want walk, boot or both", j.Mode)
	}
	if mode == verification.ModeWalk {
		for _, f := range []struct {
			field string
			set   bool
		}{{"network", j.Network != ""}, {"ports", len(j.Ports) > 0}, {"url", j.URL != ""}} {
			if f.set {
				bad(f.field, "probes a booted VM: use mode boot or both")
			}
		}
	}
	{
		seen := map[int]bool{}
		for i, p := range j.Ports {
			switch {
			case p < 1 || p > 65535:
				bad(fmt.Sprintf("ports[%d]", i), "%d: want 1-65535", p)
			case seen[p]:
				bad(fmt.Sprintf("ports[%d]", i), "%d listed twice", p)
			}
			seen[p] = true
		}
		if j.URL != "" {
			if err := verification.CheckURL(j.URL); err != nil {
				bad("url", "%s", strings.TrimPrefix(err.Error(), verification.ErrInvalid.Error()+": "))
			}
		}
	}
	if len(j.Network) > 255 {
		bad("network", "at most 255 characters")
	}
	if j.MaxConcurrent < 0 || j.MaxConcurrent > MaxConcurrentLimit {
		bad("maxConcurrent", "%d: want 0 (default 1) to %d", j.MaxConcurrent, MaxConcurrentLimit)
	}
	return errors.Join(errs...)
}

func modeOf(j Job) string {
	if j.Mode == "" {
		return verification.ModeWalk
	}
	return j.Mode
}

func maxConcurrent(j Job) int { return max(j.MaxConcurrent, 1) }

// selects reports whether the job verifies the points of a VM.
func selects(j Job, name, uuid string) bool {
	if len(j.VMs) == 0 {
		return true
	}
	for _, v := range j.VMs {
		if (uuid != "" && v == uuid) || match(v, name) {
			return true
		}
	}
	return false
}

// match is a glob with only *: any run of characters ('/' included, VM
// names have them).
func match(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}
