package archtest

import (
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/vmvault/vmvault"

// pkg is one package of the module, either as built (Test false) or as
// built for its tests (Test true: the package with its _test.go files and
// its external _test package, merged into one node).
type pkg struct {
	Path    string              // full import path
	Test    bool                // the test build of Path
	Imports []string            // direct imports, full paths
	Deps    []string            // transitive imports, full paths
	Files   map[string][]string // non-test builds only: file (module-relative) -> its direct imports
}

type graph []pkg

// rel returns an import path relative to the module and whether it is ours.
func rel(p string) (string, bool) {
	if p == module {
		return "", true
	}
	r, ok := strings.CutPrefix(p, module+"/")
	return r, ok
}

// match reports whether a module-relative path matches pattern: "a/b"
// exactly, "a/b/..." the package and everything below it, "a/b/+"
// everything strictly below it.
func match(pattern, r string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return r == base || strings.HasPrefix(r, base+"/")
	}
	if base, ok := strings.CutSuffix(pattern, "/+"); ok {
		return strings.HasPrefix(r, base+"/")
	}
	return r == pattern
}

func matchAny(patterns []string, r string) bool {
	for _, p := range patterns {
		if match(p, r) {
			return true
		}
	}
	return false
}

// hasPrefixPath reports whether import path p is prefix or below it
// ("net" matches "net" and "net/http", not "netip").
func hasPrefixPath(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// standard reports whether p is a standard library package (no dot in its
// first element) rather than ours or a third party's.
func standard(p string) bool {
	if _, ours := rel(p); ours {
		return false
	}
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

type listed struct {
	ImportPath string
	ForTest    string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
}

// strip turns "p [q.test]" (a package recompiled for q's tests) into "p".
func strip(p string) string {
	s, _, _ := strings.Cut(p, " ")
	return s
}

// loadGraph lists every package of the module and its test build with `go
// list -test`, and reads the imports of every non-test file.
func loadGraph(t *testing.T, root string) graph {
	t.Helper()
	// Run from the module root with ./...: a module-path pattern makes go list
	// insist on a tidy go.mod even for packages excluded by build tags.
	cmd := exec.Command("go", "list", "-test", "-json=ImportPath,ForTest,Dir,GoFiles,CgoFiles,Imports,Deps", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	prod := map[string]*pkg{}
	tests := map[string]*pkg{}
	var order []string
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if strings.HasSuffix(l.ImportPath, ".test") {
			continue // the generated test main
		}
		if l.ForTest == "" {
			p := &pkg{Path: l.ImportPath, Imports: l.Imports, Deps: l.Deps, Files: map[string][]string{}}
			for _, f := range append(append([]string(nil), l.GoFiles...), l.CgoFiles...) {
				imps, err := fileImports(filepath.Join(l.Dir, f))
				if err != nil {
					t.Fatal(err)
				}
				r, err := filepath.Rel(root, filepath.Join(l.Dir, f))
				if err != nil {
					t.Fatal(err)
				}
				p.Files[filepath.ToSlash(r)] = imps
			}
			prod[l.ImportPath] = p
			order = append(order, l.ImportPath)
			continue
		}
		tp := tests[l.ForTest]
		if tp == nil {
			tp = &pkg{Path: l.ForTest, Test: true}
			tests[l.ForTest] = tp
		}
		for _, d := range l.Imports {
			tp.Imports = append(tp.Imports, strip(d))
		}
		for _, d := range l.Deps {
			tp.Deps = append(tp.Deps, strip(d))
		}
	}
	var g graph
	for _, path := range order {
		g = append(g, *prod[path])
		if tp := tests[path]; tp != nil {
			tp.Imports = dedupe(tp.Imports, path)
			tp.Deps = dedupe(tp.Deps, path)
			g = append(g, *tp)
		}
	}
	return g
}

// dedupe sorts paths, drops repeats and self (a test build lists the
// package it tests among its deps).
func dedupe(paths []string, self string) []string {
	sort.Strings(paths)
	out := paths[:0]
	for i, p := range paths {
		if p == self || (i > 0 && p == paths[i-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func fileImports(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var imps []string
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			return nil, err
		}
		imps = append(imps, p)
	}
	return imps, nil
}

// byPath indexes the non-test builds.
func (g graph) byPath() map[string]*pkg {
	m := map[string]*pkg{}
	for i := range g {
		if !g[i].Test {
			m[g[i].Path] = &g[i]
		}
	}
	return m
}

// closure returns imports and everything they depend on (ours only: the
// file-level checks are about our packages).
func (g graph) closure(imports []string) []string {
	idx := g.byPath()
	seen := map[string]bool{}
	for _, imp := range imports {
		if _, ours := rel(imp); !ours {
			continue
		}
		seen[imp] = true
		if p := idx[imp]; p != nil {
			for _, d := range p.Deps {
				if _, ours := rel(d); ours {
					seen[d] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
