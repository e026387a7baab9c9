package notify

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// notify consumes events and summaries through its own interfaces: it must
// not import the engines, the store, vSphere or the web layer (doc.go).
func TestImportsNothingForbidden(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"backup", "restore", "vsphere", "repository", "web", "inventory", "dedup"}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				prefix := "github.com/vmvault/vmvault/" + bad
				if p == prefix || strings.HasPrefix(p, prefix+"/") {
					t.Errorf("%s imports %s", f, p)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
