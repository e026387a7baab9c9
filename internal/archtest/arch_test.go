package archtest

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/vmvault/vmvault"

type rule struct {
	pkg     string   // package pattern relative to the module: "dedup/..." or "dedup"
	allowed []string // our packages it may import (patterns); everything else of ours is forbidden
	denied  []string // our packages it must never import (checked even when allowed is nil)
}

// rules mirror DESIGN.md and LESSONS.md §7.2. The lab (vcsim-tests/...)
// reaches the binary only through `appliance demo`: no engine may import it. allowed == nil means "anything
// but denied".
var rules = []rule{
	{pkg: "dedup/...", allowed: []string{"dedup/...", "internal/extent"}},
	{pkg: "internal/extent/...", allowed: []string{"internal/extent/..."}},
	{pkg: "repository/...", allowed: []string{"repository/...", "internal/failpoint"}},
	{pkg: "internal/failpoint/...", allowed: []string{"internal/failpoint/..."}},
	{pkg: "vmdk/...", allowed: []string{"vmdk/..."}},
	{pkg: "diskimage/...", allowed: []string{"diskimage/...", "vmdk/..."}},
	{pkg: "internal/clock/...", allowed: []string{"internal/clock/..."}},
	{pkg: "vsphere/...", denied: []string{"repository/...", "dedup/...", "backup/...", "restore/...", "policy/...", "web/...", "cmd/...", "vcsim-tests/..."}},
	{pkg: "policy/...", denied: []string{"backup/...", "restore/...", "vsphere/...", "repository/...", "dedup/...", "web/...", "cmd/...", "vcsim-tests/..."}},
	{pkg: "backup/...", denied: []string{"restore/...", "policy/...", "web/...", "cmd/...", "vcsim-tests/..."}},
	{pkg: "restore/...", denied: []string{"backup/...", "policy/...", "web/...", "cmd/...", "vcsim-tests/..."}},
	{pkg: "web/...", denied: []string{"cmd/...", "vcsim-tests/..."}},
	// inventory is the one adapter that knows both vsphere and policy.
	{pkg: "inventory/...", denied: []string{"backup/...", "restore/...", "repository/...", "dedup/...", "web/...", "cmd/...", "vcsim-tests/..."}},
	{pkg: "vmconfig/...", allowed: []string{"vmconfig/..."}},
}

func match(pattern, rel string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

func matchAny(patterns []string, rel string) bool {
	for _, p := range patterns {
		if match(p, rel) {
			return true
		}
	}
	return false
}

type listed struct {
	ImportPath string
	Deps       []string
}

// goList returns every package of the module with its transitive deps.
func goList(t *testing.T) []listed {
	t.Helper()
	// Run from the module root with ./...: a module-path pattern makes go list
	// insist on a tidy go.mod even for packages excluded by build tags.
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []listed
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// violations returns the forbidden edges "pkg -> dep" among pkgs.
func violations(pkgs []listed) []string {
	var bad []string
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		for _, r := range rules {
			if !match(r.pkg, rel) {
				continue
			}
			for _, d := range p.Deps {
				drel, ours := strings.CutPrefix(d, module+"/")
				if !ours || path.Base(drel) == "archtest" {
					continue
				}
				if matchAny(r.denied, drel) || (r.allowed != nil && !matchAny(r.allowed, drel)) {
					bad = append(bad, rel+" -> "+drel)
				}
			}
		}
	}
	return bad
}

func TestImportRules(t *testing.T) {
	pkgs := goList(t)
	if len(pkgs) < 2 {
		t.Fatalf("go list found %d packages; the rule check would prove nothing", len(pkgs))
	}
	for _, v := range violations(pkgs) {
		t.Errorf("forbidden import edge (DESIGN.md, imports flow one way): %s", v)
	}
}

// TestRulesCatchViolation proves the checker is not vacuous: a synthetic
// repository -> vsphere edge and a dedup -> repository edge are reported.
func TestRulesCatchViolation(t *testing.T) {
	pkgs := []listed{
		{ImportPath: module + "/repository/pack", Deps: []string{"fmt", module + "/vsphere"}},
		{ImportPath: module + "/dedup", Deps: []string{module + "/repository"}},
		{ImportPath: module + "/backup", Deps: []string{module + "/dedup", module + "/repository", module + "/vsphere"}},
	}
	got := violations(pkgs)
	want := map[string]bool{"repository/pack -> vsphere": true, "dedup -> repository": true}
	if len(got) != len(want) {
		t.Fatalf("violations = %v, want %v", got, want)
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected violation %q", g)
		}
	}
}
