package api

import "time"

// Instant recovery: the bodies of /instant-recoveries and its sessions.

// InstantRecoveryRequest is the body of POST /instant-recoveries.
type InstantRecoveryRequest struct {
	Point      string            `json:"point"`
	Name       string            `json:"name,omitempty"` // default "<vm>-instant"
	Datacenter string            `json:"datacenter,omitempty"`
	Host       string            `json:"host,omitempty"` // mounts the export and runs the VM; "" = the only host
	Folder     string            `json:"folder,omitempty"`
	Datastore  string            `json:"datastore,omitempty"` // the VM's own files (config, log, swap)
	Networks   map[string]string `json:"networks,omitempty"`
	Isolated   bool              `json:"isolated,omitempty"` // every NIC disconnected (required for restore-only)
	PowerOn    *bool             `json:"powerOn,omitempty"`  // default true
	// TargetVM (instance UUID), when set, attaches the point's disks
	// (Disks: their indexes, default all) to that existing VM instead of
	// creating one: instant disk recovery (operator).
	TargetVM string `json:"targetVm,omitempty"`
	// Original keeps the original VM's identity: BIOS UUID and MACs, and
	// its name and instance UUID when it is gone (it must be gone or off).
	Original bool  `json:"original,omitempty"`
	Disks    []int `json:"disks,omitempty"`
}

// InstantMigrateRequest is the body of POST /instant-recoveries/{id}/migrate.
type InstantMigrateRequest struct {
	Datastore string `json:"datastore"`
}

// InstantRecovery is one session.
type InstantRecovery struct {
	ID           string    `json:"id"`
	State        string    `json:"state"` // starting, running, migrating, done, stopped, failed
	Error        string    `json:"error,omitempty"`
	Point        string    `json:"point"`
	Repository   string    `json:"repository"`
	SourceVM     string    `json:"sourceVm"`
	VM           VMRef     `json:"vm"`
	Mode         string    `json:"mode"`               // vm or disk
	Attached     []int32   `json:"attached,omitempty"` // disk keys added to vm (mode disk)
	Host         string    `json:"host,omitempty"`
	NFSDatastore string    `json:"nfsDatastore"`
	Isolated     bool      `json:"isolated"`
	MigrateTo    string    `json:"migrateTo,omitempty"`
	Progress     int32     `json:"progress"`
	OverlayUsed  int64     `json:"overlayUsedBytes"`
	OverlayLimit int64     `json:"overlayLimitBytes"`
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
	Warnings     []string  `json:"warnings,omitempty"`
	Log          []string  `json:"log"`
}
