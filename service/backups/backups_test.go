package backups

import (
	"testing"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/policy"
)

func TestQuiesceFor(t *testing.T) {
	tests := []struct {
		mode      policy.QuiesceMode
		required  bool
		vss       policy.VSSType
		want      backup.QuiesceMode
		wantLevel backup.QuiesceLevel
		wantVSS   backup.VSSType
	}{
		{"", false, "", backup.QuiescePrefer, backup.LevelFilesystem, ""},
		{policy.QuiesceFileSystem, false, "", backup.QuiescePrefer, backup.LevelFilesystem, ""},
		{policy.QuiesceFileSystem, false, policy.VSSCopy, backup.QuiescePrefer, backup.LevelFilesystem, ""},
		{policy.QuiesceApplication, false, "", backup.QuiescePrefer, backup.LevelApplication, backup.VSSCopy},
		{policy.QuiesceApplication, false, policy.VSSCopy, backup.QuiescePrefer, backup.LevelApplication, backup.VSSCopy},
		{policy.QuiesceApplication, false, policy.VSSFull, backup.QuiescePrefer, backup.LevelApplication, backup.VSSFull},
		{"", true, "", backup.QuiesceRequire, backup.LevelFilesystem, ""},
		{policy.QuiesceFileSystem, true, "", backup.QuiesceRequire, backup.LevelFilesystem, ""},
		{policy.QuiesceApplication, true, policy.VSSFull, backup.QuiesceRequire, backup.LevelApplication, backup.VSSFull},
		{policy.QuiesceNone, false, "", backup.QuiesceOff, "", ""},
		{policy.QuiesceNone, true, "", backup.QuiesceOff, "", ""}, // refused by validation; never quiesce if it got through
	}
	for _, tc := range tests {
		j := policy.Job{Quiesce: tc.mode, QuiesceRequired: tc.required, VSSType: tc.vss}
		mode, level, vss := quiesceFor(j)
		if mode != tc.want || level != tc.wantLevel || vss != tc.wantVSS {
			t.Errorf("quiesceFor(%q, required %v, vss %q) = %q %q %q, want %q %q %q",
				tc.mode, tc.required, tc.vss, mode, level, vss, tc.want, tc.wantLevel, tc.wantVSS)
		}
	}
}
