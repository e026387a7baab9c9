package state

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/vmvault/vmvault/policy"
)

var t0 = time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC)

func openTemp(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, path
}

func reopen(t testing.TB, d *DB, path string) *DB {
	t.Helper()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func sampleJob(id string) policy.Job {
	ret, _ := policy.Preset("few")
	return policy.Job{
		ID: id, Name: "job " + id, Enabled: true, Repository: "main",
		Selection: policy.Selection{VMs: []string{"u1"}},
		Window:    policy.DefaultWindow(time.UTC),
		Retention: ret, Priority: 3,
	}
}

func TestJobsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	for _, id := range []string{"b", "a"} {
		if err := d.PutJob(ctx, sampleJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.PutVMState(ctx, policy.VMState{Job: "a", VM: "u1", Done: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.PutVMStates(ctx, []policy.VMState{{Job: "ab", VM: "u1"}, {Job: "b", VM: "u2", LastPoint: "p"}}); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, d, path)
	jobs, err := d.Jobs(ctx)
	if err != nil || len(jobs) != 2 || jobs[0].ID != "a" || jobs[1].ID != "b" {
		t.Fatalf("jobs %+v %v", jobs, err)
	}
	got, err := d.Job(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := sampleJob("a")
	if got.Window.Location.String() != "UTC" {
		t.Fatalf("location %v", got.Window.Location)
	}
	got.Window.Location, want.Window.Location = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("job changed:\n got %+v\nwant %+v", got, want)
	}
	if _, err := d.Job(ctx, "zz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
	if err := d.DeleteJob(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteJob(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	states, err := d.VMStates(ctx)
	if err != nil || len(states) != 2 || states[0].Job != "ab" || states[1].LastPoint != "p" {
		t.Fatalf("delete of job a must keep job ab's state: %+v %v", states, err)
	}
	if v, err := d.Schema(ctx); err != nil || v != SchemaVersion {
		t.Fatalf("schema %d %v", v, err)
	}
}

func TestRunsOpenAndHistory(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	for i, id := range []string{"r1", "r2", "r3"} {
		r := policy.JobRun{ID: "j/" + id, Job: "j", Start: t0.Add(time.Duration(i) * 24 * time.Hour),
			VMs: []policy.VMOutcome{{VM: "u1", Status: policy.OutcomeRunning}}}
		if id != "r3" {
			r.End = r.Start.Add(time.Hour)
			r.VMs[0].Status = policy.OutcomeSucceeded
			r.VMs[0].Bytes = 42
		}
		if err := d.PutRun(ctx, policy.JobRun{ID: r.ID, Job: "j", Start: r.Start}); err != nil { // first written open
			t.Fatal(err)
		}
		if err := d.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.PutRun(ctx, policy.JobRun{ID: "jx/r", Job: "jx", Start: t0.Add(100 * time.Hour), End: t0.Add(101 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, d, path)
	open, err := d.OpenRuns(ctx)
	if err != nil || len(open) != 1 || open[0].ID != "j/r3" {
		t.Fatalf("open runs %+v %v", open, err)
	}
	hist, err := d.Runs(ctx, "j", 2)
	if err != nil || len(hist) != 2 || hist[0].ID != "j/r3" || hist[1].ID != "j/r2" {
		t.Fatalf("history %+v %v", hist, err)
	}
	all, _ := d.Runs(ctx, "j", 0)
	if len(all) != 3 {
		t.Fatalf("all runs of j: %d", len(all))
	}
	r1, err := d.Run(ctx, "j/r1")
	if err != nil || r1.VMs[0].Bytes != 42 || r1.VMs[0].Status != policy.OutcomeSucceeded {
		t.Fatalf("run r1 %+v %v", r1, err)
	}
	if _, err := d.Run(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing run: %v", err)
	}
	last, _ := d.Runs(ctx, "jx", 0)
	if len(last) != 1 {
		t.Fatalf("runs of the last job in key order: %+v", last)
	}
}

// PutRuns closes an interrupted run and opens its resume run together; a bad
// record in the batch stores none of them.
func TestPutRunsOneTransaction(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	old := policy.JobRun{ID: "j/old", Job: "j", Start: t0, VMs: []policy.VMOutcome{{VM: "u1", Status: policy.OutcomeRunning}}}
	if err := d.PutRun(ctx, old); err != nil {
		t.Fatal(err)
	}
	old.End, old.Interrupted, old.ResumedBy = t0.Add(time.Minute), true, "j/resume"
	old.VMs[0].Status = policy.OutcomeInterrupted
	resume := policy.JobRun{ID: "j/resume", Job: "j", Start: t0.Add(time.Hour), ResumeOf: old.ID,
		VMs: []policy.VMOutcome{{VM: "u1", Status: policy.OutcomePending}}}
	bad := []policy.JobRun{{ID: "j/x", Job: "j", Start: t0}, {ID: "", Job: "j"}}
	if err := d.PutRuns(ctx, bad); err == nil {
		t.Fatal("a run without an id was stored")
	}
	if _, err := d.Run(ctx, "j/x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a batch with a bad run stored part of it: %v", err)
	}
	if err := d.PutRuns(ctx, []policy.JobRun{old, resume}); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, d, path)
	open, err := d.OpenRuns(ctx)
	if err != nil || len(open) != 1 || open[0].ID != "j/resume" || open[0].ResumeOf != "j/old" {
		t.Fatalf("open runs %+v %v", open, err)
	}
	got, err := d.Run(ctx, "j/old")
	if err != nil || !got.Interrupted || got.ResumedBy != "j/resume" || got.VMs[0].Status != policy.OutcomeInterrupted {
		t.Fatalf("interrupted run %+v %v", got, err)
	}
	if hist, _ := d.Runs(ctx, "j", 0); len(hist) != 2 || hist[0].ID != "j/resume" {
		t.Fatalf("history %+v", hist)
	}
}

func TestEventsQueryAndPrune(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	evs := []policy.Event{
		{Time: t0, Severity: policy.SeverityInfo, Kind: policy.EventJobStarted, Job: "j1"},
		{Time: t0.Add(time.Minute), Severity: policy.SeverityError, Kind: policy.EventVMFailed, Job: "j1", VM: "u1"},
		{Time: t0.Add(time.Minute), Severity: policy.SeverityInfo, Kind: policy.EventVMBackedUp, Job: "j1", VM: "u2"},
		{Time: t0.Add(time.Hour), Severity: policy.SeverityWarning, Kind: policy.EventWindowMissed, Job: "j2"},
		{Time: t0.Add(48 * time.Hour), Severity: policy.SeverityInfo, Kind: policy.EventJobFinished, Job: "j2"},
	}
	for _, e := range evs {
		if err := d.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	d = reopen(t, d, path)
	tests := []struct {
		name  string
		q     EventQuery
		kinds []string
	}{
		{"all in order", EventQuery{}, []string{policy.EventJobStarted, policy.EventVMFailed, policy.EventVMBackedUp, policy.EventWindowMissed, policy.EventJobFinished}},
		{"time range", EventQuery{From: t0.Add(time.Minute), To: t0.Add(time.Hour)}, []string{policy.EventVMFailed, policy.EventVMBackedUp}},
		{"warnings and worse", EventQuery{MinSeverity: policy.SeverityWarning}, []string{policy.EventVMFailed, policy.EventWindowMissed}},
		{"by vm", EventQuery{VM: "u2"}, []string{policy.EventVMBackedUp}},
		{"by job with limit", EventQuery{Job: "j2", Limit: 1}, []string{policy.EventWindowMissed}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Events(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, e := range got {
				kinds = append(kinds, e.Kind)
			}
			if !reflect.DeepEqual(kinds, tc.kinds) {
				t.Fatalf("kinds %v, want %v", kinds, tc.kinds)
			}
		})
	}
	n, err := d.PruneEvents(ctx, t0.Add(time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("pruned %d %v", n, err)
	}
	rest, _ := d.Events(ctx, EventQuery{})
	if len(rest) != 2 {
		t.Fatalf("left %d events", len(rest))
	}
}

func TestCheckpointAndMaintenance(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	if cp, err := d.Checkpoint(ctx); err != nil || !cp.IsZero() {
		t.Fatalf("fresh checkpoint %v %v", cp, err)
	}
	if err := d.SetCheckpoint(ctx, t0); err != nil {
		t.Fatal(err)
	}
	m := policy.MaintenanceState{Repository: "main", LastQuickCheck: t0, FullCheckCursor: "pack 17", FullCheckStart: t0.Add(-time.Hour)}
	if err := d.PutMaintenance(ctx, m); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, d, path)
	if cp, err := d.Checkpoint(ctx); err != nil || !cp.Equal(t0) {
		t.Fatalf("checkpoint %v %v", cp, err)
	}
	ms, err := d.Maintenance(ctx)
	if err != nil || len(ms) != 1 || ms[0].FullCheckCursor != "pack 17" || !ms[0].LastQuickCheck.Equal(t0) {
		t.Fatalf("maintenance %+v %v", ms, err)
	}
}

func TestOpenRefusesNewerSchemaAndCorruptRecords(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	if err := d.PutJob(ctx, sampleJob("a")); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bJobs).Put([]byte("a"), []byte{9, '{'}); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(kSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion+1))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("newer schema: %v", err)
	}
	raw, _ = bolt.Open(path, 0o600, nil)
	_ = raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bMeta).Put(kSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
	})
	_ = raw.Close()
	// A record that does not decode makes the whole file suspect: Open
	// refuses it, naming the record, rather than failing later requests.
	_, err = Open(path)
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), `jobs: record "a"`) {
		t.Fatalf("corrupt job record: %v", err)
	}
}

func TestOpenFailsWhileHeld(t *testing.T) {
	d0, path := openTemp(t)
	populate(t, d0, 5)
	d, err := Open(path)
	if err == nil {
		d.Close()
		t.Fatal("second open of a held state db succeeded")
	}
	// Held is not damaged: the daemon says another one is running.
	if !errors.Is(err, ErrHeld) || !errors.Is(err, bolterrors.ErrTimeout) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("second open: %v", err)
	}
}

func TestCancelledContext(t *testing.T) {
	d, _ := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.PutJob(ctx, sampleJob("a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("put with cancelled ctx: %v", err)
	}
	if _, err := d.Jobs(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with cancelled ctx: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, s := range [][]byte{nil, {1}, {1, '{', '}'}, {2, '{', '}'}, []byte("\x01{\"id\":\"x\",\"window\":{\"location\":\"UTC\",\"days\":{\"monday\":[\"22:00-06:00\"]}}}")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var j policy.Job
		if err := decode(b, &j); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error is not ErrCorrupt: %v", err)
			}
			return
		}
		if _, err := encode(j); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}
