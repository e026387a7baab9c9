package api

// Backups: the bodies of POST /backups and its task's result.

// BackupRequest is the body of POST /backups.
type BackupRequest struct {
	VMs        []string `json:"vms"`                  // instance UUIDs
	Repository string   `json:"repository,omitempty"` // default: the first configured one
	Job        string   `json:"job,omitempty"`        // recorded on the points; "" for ad-hoc backups
}

// BackupOutcome is one VM of a backup task's result.
type BackupOutcome struct {
	VM           string `json:"vm"` // instance UUID as requested
	Name         string `json:"name,omitempty"`
	RestorePoint string `json:"restorePoint,omitempty"`
	Mode         string `json:"mode,omitempty"` // full or incremental
	BytesRead    int64  `json:"bytesRead"`
	NewBytes     int64  `json:"newBytes"`
	Error        string `json:"error,omitempty"`
	// Warnings: what the backup did or could not do that the
	// administrator should know ("changed block tracking was off: enabled it").
	Warnings []string `json:"warnings,omitempty"`
}
