package api

// TransportProbeRequest is the body of POST /transport-probes.
type TransportProbeRequest struct {
	VM string `json:"vm"` // instance UUID
}

// TransportProbe is one transport tried on one disk.
type TransportProbe struct {
	Disk      int32   `json:"disk"`
	Label     string  `json:"label,omitempty"`
	Transport string  `json:"transport"` // hotadd, network, nfc
	OK        bool    `json:"ok"`
	Reason    string  `json:"reason,omitempty"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
}

// TransportProbeResult is the result of a transport probe task.
type TransportProbeResult struct {
	VM     VMRef            `json:"vm"`
	Probes []TransportProbe `json:"probes"`
	// Auto maps each disk key (as a string) to the transport a job with
	// transport auto would use.
	Auto     map[string]string `json:"auto"`
	Warnings []string          `json:"warnings,omitempty"`
}
