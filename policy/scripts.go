package policy

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Script defaults and limits.
const (
	DefaultScriptTimeout = 300 * time.Second
	MaxScriptTimeout     = 86400 * time.Second
)

// ScriptFailure says what a failing script does to its job or VM.
type ScriptFailure string

// Script failure policies. The zero value means ScriptFail for a pre
// script and ScriptContinue for a post script.
const (
	// ScriptFail: a failing preJob fails every VM of the run, a failing
	// preVM fails its VM (no snapshot is taken), a failing postVM marks its
	// VM failed (the restore point is kept), a failing postJob is reported
	// as an error.
	ScriptFail ScriptFailure = "fail"
	// ScriptContinue records the failure as a warning and goes on.
	ScriptContinue ScriptFailure = "continue"
)

// Script is one command the appliance runs around a job or a VM's backup.
// Command is an argv, run without a shell (write ["sh", "-c", "..."] for
// one); a program name without a slash is looked up in the appliance's PATH.
type Script struct {
	Command        []string      `json:"command"`
	TimeoutSeconds int           `json:"timeoutSeconds,omitempty"` // 0 means 300
	OnFailure      ScriptFailure `json:"onFailure,omitempty"`
}

// Scripts are a job's hooks on the appliance. Nil members run nothing.
type Scripts struct {
	PreJob  *Script `json:"preJob,omitempty"`
	PostJob *Script `json:"postJob,omitempty"`
	PreVM   *Script `json:"preVM,omitempty"`
	PostVM  *Script `json:"postVM,omitempty"`
}

// Timeout is the script's effective time limit.
func (sc Script) Timeout() time.Duration {
	if sc.TimeoutSeconds <= 0 {
		return DefaultScriptTimeout
	}
	return time.Duration(sc.TimeoutSeconds) * time.Second
}

// Fails reports whether a failure of the script fails its job or VM; pre
// decides the default.
func (sc Script) Fails(pre bool) bool {
	if sc.OnFailure == "" {
		return pre
	}
	return sc.OnFailure == ScriptFail
}

// validate appends one error per bad field of the hook named field
// (scripts.preJob, ...).
func (sc *Script) validate(field string, bad func(field, format string, args ...any)) {
	if sc == nil {
		return
	}
	switch {
	case len(sc.Command) == 0 || sc.Command[0] == "":
		bad(field+".command", "needs a program (an argv such as [\"/usr/local/bin/freeze\", \"--all\"] or [\"sh\", \"-c\", \"...\"])")
	case strings.ContainsRune(sc.Command[0], '/') && !filepath.IsAbs(sc.Command[0]):
		bad(field+".command", "program %q must be an absolute path or a bare name looked up in PATH", sc.Command[0])
	}
	for i, a := range sc.Command {
		if strings.ContainsRune(a, 0) {
			bad(fmt.Sprintf("%s.command[%d]", field, i), "must not contain NUL")
		}
	}
	if sc.TimeoutSeconds < 0 || time.Duration(sc.TimeoutSeconds)*time.Second > MaxScriptTimeout {
		bad(field+".timeoutSeconds", "must be from 1 to %d seconds (0 means %d), not %d", int(MaxScriptTimeout/time.Second), int(DefaultScriptTimeout/time.Second), sc.TimeoutSeconds)
	}
	switch sc.OnFailure {
	case "", ScriptFail, ScriptContinue:
	default:
		bad(field+".onFailure", "unknown policy %q (fail, continue)", sc.OnFailure)
	}
}

func (s Scripts) validate(bad func(field, format string, args ...any)) {
	s.PreJob.validate("scripts.preJob", bad)
	s.PostJob.validate("scripts.postJob", bad)
	s.PreVM.validate("scripts.preVM", bad)
	s.PostVM.validate("scripts.postVM", bad)
}

// any reports whether a hook is set.
func (s Scripts) any() bool {
	return s.PreJob != nil || s.PostJob != nil || s.PreVM != nil || s.PostVM != nil
}
