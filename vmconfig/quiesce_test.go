package vmconfig

import (
	"reflect"
	"testing"
)

func TestQuiesceTagsRoundTrip(t *testing.T) {
	tests := []Quiesce{
		{Requested: "application", VSSType: "full", Obtained: "application", Spec: "vss:ctx_backup:full", ToolsVersion: "12.2.0", ToolsStatus: "guestToolsCurrent"},
		{Requested: "application", VSSType: "copy", Obtained: "filesystem", Reason: ReasonQuiesceFailed, Detail: "VSS with writers: writer failed", Spec: "vss:ctx_file_share_backup:copy"},
		{Requested: "filesystem", Obtained: "crash", Reason: ReasonToolsNotRunning, Detail: "VMware Tools is not running in the guest"},
		{Requested: "none", Obtained: "crash"},
	}
	for _, q := range tests {
		tags := map[string]string{"job": "nightly"}
		q.Tags(tags)
		if _, ok := tags["quiesce.obtained"]; ok {
			t.Errorf("obtained duplicated into the tags: %v", tags)
		}
		got, ok := QuiesceFromTags(q.Obtained, tags)
		if !ok || !reflect.DeepEqual(got, q) {
			t.Errorf("round trip of %+v = %+v (%v)", q, got, ok)
		}
	}
	// Points written before the record existed.
	if q, ok := QuiesceFromTags("application", map[string]string{"quiesce": "prefer"}); ok {
		t.Errorf("old point read as %+v", q)
	}
	if _, ok := QuiesceFromTags("crash", nil); ok {
		t.Error("nil tags read as a record")
	}
}
