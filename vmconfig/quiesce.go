package vmconfig

// Quiesce is what a VM's backup asked of the guest and what it obtained.
// A restore point keeps it in its tags (the "quiesce.*" keys below,
// repository/FORMAT.md "Manifest"), so points written before it existed
// read as they are, and a copy between repositories carries it.
type Quiesce struct {
	// Requested is "none", "filesystem" or "application".
	Requested string `json:"requested"`
	// VSSType is the VSS backup type asked for, "copy" or "full"
	// (application only).
	VSSType string `json:"vssType,omitempty"`
	// Obtained is the point's consistency: "application", "filesystem"
	// or "crash".
	Obtained string `json:"obtained"`
	// Reason is one of the Reason constants when Obtained falls short of
	// Requested (and for powered-off VMs and templates); Detail says it in
	// words, with vSphere's fault text when a quiesce failed.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Spec is the quiesce spec of the snapshot kept: "vss:<context>:<type>"
	// for Windows (vss:ctx_backup:copy, vss:ctx_file_share_backup:copy),
	// "tools" for VMware Tools' plain quiesce, "" for none.
	Spec string `json:"spec,omitempty"`
	// ToolsVersion ("12.2.0") and ToolsStatus (vSphere's
	// guest.toolsVersionStatus2) as the backup found them.
	ToolsVersion string `json:"toolsVersion,omitempty"`
	ToolsStatus  string `json:"toolsStatus,omitempty"`
}

// Why a point got less than was asked (Quiesce.Reason).
const (
	ReasonToolsNotRunning   = "tools-not-running"   // VMware Tools installed but not running
	ReasonToolsNotInstalled = "tools-not-installed" // no VMware Tools in the guest
	ReasonToolsTooOld       = "tools-too-old"       // vSphere calls the Tools too old or blacklisted
	ReasonQuiesceFailed     = "quiesce-failed"      // the guest's VSS / sync driver failed (Detail has vSphere's text)
	ReasonNotWindows        = "not-windows"         // application asked; only Windows has VSS writers
	ReasonNotQuiesced       = "not-quiesced"        // vSphere made the snapshot but says it is not quiesced
	ReasonPoweredOff        = "powered-off"         // no running guest: the disks are at rest
	ReasonTemplate          = "template"            // a template is read at rest, without a snapshot
)

// Point tag keys of Quiesce (Obtained is the point's consistency).
const (
	TagQuiesceRequested = "quiesce.requested"
	TagQuiesceVSSType   = "quiesce.vss_type"
	TagQuiesceReason    = "quiesce.reason"
	TagQuiesceDetail    = "quiesce.detail"
	TagQuiesceSpec      = "quiesce.spec"
	TagToolsVersion     = "quiesce.tools_version"
	TagToolsStatus      = "quiesce.tools_status"
)

// Tags writes q's non-empty fields into a point's tags (all but Obtained,
// which is the point's consistency).
func (q Quiesce) Tags(into map[string]string) {
	set := func(k, v string) {
		if v != "" {
			into[k] = v
		}
	}
	set(TagQuiesceRequested, q.Requested)
	set(TagQuiesceVSSType, q.VSSType)
	set(TagQuiesceReason, q.Reason)
	set(TagQuiesceDetail, q.Detail)
	set(TagQuiesceSpec, q.Spec)
	set(TagToolsVersion, q.ToolsVersion)
	set(TagToolsStatus, q.ToolsStatus)
}

// QuiesceFromTags reads a point's Quiesce back; ok is false for points
// written before it was recorded (they have their consistency only).
func QuiesceFromTags(consistency string, tags map[string]string) (q Quiesce, ok bool) {
	q.Requested = tags[TagQuiesceRequested]
	if q.Requested == "" {
		return Quiesce{}, false
	}
	q.Obtained = consistency
	q.VSSType = tags[TagQuiesceVSSType]
	q.Reason, q.Detail, q.Spec = tags[TagQuiesceReason], tags[TagQuiesceDetail], tags[TagQuiesceSpec]
	q.ToolsVersion, q.ToolsStatus = tags[TagToolsVersion], tags[TagToolsStatus]
	return q, true
}
