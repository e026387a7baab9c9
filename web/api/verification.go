package api

import "time"

// Verification of restore points: the body of POST
// /restore-points/{id}/verify, the task's result and the latest result
// shown on each point.

// VerifyRequest is the body of POST /restore-points/{id}/verify.
type VerifyRequest struct {
	// Mode is walk (default: the file systems walked, no VM), boot (the
	// point instant-recovered in isolation and powered on) or both.
	Mode string `json:"mode,omitempty"`
	// Network puts every NIC on this (isolated) port group; default every
	// NIC disconnected.
	Network    string `json:"network,omitempty"`
	Datacenter string `json:"datacenter,omitempty"`
	Host       string `json:"host,omitempty"`
	Folder     string `json:"folder,omitempty"`
	Datastore  string `json:"datastore,omitempty"`
	// Ports must accept TCP connections at the guest's address; URL must
	// answer 2xx (its host is replaced by the guest's address).
	Ports []int  `json:"ports,omitempty"`
	URL   string `json:"url,omitempty"`
	// TimeoutSeconds for the heartbeat (default 600), ProbeTimeoutSeconds
	// for the probes once it is green (default 120).
	TimeoutSeconds      int  `json:"timeoutSeconds,omitempty"`
	ProbeTimeoutSeconds int  `json:"probeTimeoutSeconds,omitempty"`
	ReadData            bool `json:"readData,omitempty"` // the walk reads every file's bytes too
}

// PointVerification is a restore point's latest verification.
type PointVerification struct {
	Result  string    `json:"result"` // passed | failed
	Time    time.Time `json:"time"`   // when it ended
	Mode    string    `json:"mode"`
	Reason  string    `json:"reason"`
	Seconds float64   `json:"seconds"`
}

// Verification is one verification's full result (the task's result).
type Verification struct {
	ID         string            `json:"id"`
	Point      string            `json:"point"`
	Repository string            `json:"repository"`
	VM         string            `json:"vm"`
	Mode       string            `json:"mode"`
	Result     string            `json:"result"`
	Reason     string            `json:"reason"`
	Started    time.Time         `json:"started"`
	Finished   time.Time         `json:"finished"`
	Seconds    float64           `json:"seconds"`
	By         string            `json:"by,omitempty"`
	Boot       *BootVerification `json:"boot,omitempty"`
	Walk       *WalkVerification `json:"walk,omitempty"`
}

// BootVerification is what a boot saw; the timings count from the start.
type BootVerification struct {
	Session          string              `json:"session"`
	VMName           string              `json:"vmName"`
	Network          string              `json:"network,omitempty"`
	Passed           bool                `json:"passed"`
	Reason           string              `json:"reason"`
	PoweredOnSeconds float64             `json:"poweredOnSeconds"`
	HeartbeatSeconds float64             `json:"heartbeatSeconds"`
	ProbesSeconds    float64             `json:"probesSeconds"`
	GuestIP          string              `json:"guestIp,omitempty"`
	Probes           []VerificationProbe `json:"probes"`
	TeardownError    string              `json:"teardownError,omitempty"`
}

// VerificationProbe is one probe's outcome.
type VerificationProbe struct {
	Kind     string `json:"kind"` // tcp | http
	Target   string `json:"target"`
	Passed   bool   `json:"passed"`
	Status   int    `json:"status,omitempty"`
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts"`
}

// WalkVerification sums up the file-system walk.
type WalkVerification struct {
	Passed  bool    `json:"passed"`
	Reason  string  `json:"reason"`
	Volumes int     `json:"volumes"`
	Failed  int     `json:"failedVolumes"`
	Entries int64   `json:"entries"`
	Seconds float64 `json:"seconds"`
}
