package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// timeNowException is a non-test file allowed to read the wall clock with
// time.Now (internal/clock/doc.go: clock is the only package that calls
// it; everything else receives a Clock). count is how many references the
// file may hold: one more fails, one fewer asks for the count to be lowered.
type timeNowException struct {
	count  int
	reason string
}

// timeNowExceptions are today's justified calls. A package that already
// holds a clock.Clock uses it instead (web/stream.go was converted).
var timeNowExceptions = map[string]timeNowException{
	// The repository takes a clock (OpenOptions.Clock) for what an open
	// repository decides (holds, retention); these stamps are written while
	// it is being created or opened, before that clock is handed in, and
	// are read by other processes and hosts as wall-clock time.
	"repository/lock.go":                     {2, "lock wait deadline and the holder's since-stamp written into the lock file"},
	"repository/catalogopen.go":              {1, "name of the quarantined copy of a damaged index.db"},
	"repository/config.go":                   {1, "the repository's creation stamp in its config"},
	"repository/keys.go":                     {1, "a key object's creation stamp (informative: repo key list shows it)"},
	"repository/multiwriter.go":              {1, "throttles catch-ups on the index log (a monotonic interval in memory, never stored or shared)"},
	"repository/s3store/objectlock.go":       {1, "the retain-until date of an Object Lock PUT: the server checks it against its own clock"},
	"repository/s3store/lease.go":            {6, "lease expiry is wall-clock time shared with other hosts through the bucket"},
	"repository/s3store/s3test.go":           {3, "test support (non-test file): starts a local S3 server with a deadline"},
	"service/filerestore/catalog/catalog.go": {3, "build duration and BuiltAt stamp of a catalog; catalog imports nothing of vmvault's"},
	// web holds a clock.Clock (Config.Clock): these move to s.now() or out
	// of web with the service (issue 13).
	// Engines measure elapsed time and stamp names; they take no clock today.
	"backup/pipeline.go":      {3, "per-disk elapsed time and progress reporting interval"},
	"backup/engine.go":        {6, "phase durations, the restore point's name stamp, and \"every snapshot of ours\" (a cut-off a day ahead) in the sweep before a snapshot retry"},
	"backup/probe.go":         {2, "the probe snapshot's name stamp and each probe's elapsed time"},
	"restore/engine.go":       {3, "default Options.Now and elapsed time of a restore"},
	"restore/disk.go":         {2, "elapsed time of a disk restore"},
	"restore/vm.go":           {1, "elapsed time of a VM restore"},
	"restore/instant.go":      {1, "elapsed time of an instant VM's start"},
	"vsphere/snapshot.go":     {1, "the snapshot description's marker stamp, read by vCenter operators"},
	"vsphere/client.go":       {2, "keep-alive: time of the session's last use"},
	"internal/state/state.go": {3, "open retry deadline while another process holds state.db's lock, and the stamp of the copy kept before a schema migration"},
	// The binary: CLI progress and elapsed time, and the real clock handed
	// to caches and progress bars (moved to daemon/ by issue 13).
	"cmd/appliance/cmd_restore.go":  {2, "CLI elapsed time and progress interval"},
	"cmd/appliance/cmd_backup.go":   {1, "CLI progress interval"},
	"cmd/appliance/cmd_files.go":    {1, "CLI elapsed time"},
	"internal/progress/progress.go": {1, "the progress bar's real clock (a terminal's rate and ETA)"},
	"daemon/daemon.go":              {2, "validity of the self-signed TLS certificate"},
}

// timeNowRefs returns, for every non-test .go file under root outside
// internal/clock (and testdata), the lines that reference time.Now
// (calls, and time.Now passed as a value).
func timeNowRefs(root string) (map[string][]int, error) {
	refs := map[string][]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, path)
		r = filepath.ToSlash(r)
		if d.IsDir() {
			name := d.Name()
			if r != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules" || r == "internal/clock") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(r, ".go") || strings.HasSuffix(r, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", r, err)
		}
		name := ""
		for _, s := range f.Imports {
			if p, _ := strconv.Unquote(s.Path.Value); p == "time" {
				name = "time"
				if s.Name != nil {
					name = s.Name.Name
				}
			}
		}
		if name == "" || name == "_" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Now" {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
				refs[r] = append(refs[r], fset.Position(sel.Pos()).Line)
			}
			return true
		})
		return nil
	})
	return refs, err
}

func timeNowViolations(refs map[string][]int, exceptions map[string]timeNowException) []string {
	var out []string
	for _, f := range sortedKeys(refs) {
		lines := refs[f]
		ex, ok := exceptions[f]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s calls time.Now at lines %v: take a clock.Clock (internal/clock), or add the file to timeNowExceptions with its reason", f, lines))
		case len(lines) > ex.count:
			out = append(out, fmt.Sprintf("%s calls time.Now %d times (lines %v), %d allowed (%s): use a clock.Clock for the new call", f, len(lines), lines, ex.count, ex.reason))
		case len(lines) < ex.count:
			out = append(out, fmt.Sprintf("%s calls time.Now %d times, %d allowed: lower its count in timeNowExceptions", f, len(lines), ex.count))
		}
	}
	for _, f := range sortedKeys(exceptions) {
		if _, ok := refs[f]; !ok {
			out = append(out, fmt.Sprintf("%s no longer calls time.Now: remove it from timeNowExceptions", f))
		}
	}
	return out
}

func TestTimeNowOnlyInClock(t *testing.T) {
	refs, err := timeNowRefs(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) == 0 {
		t.Fatal("no time.Now found anywhere: the scan proves nothing")
	}
	for _, v := range timeNowViolations(refs, timeNowExceptions) {
		t.Error(v)
	}
}

// TestTimeNowPlanted runs the scan on a module planted in a temporary
// directory: an unlisted call, an aliased import, a call past a file's
// count fail; test files, internal/clock, testdata and other packages'
// Now are ignored.
func TestTimeNowPlanted(t *testing.T) {
	root := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a.go", "package a\n\nimport \"time\"\n\nfunc f() time.Time {\n\treturn time.Now()\n}\n")
	write("b/b.go", "package b\n\nimport wall \"time\"\n\nvar now = wall.Now\n\nfunc g() { _ = wall.Now().Unix(); _ = now }\n")
	write("c/c.go", "package c\n\nimport \"time\"\n\ntype clk struct{}\n\nfunc (clk) Now() time.Time { return time.Time{} }\n\nfunc h(c clk) time.Time { return c.Now() }\n")
	write("a/a_test.go", "package a\n\nimport \"time\"\n\nvar _ = time.Now()\n")
	write("internal/clock/clock.go", "package clock\n\nimport \"time\"\n\nvar _ = time.Now()\n")
	write("a/testdata/x.go", "package x\n\nimport \"time\"\n\nvar _ = time.Now()\n")

	refs, err := timeNowRefs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || len(refs["a/a.go"]) != 1 || refs["a/a.go"][0] != 6 || len(refs["b/b.go"]) != 2 {
		t.Fatalf("refs = %v, want a/a.go:[6] and two in b/b.go", refs)
	}
	cases := []struct {
		name       string
		exceptions map[string]timeNowException
		want       []string
	}{
		{"unlisted", map[string]timeNowException{"b/b.go": {2, "x"}}, []string{"a/a.go calls time.Now at lines [6]"}},
		{"one call too many", map[string]timeNowException{"a/a.go": {1, "x"}, "b/b.go": {1, "x"}}, []string{"b/b.go calls time.Now 2 times"}},
		{"count to lower", map[string]timeNowException{"a/a.go": {2, "x"}, "b/b.go": {2, "x"}}, []string{"a/a.go calls time.Now 1 times, 2 allowed"}},
		{"stale", map[string]timeNowException{"a/a.go": {1, "x"}, "b/b.go": {2, "x"}, "gone.go": {1, "x"}}, []string{"gone.go no longer calls time.Now"}},
		{"all listed", map[string]timeNowException{"a/a.go": {1, "x"}, "b/b.go": {2, "x"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := timeNowViolations(refs, c.exceptions)
			if len(got) != len(c.want) {
				t.Fatalf("violations %q, want %d like %q", got, len(c.want), c.want)
			}
			for i := range got {
				if !strings.Contains(got[i], c.want[i]) {
					t.Errorf("violation %q, want it to contain %q", got[i], c.want[i])
				}
			}
		})
	}
}
