package api

import (
	"time"

	"github.com/vmvault/vmvault/policy"
)

// The kinds of destructive action that wait for a delay or a second
// administrator (package approval).
const (
	ApprovalDeletePoint      = "delete-point"
	ApprovalShortenRetention = "shorten-retention"
	// ApprovalRemoveRepository detaches a repository from the appliance
	// (its data stays where it is).
	ApprovalRemoveRepository = "remove-repository"
)

// The states of a pending action. Pending and executing are open;
// executed, cancelled and failed are final.
const (
	ApprovalPending   = "pending"
	ApprovalExecuting = "executing"
	ApprovalExecuted  = "executed"
	ApprovalCancelled = "cancelled"
	ApprovalFailed    = "failed"
)

// Approval is a destructive action an administrator asked for that takes
// effect at EffectiveAt unless another administrator approves it earlier
// or any administrator cancels it.
type Approval struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`    // ApprovalDeletePoint, ApprovalShortenRetention, ApprovalRemoveRepository
	Subject string `json:"subject"` // the restore point's or the job's id, the repository's name
	// Summary says what will happen, for people ("delete restore point …").
	Summary string `json:"summary"`
	// Retention is the retention a shorten-retention action sets.
	Retention   *policy.Retention `json:"retention,omitempty"`
	Repository  string            `json:"repository,omitempty"`
	RequestedBy string            `json:"requestedBy"`
	RequestedAt time.Time         `json:"requestedAt"`
	EffectiveAt time.Time         `json:"effectiveAt"`
	Status      string            `json:"status"`
	ApprovedBy  string            `json:"approvedBy,omitempty"`
	CancelledBy string            `json:"cancelledBy,omitempty"`
	// DoneAt is when it was executed, cancelled or failed.
	DoneAt time.Time `json:"doneAt,omitzero"`
	Error  string    `json:"error,omitempty"`
}

// ApprovalRequest is what a handler asks the approvals service to hold.
type ApprovalRequest struct {
	Kind        string
	Subject     string
	Summary     string
	Repository  string
	Retention   *policy.Retention
	RequestedBy string
}
