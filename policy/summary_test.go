package policy

import "testing"

// TestSummarizeInWords: the job.finished event reads as an administrator
// writes it ("1 VM", sizes in units, only the outcomes that happened); it
// said "1 VMs: 1 succeeded, 0 failed, ...; 23265280 bytes read".
func TestSummarizeInWords(t *testing.T) {
	tests := []struct {
		name string
		run  JobRun
		want string
	}{
		{"one VM", JobRun{VMs: []VMOutcome{{Status: OutcomeSucceeded, Bytes: 23265280}}}, "1 VM: 1 succeeded; 22.2 MiB read"},
		{"mixed", JobRun{VMs: []VMOutcome{{Status: OutcomeSucceeded, Bytes: 512}, {Status: OutcomeFailed}, {Status: OutcomeSucceeded, Bytes: 512}}}, "3 VMs: 2 succeeded, 1 failed; 1.00 KiB read"},
		{"nothing read", JobRun{VMs: []VMOutcome{{Status: OutcomeSucceeded}, {Status: OutcomeSucceeded}}}, "2 VMs: 2 succeeded; 0 B read"},
		{"big", JobRun{VMs: []VMOutcome{{Status: OutcomeInterrupted, Bytes: 812 << 30}}}, "1 VM: 1 interrupted; 812 GiB read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := summarize(tc.run); got != tc.want {
				t.Errorf("summarize = %q, want %q", got, tc.want)
			}
		})
	}
}
