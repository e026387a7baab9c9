package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/internal/state/schema"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/notify"
)

// The daemon hands its state.DB to notify as the daily report's memory.
var _ notify.ReportLog = (*DB)(nil)

// testdata/state-v1.db is the golden database of schema 1, written by the
// code of that schema (testdata/genv1, run at 3f071f0). The values below
// are the ones genv1 wrote; every one is read back after the migration.
const fixtureV1 = "testdata/state-v1.db"

var fx0 = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

const (
	fxVM1 = "5012a3b4-0000-0000-0000-000000000001"
	fxVM2 = "5012a3b4-0000-0000-0000-000000000002"
)

// copyFixture copies the golden v1 file into a temporary state directory.
func copyFixture(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	copyTo(t, fixtureV1, path)
	return path
}

func copyTo(t testing.TB, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// dump returns every top-level bucket's keys and values of the file at
// path, opened read-only by bbolt directly (not through Open).
func dump(t testing.TB, path string) map[string]map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]map[string]string{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			m := map[string]string{}
			out[string(name)] = m
			return b.ForEach(func(k, v []byte) error {
				if v == nil {
					return fmt.Errorf("nested bucket %s/%s", name, k)
				}
				m[string(k)] = string(v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func storedSchema(t testing.TB, d map[string]map[string]string) uint32 {
	t.Helper()
	v := d["meta"]["schema"]
	if len(v) != 4 {
		t.Fatalf("meta/schema is %q", v)
	}
	return binary.BigEndian.Uint32([]byte(v))
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// The golden file is what schema 1 wrote: the test below would prove
// nothing against a file that is already v2.
func TestFixtureIsV1(t *testing.T) {
	d := dump(t, fixtureV1)
	if v := storedSchema(t, d); v != 1 {
		t.Fatalf("fixture schema %d, want 1", v)
	}
	for _, b := range schema.Buckets {
		if b.Since > 1 {
			continue // added after schema 1: no v1 file has it
		}
		if _, ok := d[string(b.Name)]; !ok {
			t.Errorf("fixture lacks bucket %s", b.Name)
		}
		if b.Format != schema.FormatRaw && len(d[string(b.Name)]) == 0 {
			t.Errorf("fixture bucket %s is empty: its migration goes untested", b.Name)
		}
	}
	for name := range d {
		if _, ok := schema.Lookup([]byte(name)); !ok {
			t.Errorf("fixture bucket %s (written by the v1 code) is not declared in schema.Buckets", name)
		}
	}
	for _, raw := range []string{d["tokens"]["tok-ci"], d["tasks"]["18c9f0a000000001-backup"], d["settings"]["settings"]} {
		if !strings.HasPrefix(raw, "{") {
			t.Fatalf("v1 value %q is not raw JSON", raw)
		}
	}
}

// TestMigrateV1Fixture opens the golden v1 file, which migrates it, and
// reads every record back through the owning packages' APIs.
func TestMigrateV1Fixture(t *testing.T) {
	ctx := context.Background()
	path := copyFixture(t)
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := d.Schema(ctx); err != nil || v != schema.Version {
		t.Fatalf("schema after migration %d %v", v, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// The file as it was before the migration is kept as a verified copy.
	copies, err := ListCopies(CopiesDir(path), true)
	if err != nil || len(copies) != 1 || copies[0].Err != nil {
		t.Fatalf("copies after the migration: %+v %v", copies, err)
	}
	if !reflect.DeepEqual(dump(t, copies[0].Path), dump(t, fixtureV1)) || !strings.HasSuffix(copies[0].Path, "-v1.db") {
		t.Fatalf("the copy taken before the migration (%s) is not the v1 file", copies[0].Path)
	}
	// The daemon's own copy right after Open, in the same second, does not replace it.
	d, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteCopy(CopiesDir(path), copies[0].Time); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if cs, err := ListCopies(CopiesDir(path), true); err != nil || len(cs) != 2 || cs[0].Err != nil || cs[1].Err != nil {
		t.Fatalf("copies after the daemon's copy in the same second: %+v %v", cs, err)
	}
	if err := os.Remove(filepath.Join(CopiesDir(path), copyName(copies[0].Time))); err != nil {
		t.Fatal(err)
	}

	// Every value now carries its bucket's format byte and decodes, and
	// the migration did nothing else: each value is its v1 bytes behind
	// one format byte (this package's v1 records unchanged), no key added
	// or lost, and meta says 2.
	after := dump(t, path)
	before := dump(t, fixtureV1)
	for name, kvs := range before {
		if len(after[name]) != len(kvs) {
			t.Errorf("bucket %s: %d keys before, %d after", name, len(kvs), len(after[name]))
		}
		b, _ := schema.Lookup([]byte(name))
		for k, v := range kvs {
			got, ok := after[name][k]
			switch {
			case !ok:
				t.Errorf("%s/%q lost", name, k)
			case name == "meta":
			case v != "" && v[0] == schema.FormatJSON && (name == "jobs" || name == "runs" || name == "vmstate" || name == "maintenance" || name == "events"):
				if got != v {
					t.Errorf("%s/%q rewritten", name, k)
				}
			case got != string(b.Format)+v:
				t.Errorf("%s/%q: %q became %q, want its format byte %#02x before it", name, k, v, got, b.Format)
			}
		}
	}
	if storedSchema(t, after) != schema.Version {
		t.Fatalf("meta/schema is not %d", schema.Version)
	}
	for _, b := range schema.Buckets {
		for k, v := range after[string(b.Name)] {
			if err := schema.Check(b.Format, []byte(v)); err != nil {
				t.Errorf("%s/%q after migration: %v", b.Name, k, err)
			}
		}
	}
	// Every record reads back through its owner's API.
	if d, err = Open(path); err != nil {
		t.Fatal(err)
	}
	checkFixtureRecords(t, d) // (the auth manager moves admin-hash into users)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	after = dump(t, path)

	// The daemon's raw readers read a migrated value through schema.Value.
	var last time.Time
	if err := last.UnmarshalText(schema.Value([]byte(after["notify"]["last-daily-report"]))); err != nil || !last.Equal(time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)) {
		t.Fatalf("notify value through schema.Value: %v %v", last, err)
	}

	// A second open finds v2 and rewrites nothing; the records still read.
	d, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	checkFixtureRecords(t, d)
	d.Close()
	if again := dump(t, path); !reflect.DeepEqual(again, after) {
		t.Fatal("reopening a migrated file changed its values")
	}
	if copies, _ := ListCopies(CopiesDir(path), false); len(copies) != 1 {
		t.Fatalf("opening a current file took a copy: %d copies", len(copies))
	}

	// The migrated file takes writes as a new one does.
	d, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n, err := d.PruneEvents(ctx, fx0); err != nil || n != 3 {
		t.Fatalf("prune %d %v", n, err)
	}
	r := policy.JobRun{ID: "run-0003", Job: "job-nightly", Start: fx0.Add(time.Hour), End: fx0.Add(2 * time.Hour)}
	if err := d.PutRuns(ctx, []policy.JobRun{r}); err != nil {
		t.Fatal(err)
	}
	ts, err := task.NewBoltStore(d.Bolt())
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.PutTask(ctx, task.Info{ID: "18c9f0a000000004-backup", Kind: "backup", State: task.Succeeded, Created: fx0}); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, d, path)
	if runs, err := d.Runs(ctx, "job-nightly", 1); err != nil || len(runs) != 1 || runs[0].ID != "run-0003" {
		t.Fatalf("runs after a write: %+v %v", runs, err)
	}
	if ts, err = task.NewBoltStore(d.Bolt()); err != nil {
		t.Fatal(err)
	}
	if tasks, err := ts.Tasks(ctx, 0); err != nil || len(tasks) != 4 || tasks[0].ID != "18c9f0a000000004-backup" {
		t.Fatalf("tasks after a write: %+v %v", tasks, err)
	}
}

// checkFixtureRecords reads every record genv1 wrote.
func checkFixtureRecords(t *testing.T, d *DB) {
	t.Helper()
	ctx := context.Background()

	jobs, err := d.Jobs(ctx)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("jobs %+v %v", jobs, err)
	}
	if j := jobs[0]; j.ID != "job-nightly" || j.Name != "Nightly" || j.Repository != "main" || !j.Enabled || j.Description != "every VM tagged backup" ||
		!reflect.DeepEqual(j.Selection.VMs, []string{fxVM1, fxVM2}) || len(j.Selection.Tags) != 1 || j.Window.Location == nil || j.Window.Location.String() != "Europe/Paris" {
		t.Fatalf("job nightly %+v", j)
	}
	if j := jobs[1]; j.ID != "job-weekly" || j.Enabled || j.Priority != 5 || !reflect.DeepEqual(j.Selection.Exclude.Names, []string{"*-test"}) {
		t.Fatalf("job weekly %+v", j)
	}
	for _, j := range jobs {
		if _, err := j.Validate(ctx, policy.ValidateEnv{}); err != nil {
			t.Fatalf("job %s does not validate after migration: %v", j.ID, err)
		}
	}

	runs, err := d.Runs(ctx, "job-nightly", 0)
	if err != nil || len(runs) != 2 || runs[0].ID != "run-0002" || runs[1].ID != "run-0001" {
		t.Fatalf("runs %+v %v", runs, err)
	}
	if r := runs[1]; !r.End.Equal(fx0.Add(-2*time.Hour)) || len(r.VMs) != 2 || r.VMs[0].Point != "0123456789abcdef" || r.VMs[0].Bytes != 123456789 ||
		r.VMs[1].Status != policy.OutcomeFailed || r.VMs[1].Error != "snapshot: quiesce failed" {
		t.Fatalf("closed run %+v", r)
	}
	open, err := d.OpenRuns(ctx)
	if err != nil || len(open) != 1 || open[0].ID != "run-0002" || !open[0].Manual || open[0].VMs[0].Status != policy.OutcomeRunning {
		t.Fatalf("open runs %+v %v", open, err)
	}
	if r, err := d.Run(ctx, "run-0001"); err != nil || r.WindowID != "job-nightly@2026-11-29T22:00:00Z" {
		t.Fatalf("run-0001 %+v %v", r, err)
	}

	vs, err := d.VMStates(ctx)
	if err != nil || len(vs) != 2 {
		t.Fatalf("vm states %+v %v", vs, err)
	}
	if s := vs[0]; s.VM != fxVM1 || !s.Running || s.RunningRunID != "run-0002" || s.LastPoint != "0123456789abcdef" || !s.LastSuccess.Equal(fx0.Add(-150*time.Minute)) {
		t.Fatalf("vm state 1 %+v", s)
	}
	if s := vs[1]; s.VM != fxVM2 || s.Attempts != 3 || !s.NextRetry.Equal(fx0.Add(22*time.Hour)) || s.LastError == "" {
		t.Fatalf("vm state 2 %+v", s)
	}

	ms, err := d.Maintenance(ctx)
	if err != nil || len(ms) != 1 || ms[0].Repository != "main" || ms[0].FullCheckCursor != "pack/7f" || !ms[0].LastReclaim.Equal(fx0.Add(-48*time.Hour)) {
		t.Fatalf("maintenance %+v %v", ms, err)
	}

	evs, err := d.Events(ctx, EventQuery{})
	if err != nil || len(evs) != 5 {
		t.Fatalf("events %+v %v", evs, err)
	}
	// Equal times keep insertion order: the failure was added before the run's end.
	if evs[0].Kind != "vm-backed-up" || evs[1].Kind != "vm-backup-failed" || evs[2].Kind != "job-run-ended" || evs[4].Kind != "restore.vm" {
		t.Fatalf("event order %+v", evs)
	}
	audit, err := d.Events(ctx, EventQuery{User: "alice", Outcome: "failed"})
	if err != nil || len(audit) != 1 || audit[0].Error != "datastore full" || audit[0].Address != "192.0.2.7" {
		t.Fatalf("audit events %+v %v", audit, err)
	}
	if cp, err := d.Checkpoint(ctx); err != nil || !cp.Equal(fx0.Add(5*time.Minute)) {
		t.Fatalf("checkpoint %v %v", cp, err)
	}
	if last, err := d.LastReport(ctx); err != nil || !last.Equal(time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)) {
		t.Fatalf("last daily report %v %v", last, err)
	}

	// internal/auth, through its store and its manager.
	as, err := auth.NewBoltStore(d.Bolt())
	if err != nil {
		t.Fatal(err)
	}
	us, err := as.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, u := range us {
		names = append(names, u.Username)
	}
	if !reflect.DeepEqual(names, []string{"alice", "Bob.Admin", "VSPHERE.LOCAL\\ops"}) && !reflect.DeepEqual(names, []string{"admin", "alice", "Bob.Admin", "VSPHERE.LOCAL\\ops"}) {
		t.Fatalf("users %v", names)
	}
	alice, err := as.User(ctx, "ALICE")
	if err != nil || alice.Role != auth.RoleOperator || alice.Source != auth.SourceLocal || !alice.Created.Equal(fx0.Add(-30*24*time.Hour)) {
		t.Fatalf("alice %+v %v", alice, err)
	}
	if ok, err := auth.CheckPassword(alice.Hash, "alice-password-1"); !ok || err != nil {
		t.Fatalf("alice's hash after migration: %v %v", ok, err)
	}
	if ops, err := as.User(ctx, "vsphere.local\\OPS"); err != nil || ops.Source != auth.SourceVCenter || ops.Hash != "" {
		t.Fatalf("vCenter user %+v %v", ops, err)
	}
	tk, err := as.TokenByHash(ctx, sha("vmv_secret-ci"))
	if err != nil || tk.ID != "tok-ci" || tk.Owner != "alice" || tk.Role != auth.RoleOperator || !tk.Expires.Equal(fx0.Add(89*24*time.Hour)) {
		t.Fatalf("token by hash %+v %v", tk, err)
	}
	if tks, err := as.Tokens(ctx); err != nil || len(tks) != 2 || tks[1].ID != "tok-mon" || tks[1].Hash != sha("vmv_secret-mon") {
		t.Fatalf("tokens %+v %v", tks, err)
	}
	// The manager migrates the legacy single administrator (the fixture's
	// auth/admin-hash) into user "admin" and logs everyone in.
	clk := clock.NewFake(fx0)
	m, err := auth.NewManager(auth.Config{Clock: clk, Store: as, Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ user, pw string }{{"admin", "legacy-admin-pw"}, {"alice", "alice-password-1"}, {"bob.admin", "bob-password-22"}} {
		if _, err := m.Login(ctx, "192.0.2.1", c.user, c.pw); err != nil {
			t.Fatalf("login %s after migration: %v", c.user, err)
		}
	}
	if h, err := as.AdminHash(ctx); err != nil || h != "" {
		t.Fatalf("admin hash after the manager migrated it: %q %v", h, err)
	}
	p, err := m.AuthenticateToken(ctx, "vmv_secret-mon")
	if err != nil || p.Role != auth.RoleRestoreOnly {
		t.Fatalf("token login after migration: %+v %v", p, err)
	}

	// internal/task.
	ts, err := task.NewBoltStore(d.Bolt())
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := ts.Tasks(ctx, 0)
	if err != nil || len(tasks) != 3 || tasks[0].Kind != "check" || tasks[2].Kind != "backup" {
		t.Fatalf("tasks %+v %v", tasks, err)
	}
	bk, err := ts.Task(ctx, "18c9f0a000000001-backup")
	if err != nil || bk.State != task.Succeeded || bk.Progress.Done != 123456789 || bk.Progress.Rate != 98765.5 || !bk.Ended.Equal(fx0.Add(-150*time.Minute)) {
		t.Fatalf("backup task %+v %v", bk, err)
	}
	if res, ok := bk.Result.(map[string]any); !ok || res["point"] != "0123456789abcdef" {
		t.Fatalf("backup task result %#v", bk.Result)
	}
	if rs, err := ts.Task(ctx, "18c9f0a000000002-restore"); err != nil || rs.State != task.Failed || rs.Error != "datastore full" {
		t.Fatalf("restore task %+v %v", rs, err)
	}

	// web/settings.go's value (web.Settings; web reads it through schema).
	var settings struct {
		TimeZone           string `json:"timeZone"`
		EventRetentionDays int    `json:"eventRetentionDays"`
	}
	err = d.Bolt().View(func(tx *bolt.Tx) error {
		return schema.Decode(tx.Bucket(schema.BucketSettings).Get(schema.KeySettings), &settings)
	})
	if err != nil || settings.TimeZone != "Europe/Paris" || settings.EventRetentionDays != 30 {
		t.Fatalf("settings %+v %v", settings, err)
	}
	settings.TimeZone = ""
	if ok, err := d.GetSettings(ctx, &settings); !ok || err != nil || settings.TimeZone != "Europe/Paris" {
		t.Fatalf("GetSettings %v %+v %v", ok, settings, err)
	}
}

// A migration that fails half-way (here: I/O error before the n-th bucket)
// leaves the v1 file exactly as it was, and the next Open migrates it.
func TestMigrationFailureLeavesV1(t *testing.T) {
	path := copyFixture(t)
	before := dump(t, path)
	t.Setenv(failpoint.EnvVar, "count")
	if err := failpoint.Reload(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Reload() })
	probe := copyFixture(t)
	d, err := Open(probe)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	hits := failpoint.Counts()["state.migrate"]
	if hits < 5 {
		t.Fatalf("the migration hit state.migrate %d times", hits)
	}
	for _, n := range []int64{1, hits / 2, hits} {
		t.Setenv(failpoint.EnvVar, fmt.Sprintf("state.migrate=eio@%d", n))
		if err := failpoint.Reload(); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(path); err == nil {
			t.Fatalf("open with the migration failing at bucket %d succeeded", n)
		}
		if after := dump(t, path); !reflect.DeepEqual(after, before) {
			t.Fatalf("a migration failing at bucket %d changed the file", n)
		}
	}
	t.Setenv(failpoint.EnvVar, "")
	failpoint.Reload()
	d, err = Open(path)
	if err != nil {
		t.Fatalf("open after failed migrations: %v", err)
	}
	defer d.Close()
	checkFixtureRecords(t, d)
}

// envMigrateChild makes the test binary a child that opens the state
// database at the path it names (and is killed by a failpoint on the way).
const envMigrateChild = "STATE_TEST_OPEN_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(envMigrateChild); path != "" {
		d, err := Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		d.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A daemon killed (SIGKILL) in the middle of the migration, before each
// bucket it rewrites, leaves the v1 file intact and verifiable; the next
// Open migrates it.
func TestMigrationKilledLeavesV1(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary once per migrated bucket")
	}
	before := dump(t, fixtureV1)
	for n := 1; ; n++ {
		path := copyFixture(t)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envMigrateChild+"="+path, failpoint.EnvVar+fmt.Sprintf("=state.migrate=kill@%d", n))
		out, err := cmd.CombinedOutput()
		if err == nil {
			// Fewer buckets than n: the child migrated the whole file.
			if n < 5 {
				t.Fatalf("the child was never killed (n=%d)", n)
			}
			if v := storedSchema(t, dump(t, path)); v != schema.Version {
				t.Fatalf("child finished but the schema is %d", v)
			}
			return
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.ExitCode() != -1 {
			t.Fatalf("child at kill@%d: %v\n%s", n, err, out)
		}
		if err := Verify(path); err != nil {
			t.Fatalf("killed at bucket %d: the file does not verify: %v", n, err)
		}
		if after := dump(t, path); !reflect.DeepEqual(after, before) {
			t.Fatalf("killed at bucket %d: the v1 file changed", n)
		}
		d, err := Open(path)
		if err != nil {
			t.Fatalf("open after the kill at bucket %d: %v", n, err)
		}
		checkFixtureRecords(t, d)
		d.Close()
	}
}

// A file of a newer schema is refused with a clear error and not changed by
// a single byte.
func TestOpenNewerSchemaUntouched(t *testing.T) {
	path := copyFixture(t)
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bMeta).Put(kSchema, binary.BigEndian.AppendUint32(nil, schema.Version+1)); err != nil {
			return err
		}
		// A value of a format this code does not know.
		return tx.Bucket(schema.BucketTokens).Put([]byte("tok-new"), []byte{0x7f, 1, 2, 3})
	})
	if err != nil {
		t.Fatal(err)
	}
	raw.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(path)
	if !errors.Is(err, ErrSchemaTooNew) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("open of schema %d: %v", schema.Version+1, err)
	}
	if want := fmt.Sprintf("schema %d, this program knows %d", schema.Version+1, schema.Version); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not say %q and name the file", err, want)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("Open rewrote a file of a newer schema")
	}
	// A copy of it is not called damaged either.
	if err := Verify(path); err != nil {
		t.Fatalf("verify a newer file: %v", err)
	}
}

// A v1 value that v1 code could not have written fails the migration,
// naming the bucket and key, and changes nothing.
func TestMigrationRefusesBadV1Values(t *testing.T) {
	for _, c := range []struct {
		bucket []byte
		key, v string
	}{
		{schema.BucketTokens, "tok-ci", "not json"},
		{schema.BucketTasks, "18c9f0a000000001-backup", "[1,2]"},
		{schema.BucketNotify, "last-daily-report", "yesterday"},
		{schema.BucketScheduler, "checkpoint", "1234"},
		{schema.BucketRunsOpen, "run-0002", "x"},
		{schema.BucketAuth, "other-key", "x"},
		{schema.BucketTokenHash, sha("vmv_secret-ci"), ""},
	} {
		t.Run(string(c.bucket), func(t *testing.T) {
			path := copyFixture(t)
			raw, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := raw.Update(func(tx *bolt.Tx) error { return tx.Bucket(c.bucket).Put([]byte(c.key), []byte(c.v)) }); err != nil {
				t.Fatal(err)
			}
			raw.Close()
			before := dump(t, path)
			_, err = Open(path)
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || !strings.Contains(err.Error(), fmt.Sprintf("bucket %s: value %q", c.bucket, c.key)) {
				t.Fatalf("open with bad v1 value %s/%s: %v", c.bucket, c.key, err)
			}
			if !reflect.DeepEqual(dump(t, path), before) {
				t.Fatal("a refused migration changed the file")
			}
		})
	}
}

// In a v2 file every declared bucket's values must carry their format:
// a raw one is damage, found at Open, except in the buckets whose writers
// are not switched yet (schema.Bucket.RawWriter).
func TestOpenChecksV2Formats(t *testing.T) {
	d, path := openTemp(t)
	d.Close()
	put := func(bucket []byte, k string, v []byte) {
		t.Helper()
		raw, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if err := raw.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(k), v) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range schema.Buckets {
		if b.RawWriter == "" {
			continue
		}
		put(b.Name, "raw", []byte(`{"raw":true}`))
	}
	if d, err := Open(path); err != nil {
		t.Fatalf("raw values of a RawWriter's bucket: %v", err)
	} else {
		d.Close()
	}
	for _, c := range []struct {
		bucket []byte
		v      []byte
	}{
		{schema.BucketTokens, []byte(`{"id":"x"}`)},
		{schema.BucketTasks, []byte{schema.FormatBytes, '{', '}'}},
		{schema.BucketRunsOpen, nil},
		{schema.BucketScheduler, []byte{schema.FormatTime, 1, 2}},
		{schema.BucketTokenHash, []byte{}},
	} {
		d, path := openTemp(t)
		d.Close()
		raw, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Update(func(tx *bolt.Tx) error { return tx.Bucket(c.bucket).Put([]byte("k"), c.v) }); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		_, err = Open(path)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("bucket %s: record \"k\"", c.bucket)) {
			t.Fatalf("v2 value %q in %s: %v", c.v, c.bucket, err)
		}
	}
}

func TestSettings(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	type doc struct {
		TimeZone string `json:"timeZone"`
	}
	var s doc
	if ok, err := d.GetSettings(ctx, &s); ok || err != nil {
		t.Fatalf("never saved: %v %v", ok, err)
	}
	if err := d.PutSettings(ctx, doc{"Asia/Tokyo"}); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, d, path)
	if ok, err := d.GetSettings(ctx, &s); !ok || err != nil || s.TimeZone != "Asia/Tokyo" {
		t.Fatalf("after restart: %v %+v %v", ok, s, err)
	}
	if err := d.PutSettings(ctx, func() {}); err == nil {
		t.Fatal("PutSettings took a value JSON cannot encode")
	}
}

func TestLastReport(t *testing.T) {
	ctx := context.Background()
	d, path := openTemp(t)
	if last, err := d.LastReport(ctx); err != nil || !last.IsZero() {
		t.Fatalf("never sent: %v %v", last, err)
	}
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.FixedZone("CET", 3600))
	if err := d.SetLastReport(ctx, at); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, d, path)
	if last, err := d.LastReport(ctx); err != nil || !last.Equal(at) || last.Location() != time.UTC {
		t.Fatalf("after restart: %v %v", last, err)
	}
	if err := d.Bolt().Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bNotify).Put(kLastDailyReport, schema.EncodeBytes([]byte("yesterday")))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.LastReport(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "yesterday") {
		t.Fatalf("bad stored time: %v", err)
	}
}

// The stored last-report time: any bytes decode to a time or ErrCorrupt,
// and a decoded time stores back to the same instant.
func FuzzLastReport(f *testing.F) {
	for _, s := range []string{"\x022026-05-05T07:00:00Z", "\x022026-05-05T07:00:00.5+02:00", "", "\x02", "2026-05-05T07:00:00Z", "\x02yesterday", "\x029999-12-31T23:59:59Z", "\x022026-13-01T00:00:00Z"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		tm, err := decodeLastReport(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error is not ErrCorrupt: %v", err)
			}
			return
		}
		b, err := tm.UTC().MarshalText()
		if err != nil {
			return // a year MarshalText cannot write: SetLastReport reports it
		}
		back, err := decodeLastReport(schema.EncodeBytes(b))
		if err != nil || !back.Equal(tm) {
			t.Fatalf("%q -> %v -> %q -> %v, %v", v, tm, b, back, err)
		}
	})
}

func TestCopyNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"state-20261201T130100Z.db":     true,
		"state-20261201T130100Z-v1.db":  true,
		"state-20261201T130100Z-v12.db": true,
		"state-20261201T130100Z-v.db":   false,
		"state-20261201T130100Z-vx.db":  false,
		"state-20261201T130100Z-x1.db":  false,
		"state-20261201T1301Z.db":       false,
		"state-.db":                     false,
		".state-20261201T130100Z.tmp":   false,
	} {
		if _, got := copyTime(name); got != ok {
			t.Errorf("copyTime(%q) = %v, want %v", name, got, ok)
		}
	}
	at := time.Date(2026, 12, 1, 13, 1, 0, 0, time.UTC)
	if tm, ok := copyTime(schemaCopyName(at, 1)); !ok || !tm.Equal(at) {
		t.Fatalf("schemaCopyName does not parse back: %v %v", tm, ok)
	}
}

// BenchmarkMigrateV1 measures the first start after the upgrade on a busy
// appliance's state.db: 100,000 events, 2,000 runs, 5,000 task summaries,
// 100 users and tokens, written as schema 1 (events and runs as today,
// the others raw), then opened: verify, copy, migrate.
func BenchmarkMigrateV1(b *testing.B) {
	ctx := context.Background()
	src := filepath.Join(b.TempDir(), "v1.db")
	d, err := Open(src)
	if err != nil {
		b.Fatal(err)
	}
	fillEvents(b, d)
	for i := range 2000 {
		r := policy.JobRun{ID: fmt.Sprintf("run-%05d", i), Job: "nightly", Start: t0.Add(time.Duration(i) * time.Hour), End: t0.Add(time.Duration(i)*time.Hour + time.Minute),
			VMs: []policy.VMOutcome{{VM: "vm-1", Status: policy.OutcomeSucceeded, Bytes: 1 << 30}}}
		if err := d.PutRun(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	ts, _ := task.NewBoltStore(d.Bolt())
	as, _ := auth.NewBoltStore(d.Bolt())
	for i := range 5000 {
		if err := ts.PutTask(ctx, task.Info{ID: fmt.Sprintf("%016x-backup", i), Kind: "backup", Subject: "vm", State: task.Succeeded, Created: t0,
			Result: map[string]any{"point": fmt.Sprintf("%016x", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 100 {
		if err := as.PutUser(ctx, auth.User{Username: fmt.Sprintf("user%d", i), Role: auth.RoleOperator, Source: auth.SourceLocal, Hash: "$argon2id$v=19$m=64,t=1,p=1$c2FsdA$a2V5"}); err != nil {
			b.Fatal(err)
		}
		if err := as.PutToken(ctx, auth.Token{ID: fmt.Sprintf("tok%d", i), Owner: "user1", Role: auth.RoleOperator, Hash: sha(fmt.Sprint(i))}); err != nil {
			b.Fatal(err)
		}
	}
	d.Close()
	downgradeToV1(b, src)
	fi, _ := os.Stat(src)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "state.db")
		copyTo(b, src, path)
		b.StartTimer()
		start := time.Now()
		d, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "open-s")
		b.ReportMetric(float64(fi.Size())/(1<<20), "db-MiB")
		b.StopTimer()
		if v, _ := d.Schema(ctx); v != schema.Version {
			b.Fatalf("schema %d", v)
		}
		d.Close()
		b.StartTimer()
	}
}

// downgradeToV1 rewrites a current file as schema 1 wrote it: the format
// byte off every value but internal/state's records, meta/schema 1.
func downgradeToV1(t testing.TB, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range schema.Buckets {
			switch string(b.Name) {
			case "meta", "jobs", "runs", "vmstate", "maintenance", "events":
				continue
			}
			bk := tx.Bucket(b.Name)
			var ks, vs [][]byte
			if err := bk.ForEach(func(k, v []byte) error {
				ks, vs = append(ks, append([]byte(nil), k...)), append(vs, append([]byte(nil), v[1:]...))
				return nil
			}); err != nil {
				return err
			}
			for i := range ks {
				if err := bk.Put(ks[i], vs[i]); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bMeta).Put(kSchema, binary.BigEndian.AppendUint32(nil, 1))
	})
	if err != nil {
		t.Fatal(err)
	}
}
