package web

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// forbiddenForWeb are the packages web must not import, directly or
// through another package: the engines and the state database (web is
// HTTP only and reaches them through the interfaces it declares), the
// service packages that implement those interfaces, and cmd.
var forbiddenForWeb = []string{
	"repository", "internal/state", "backup", "restore", "vsphere",
	"reposvc", "records", "settings", "cmd",
}

const modulePath = "github.com/vmvault/vmvault"

func forbiddenPath(imp string) bool {
	rel, ok := strings.CutPrefix(imp, modulePath+"/")
	if !ok {
		return false
	}
	if rel == "internal/state/schema" {
		// The state file's codec leaf (auth and task encode their records
		// with it): it opens no database and knows no record.
		return false
	}
	for _, f := range forbiddenForWeb {
		if rel == f || strings.HasPrefix(rel, f+"/") {
			return true
		}
	}
	return false
}

// forbiddenImports returns "file: import" for every forbidden import of
// the non-test Go files in dir.
func forbiddenImports(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, is := range f.Imports {
			p, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				t.Fatalf("%s: import %s: %v", name, is.Path.Value, err)
			}
			if forbiddenPath(p) {
				bad = append(bad, filepath.Base(name)+": "+p)
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// web is HTTP only (issue 13): neither it nor its DTO package imports an
// engine, the state database or a service package, and nothing it imports
// does either.
func TestWebImportsNoEngine(t *testing.T) {
	for _, dir := range []string{".", "api", "console"} {
		for _, b := range forbiddenImports(t, dir) {
			t.Errorf("web/%s imports a package web must not: %s", dir, b)
		}
	}
	if testing.Short() {
		return
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if forbiddenPath(dep) {
			t.Errorf("web depends on %s (through one of its imports; see go list -deps)", dep)
		}
	}
}

// The check is not vacuous: a planted import of an engine and of the state
// database is named, in a test file it is allowed, and an allowed import
// (policy) and a look-alike path (repositoryx) are not reported.
func TestForbiddenImportsCaught(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"planted.go": "package web\n\nimport (\n\t\"github.com/vmvault/vmvault/repository\"\n\t_ \"github.com/vmvault/vmvault/internal/state\"\n\t\"github.com/vmvault/vmvault/policy\"\n\t\"github.com/vmvault/vmvault/repositoryx\"\n)\n",
		"sub.go":     "package web\n\nimport \"github.com/vmvault/vmvault/vsphere/nfc\"\n",
		"ok_test.go": "package web\n\nimport \"github.com/vmvault/vmvault/repository\"\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := forbiddenImports(t, dir)
	want := []string{
		"planted.go: github.com/vmvault/vmvault/internal/state",
		"planted.go: github.com/vmvault/vmvault/repository",
		"sub.go: github.com/vmvault/vmvault/vsphere/nfc",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
