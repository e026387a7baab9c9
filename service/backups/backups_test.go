package backups

import (
	"testing"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/policy"
)

func TestQuiesceFor(t *testing.T) {
	tests := []struct {
		mode     policy.QuiesceMode
		required bool
		want     backup.QuiesceMode
	}{
		{"", false, backup.QuiescePrefer},
		{policy.QuiesceFileSystem, false, backup.QuiescePrefer},
		{policy.QuiesceApplication, false, backup.QuiescePrefer},
		{"", true, backup.QuiesceRequire},
		{policy.QuiesceFileSystem, true, backup.QuiesceRequire},
		{policy.QuiesceApplication, true, backup.QuiesceRequire},
		{policy.QuiesceNone, false, backup.QuiesceOff},
		{policy.QuiesceNone, true, backup.QuiesceOff}, // refused by validation; never quiesce if it got through
	}
	for _, tc := range tests {
		if got := quiesceFor(tc.mode, tc.required); got != tc.want {
			t.Errorf("quiesceFor(%q, %v) = %q, want %q", tc.mode, tc.required, got, tc.want)
		}
	}
}
