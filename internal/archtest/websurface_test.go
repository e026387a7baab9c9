package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// webServiceSymbols are web's exported service implementations: service
// logic that issue 13 moves out of web (web becomes HTTP only). The daemon
// builds web with its exported constructor (web.New and its Config) and
// implements the interfaces web declares; it must not build on these.
var webServiceSymbols = []string{"RepoSet", "NewRepoSet", "RepoMaintainer", "BoltSettings", "NewBoltSettings"}

// webSymbolUses returns "file:line web.Name" for every use of one of
// symbols from package web in the non-test files under root/dir (nothing
// when dir does not exist: daemon/ is being introduced).
func webSymbolUses(root, dir string, symbols []string) ([]string, error) {
	var uses []string
	base := filepath.Join(root, dir)
	if _, err := os.Stat(base); os.IsNotExist(err) {
		return nil, nil
	}
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		name := ""
		for _, s := range f.Imports {
			if p, _ := strconv.Unquote(s.Path.Value); p == module+"/web" {
				name = "web"
				if s.Name != nil {
					name = s.Name.Name
				}
			}
		}
		if name == "" {
			return nil
		}
		r, _ := filepath.Rel(root, path)
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && slices.Contains(symbols, sel.Sel.Name) {
					uses = append(uses, fmt.Sprintf("%s:%d web.%s", filepath.ToSlash(r), fset.Position(sel.Pos()).Line, sel.Sel.Name))
				}
			}
			return true
		})
		return nil
	})
	return uses, err
}

// TestDaemonUsesWebAsHTTPOnly: the daemon reaches web through its
// constructor and the interfaces it declares, not its service code.
func TestDaemonUsesWebAsHTTPOnly(t *testing.T) {
	uses, err := webSymbolUses(moduleRoot(t), "daemon", webServiceSymbols)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uses {
		t.Errorf("%s: web's service implementations move out of web (issue 13); the daemon owns that logic", u)
	}
}

// TestDaemonWebSymbolsPlanted plants a daemon package in a temporary
// module: an aliased web import using RepoSet is caught, web.New and a
// test file are not, and a missing daemon/ passes.
func TestDaemonWebSymbolsPlanted(t *testing.T) {
	root := t.TempDir()
	if uses, err := webSymbolUses(root, "daemon", webServiceSymbols); err != nil || len(uses) != 0 {
		t.Fatalf("no daemon/: uses %v, err %v", uses, err)
	}
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
	write("daemon/wire.go", "package daemon\n\nimport w \""+module+"/web\"\n\nfunc f() {\n\t_, _ = w.New(w.Config{})\n\t_ = w.NewRepoSet(nil)\n}\n")
	write("daemon/wire_test.go", "package daemon\n\nimport \""+module+"/web\"\n\nvar _ *web.RepoSet\n")
	uses, err := webSymbolUses(root, "daemon", webServiceSymbols)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"daemon/wire.go:7 web.NewRepoSet"}; !slices.Equal(uses, want) {
		t.Fatalf("uses %v, want %v", uses, want)
	}
}
