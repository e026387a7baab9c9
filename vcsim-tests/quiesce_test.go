package vcsimtests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/backups"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// The quiesce specs a job may send, as specString writes them.
const (
	specNone    = "none"
	specPlain   = "plain timeout=15"
	specAppCopy = "windows ctx_backup type=5 bootable=true partial=false timeout=15"
	specAppFull = "windows ctx_backup type=1 bootable=true partial=false timeout=15"
	specFSWin   = "windows ctx_file_share_backup type=5 bootable=false partial=false timeout=15"
)

func specString(s types.BaseVirtualMachineGuestQuiesceSpec) string {
	switch v := s.(type) {
	case nil:
		return specNone
	case *types.VirtualMachineWindowsQuiesceSpec:
		b := func(p *bool) string {
			if p == nil {
				return "unset"
			}
			return fmt.Sprint(*p)
		}
		return fmt.Sprintf("windows %s type=%d bootable=%s partial=%s timeout=%d", v.VssBackupContext, v.VssBackupType,
			b(v.VssBootableSystemState), b(v.VssPartialFileSupport), v.Timeout)
	case *types.VirtualMachineGuestQuiesceSpec:
		return fmt.Sprintf("plain timeout=%d", v.Timeout)
	}
	return fmt.Sprintf("%T", s)
}

// quiesceGuest is a guest the way the lab plays it.
type quiesceGuest struct {
	name        string
	family      string
	toolsOff    bool
	toolsStatus string // guest.toolsVersionStatus2 ("" is guestToolsCurrent)
	faults      int    // quiesced snapshots that fail
	writersOnly bool   // ... only those with VSS writers
}

const faultText = "VSS writer 'SqlServerWriter' failed: error 0x800423f4"

// want is what one (mode, guest, policy) gives: the specs the lab
// received in order, and either a failure or the point's consistency and
// reason.
type want struct {
	specs    []string
	fail     bool
	obtained string
	reason   string
}

// TestQuiesceMatrix runs a job for every quiesce mode against every guest
// state, with quiescing required and preferred, through the backup
// service (as the scheduler does): the exact quiesce spec vCenter got, the
// job's outcome, and what the restore point (and its API view) records.
func TestQuiesceMatrix(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 2 << 20})
	c := connect(t, l)
	r := labtest.Repo(t)
	runner := backups.New(c, map[string]*repository.Repository{"main": r}, []string{"main"}, nil)
	const vm = "DC0_H0_VM0"
	moref, err := l.MoRef(vm)
	if err != nil {
		t.Fatal(err)
	}
	uuid := findVM(t, c, vm).InstanceUUID
	if err := l.WriteDisk(vm, 0, 0, []byte("quiesce matrix")); err != nil {
		t.Fatal(err)
	}

	// A first backup turns CBT on, which takes a snapshot of its own (the
	// stun that makes tracking start): not part of the matrix.
	warm := policy.NewJob("warm", "warm-up", "main", nil)
	warm.Quiesce = policy.QuiesceNone
	if _, err := runner.RunBackup(context.Background(), warm, policy.VM{MoRef: moref, Name: vm}, func(policy.Progress) {}); err != nil {
		t.Fatal(err)
	}

	guests := []quiesceGuest{
		{name: "windows tools ok", family: "windowsGuest"},
		{name: "linux tools ok", family: "linuxGuest"},
		{name: "tools not running", family: "windowsGuest", toolsOff: true},
		{name: "quiesce fault", family: "windowsGuest", faults: 3},
		{name: "vss writer fault", family: "windowsGuest", faults: 3, writersOnly: true},
		{name: "linux quiesce fault", family: "linuxGuest", faults: 3},
		{name: "tools too old", family: "windowsGuest", toolsStatus: "guestToolsTooOld"},
	}
	type mode struct {
		name string
		job  func(*policy.Job)
	}
	modes := []mode{
		{"none", func(j *policy.Job) { j.Quiesce = policy.QuiesceNone }},
		{"filesystem", func(j *policy.Job) { j.Quiesce = policy.QuiesceFileSystem }},
		{"application", func(j *policy.Job) { j.Quiesce = policy.QuiesceApplication }},
		{"application full", func(j *policy.Job) { j.Quiesce, j.VSSType = policy.QuiesceApplication, policy.VSSFull }},
	}
	crash := backup.ConsistencyCrash
	fsys := backup.ConsistencyFilesystem
	app := backup.ConsistencyApplication
	ok := func(obtained, reason string, specs ...string) [2]want {
		w := want{specs: specs, obtained: obtained, reason: reason}
		return [2]want{w, w}
	}
	// fallback: prefer gets a lesser point, require fails after the first spec.
	fallback := func(obtained, reason string, specs ...string) [2]want {
		return [2]want{{specs: specs, obtained: obtained, reason: reason}, {specs: specs[:1], fail: true}}
	}
	// expected[guest][mode] = {prefer, require}
	expected := map[string]map[string][2]want{
		"windows tools ok": {
			"none":             ok(crash, "", specNone),
			"filesystem":       ok(fsys, "", specFSWin),
			"application":      ok(app, "", specAppCopy),
			"application full": ok(app, "", specAppFull),
		},
		"linux tools ok": {
			"none":             ok(crash, "", specNone),
			"filesystem":       ok(fsys, "", specPlain),
			"application":      ok(fsys, backup.ReasonNotWindows, specPlain),
			"application full": ok(fsys, backup.ReasonNotWindows, specPlain),
		},
		"tools not running": {
			"none":       ok(crash, "", specNone),
			"filesystem": fallback(crash, backup.ReasonToolsNotRunning, specFSWin, specNone),
			// No second quiesce without Tools.
			"application":      fallback(crash, backup.ReasonToolsNotRunning, specAppCopy, specNone),
			"application full": fallback(crash, backup.ReasonToolsNotRunning, specAppFull, specNone),
		},
		"quiesce fault": {
			"none":             ok(crash, "", specNone),
			"filesystem":       fallback(crash, backup.ReasonQuiesceFailed, specFSWin, specNone),
			"application":      fallback(crash, backup.ReasonQuiesceFailed, specAppCopy, specFSWin, specNone),
			"application full": fallback(crash, backup.ReasonQuiesceFailed, specAppFull, specFSWin, specNone),
		},
		"vss writer fault": {
			"none":             ok(crash, "", specNone),
			"filesystem":       ok(fsys, "", specFSWin),
			"application":      fallback(fsys, backup.ReasonQuiesceFailed, specAppCopy, specFSWin),
			"application full": fallback(fsys, backup.ReasonQuiesceFailed, specAppFull, specFSWin),
		},
		"linux quiesce fault": {
			"none":             ok(crash, "", specNone),
			"filesystem":       fallback(crash, backup.ReasonQuiesceFailed, specPlain, specNone),
			"application":      fallback(crash, backup.ReasonQuiesceFailed, specPlain, specNone),
			"application full": fallback(crash, backup.ReasonQuiesceFailed, specPlain, specNone),
		},
		"tools too old": {
			"none": ok(crash, "", specNone),
			// vSphere calls these Tools unsupported: no quiesce is tried.
			"filesystem":       {{specs: []string{specNone}, obtained: crash, reason: backup.ReasonToolsTooOld}, {fail: true}},
			"application":      {{specs: []string{specNone}, obtained: crash, reason: backup.ReasonToolsTooOld}, {fail: true}},
			"application full": {{specs: []string{specNone}, obtained: crash, reason: backup.ReasonToolsTooOld}, {fail: true}},
		},
	}

	ctx := context.Background()
	for _, g := range guests {
		for _, m := range modes {
			for pi, required := range []bool{false, true} {
				if required && m.name == "none" {
					continue // refused by validation
				}
				w := expected[g.name][m.name][pi]
				name := fmt.Sprintf("%s/%s/%s", g.name, m.name, map[bool]string{false: "prefer", true: "require"}[required])
				t.Run(name, func(t *testing.T) {
					must := func(err error) {
						t.Helper()
						if err != nil {
							t.Fatal(err)
						}
					}
					must(l.SetGuestFamily(vm, g.family))
					must(l.SetToolsRunning(vm, !g.toolsOff))
					status := g.toolsStatus
					if status == "" {
						status = "guestToolsCurrent"
					}
					must(l.SetToolsVersion(vm, "9344", status)) // 9.4.0
					must(l.ClearQuiesceFaults(vm))
					if g.faults > 0 {
						must(l.FailNextQuiesceWith(vm, g.faults, faultText, g.writersOnly))
					}
					must(l.ResetSnapshotRequests(vm))
					before := len(pointsOf(t, r))

					job := policy.NewJob("q", "quiesce", "main", nil)
					job.Selection.VMs = []string{uuid}
					m.job(&job)
					job.QuiesceRequired = required
					if _, err := job.Validate(ctx, policy.ValidateEnv{}); err != nil {
						t.Fatalf("job does not validate: %v", err)
					}
					res, err := runner.RunBackup(ctx, job, policy.VM{MoRef: moref, Name: vm}, func(policy.Progress) {})

					reqs, rerr := l.SnapshotRequests(vm)
					must(rerr)
					var got []string
					for _, q := range reqs {
						got = append(got, specString(q.Quiesce))
					}
					if strings.Join(got, " | ") != strings.Join(w.specs, " | ") {
						t.Errorf("specs sent:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(w.specs, "\n  "))
					}
					if names, _ := l.Snapshots(vm); len(names) != 0 {
						t.Errorf("snapshots left: %v", names)
					}
					if w.fail {
						if !errors.Is(err, backup.ErrQuiesce) {
							t.Fatalf("job outcome %v (point %q), want ErrQuiesce", err, res.PointID)
						}
						if g.faults > 0 && !strings.Contains(err.Error(), faultText) {
							t.Errorf("error %q lacks vSphere's fault text", err)
						}
						if n := len(pointsOf(t, r)); n != before {
							t.Errorf("a failed VM committed %d points", n-before)
						}
						return
					}
					if err != nil {
						t.Fatalf("job outcome: %v", err)
					}
					p, err := r.Point(ctx, res.PointID)
					must(err)
					if p.Consistency != w.obtained {
						t.Errorf("consistency %q, want %q", p.Consistency, w.obtained)
					}
					view := repos.PointView("main", p).Quiesce
					if view == nil {
						t.Fatalf("API view has no quiesce detail (tags %v)", p.Tags)
					}
					wantReq := map[string]string{"none": "none", "filesystem": "filesystem", "application": "application", "application full": "application"}[m.name]
					if view.Requested != wantReq || view.Obtained != w.obtained || view.Reason != w.reason {
						t.Errorf("quiesce detail %+v, want requested %s obtained %s reason %q", *view, wantReq, w.obtained, w.reason)
					}
					switch wantVSS := map[string]string{"application": "copy", "application full": "full"}[m.name]; {
					case view.VSSType != wantVSS:
						t.Errorf("vssType %q, want %q", view.VSSType, wantVSS)
					}
					if view.ToolsVersion != "9.4.0" || view.ToolsStatus != status {
						t.Errorf("tools %q %q, want 9.4.0 %s", view.ToolsVersion, view.ToolsStatus, status)
					}
					// The kept snapshot's spec is the last one sent.
					wantSpec := map[string]string{specNone: "", specPlain: "tools", specAppCopy: "vss:ctx_backup:copy",
						specAppFull: "vss:ctx_backup:full", specFSWin: "vss:ctx_file_share_backup:copy"}[w.specs[len(w.specs)-1]]
					if view.Spec != wantSpec {
						t.Errorf("spec %q, want %q", view.Spec, wantSpec)
					}
					switch w.reason {
					case backup.ReasonQuiesceFailed:
						if !strings.Contains(view.Detail, faultText) {
							t.Errorf("detail %q lacks vSphere's fault text", view.Detail)
						}
					case backup.ReasonToolsNotRunning:
						if !strings.Contains(view.Detail, "not running") {
							t.Errorf("detail %q", view.Detail)
						}
					case backup.ReasonToolsTooOld:
						if !strings.Contains(view.Detail, "9.4.0") || !strings.Contains(view.Detail, "too old") {
							t.Errorf("detail %q", view.Detail)
						}
					}
					// A fallback warns; reaching what was asked (or all a
					// non-Windows guest can give) does not.
					fellBack := w.reason != "" && w.reason != backup.ReasonNotWindows
					if warned := hasQuiesceWarning(p.Warnings); warned != fellBack {
						t.Errorf("warnings %q (fallback %v)", p.Warnings, fellBack)
					}
				})
			}
		}
	}
}

func hasQuiesceWarning(ws []string) bool {
	for _, w := range ws {
		if strings.Contains(w, "quiesc") {
			return true
		}
	}
	return false
}

func pointsOf(t *testing.T, r *repository.Repository) []repository.Point {
	t.Helper()
	ps, err := r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
