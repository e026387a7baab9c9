package api

import (
	"time"

	"github.com/vmvault/vmvault/policy"
)

// Audit outcomes (policy.Event.Outcome).
const (
	OutcomeOK     = "ok"
	OutcomeFailed = "failed"
)

// EventQuery selects events (GET /events and the console's summaries).
type EventQuery struct {
	From, To    time.Time       // [From, To)
	MinSeverity policy.Severity // at least this severe
	Job         string
	VM          string
	Kind        string // the kind, or a prefix of it ending before a dot ("restore" matches "restore.vm")
	User        string // the acting user (audit events)
	Outcome     string // "ok" or "failed" (audit events)
	Limit       int    // at most this many, oldest first (0: no limit)
}

// EventKind is one kind of event (GET /event-kinds): the console's Kind
// filter lists them all under their groups.
type EventKind struct {
	Kind  string `json:"kind"`
	Group string `json:"group"`           // e.g. Jobs, Restores
	Label string `json:"label"`           // what an event of the kind says happened
	Audit bool   `json:"audit,omitempty"` // a user's action (the audit trail)
}
