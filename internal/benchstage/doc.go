// Package benchstage measures the CPU budget of a backup and a restore stage
// by stage (issue 28, docs/PERFORMANCE.md "Stage table"): each stage's
// kernel run alone on one thread (thread CPU time, CLOCK_THREAD_CPUTIME_ID
// under runtime.LockOSThread) beside the same stage inside the real
// pipeline (imagebackup.Backup / Restore), whose process CPU (getrusage)
// is split between stages by a CPU profile of the run: every sample is
// charged to the stage of the innermost frame that names one (Classify).
// What no stage claims (copies between stages, allocation and GC,
// scheduling and channel hand-offs) is the overhead.
//
// The benchmark is BenchmarkStages (stages_test.go), run by `make
// bench-stages` on the disk images of `make bench`.
package benchstage
