package archtest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// scope says which builds of a package a rule constrains.
type scope int

const (
	prod  scope = 1 << iota // the package as the daemon links it
	tests                   // the package with its tests (what `go test` builds)
	both  = prod | tests
)

func (s scope) has(test bool) bool {
	if test {
		return s&tests != 0
	}
	return s&prod != 0
}

// depRule constrains what the packages matching pkg depend on.
type depRule struct {
	name   string // unique, what a failure names
	source string // where the rule is stated
	pkg    string // pattern, module-relative
	scope  scope
	// allowed: our packages it may depend on (transitively); nil means any
	// not denied.
	allowed []string
	// denied: our packages it must never depend on (transitively).
	denied []string
	// thirdParty: the third-party modules it may import directly; nil
	// means any, empty means the standard library only.
	thirdParty []string
	// never: import paths (standard or third party) it must never depend
	// on, transitively: "net", "github.com/vmware/govmomi/simulator".
	never []string
	// exempt: non-test files that break the rule today, each with why. A
	// listed file that no longer breaks it fails the test too, so the list
	// only shrinks.
	exempt map[string]string
}

// importerRule says who may import target directly (non-test code only:
// any test may import it unless a depRule says otherwise).
type importerRule struct {
	name   string
	source string
	target string // pattern, module-relative; or a third-party module path if third
	third  bool
	// from: the packages whose non-test code may import it (the target's
	// own packages always may).
	from   []string
	exempt map[string]string // file -> why
}

// pairRule: of the packages in non-test code, only those matching only may
// import both a and b directly.
type pairRule struct {
	name, source string
	a, b         string
	only         []string
}

// Package sets several rules share.
var (
	engines   = []string{"backup/...", "restore/..."}
	outerRing = []string{"web/...", "cmd/...", "daemon/...", "vcsim-tests/..."}
)

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// webServiceFiles are web files allowed to import repository or
// internal/state: none since web became HTTP only (issue 13); the services
// live in reposvc, records and settings, reached through web's interfaces.
var webServiceFiles = map[string]string{}

// depRules are the layering rules the package docs (doc.go) and DESIGN.md
// ("Imports flow one way") state. Each is proved to fire by a planted
// violation in TestRulesCatchPlantedViolations.
var depRules = []depRule{
	{name: "dedup-pure", source: "dedup/doc.go", pkg: "dedup/...", scope: both,
		allowed: []string{"dedup/...", "internal/extent"}, thirdParty: []string{"github.com/restic/chunker", "golang.org/x/sync"}},
	{name: "extent-leaf", source: "internal/extent/extent.go (the one extent normaliser: imports nothing of ours)", pkg: "internal/extent/...", scope: both,
		allowed: []string{"internal/extent/..."}},
	{name: "vmdk-pure", source: "vmdk/doc.go", pkg: "vmdk/...", scope: prod,
		allowed: []string{"vmdk/..."}, never: []string{"net", "os/exec"}},
	{name: "vmdk-tests-no-vcsim", source: "vmdk/doc.go (pure)", pkg: "vmdk/...", scope: tests,
		allowed: []string{"vmdk/..."}, never: []string{"github.com/vmware/govmomi/simulator"}},
	{name: "diskimage-only-vmdk", source: "diskimage/doc.go", pkg: "diskimage/...", scope: both,
		allowed: []string{"diskimage/...", "vmdk/..."}},
	{name: "vmconfig-nothing", source: "vmconfig/doc.go", pkg: "vmconfig/...", scope: both,
		allowed: []string{"vmconfig/..."}},
	{name: "clock-stdlib-only", source: "internal/clock/doc.go", pkg: "internal/clock/...", scope: both,
		allowed: []string{"internal/clock/..."}, thirdParty: []string{}},
	{name: "failpoint-nothing", source: "repository/doc.go, repository/storage (failpoint sits below them)", pkg: "internal/failpoint/...", scope: prod,
		allowed: []string{"internal/failpoint/..."}},
	{name: "repository-own", source: "repository/doc.go", pkg: "repository/...", scope: both,
		allowed: []string{"repository/...", "internal/failpoint", "internal/clock"}},
	{name: "storage-only-failpoint", source: "repository/storage/storage.go", pkg: "repository/storage", scope: prod,
		allowed: []string{"repository/storage", "internal/failpoint"}},
	{name: "vsphere-below-engines", source: "vsphere/doc.go, inventory/doc.go", pkg: "vsphere/...", scope: both,
		denied: join([]string{"repository/...", "dedup/...", "policy/..."}, engines, outerRing)},
	{name: "policy-no-engines", source: "policy/doc.go, inventory/doc.go (testable without vsphere)", pkg: "policy/...", scope: both,
		denied: join([]string{"vsphere/...", "repository/...", "dedup/..."}, engines, outerRing)},
	{name: "backup-layer", source: "backup/doc.go", pkg: "backup/...", scope: both,
		denied: join([]string{"restore/...", "policy/..."}, outerRing)},
	{name: "backup-unit-tests-fake", source: "backup/doc.go (unit tests use fakes; the vcsim lab is vcsim-tests/backupe2e's)", pkg: "backup/...", scope: tests,
		denied: []string{"vcsim-tests/..."}, never: []string{"github.com/vmware/govmomi/simulator"}},
	{name: "restore-layer", source: "restore/doc.go", pkg: "restore/...", scope: both,
		denied: join([]string{"backup/...", "policy/..."}, outerRing)},
	{name: "inventory-adapter-only", source: "inventory/doc.go", pkg: "inventory/...", scope: both,
		denied: join([]string{"repository/...", "dedup/..."}, engines, outerRing)},
	{name: "auth-knows-no-http", source: "internal/auth/doc.go", pkg: "internal/auth/...", scope: both,
		allowed: []string{"internal/auth/...", "internal/clock", "internal/state/schema", "internal/failpoint"}, thirdParty: []string{"golang.org/x/crypto", "go.etcd.io/bbolt"}},
	{name: "task-knows-no-engine", source: "internal/task/doc.go", pkg: "internal/task/...", scope: both,
		allowed: []string{"internal/task/...", "internal/clock", "internal/state/schema", "internal/failpoint"}, thirdParty: []string{"go.etcd.io/bbolt"}},
	{name: "schema-leaf", source: "internal/state/schema/doc.go (auth and task import it, so it imports nothing of ours but failpoint)", pkg: "internal/state/schema/...", scope: prod,
		allowed: []string{"internal/state/schema/...", "internal/failpoint"}},
	{name: "state-below-engines", source: "internal/state/doc.go", pkg: "internal/state/...", scope: both,
		denied: join([]string{"vsphere/...", "repository/..."}, engines, outerRing)},
	{name: "internal-below-service", source: "DESIGN.md (imports flow one way)", pkg: "internal/...", scope: prod,
		denied: []string{"web/...", "cmd/...", "daemon/...", "filerestore/..."}},
	{name: "notify-reads-interfaces", source: "notify/doc.go", pkg: "notify/...", scope: both,
		denied: join([]string{"vsphere/...", "repository/..."}, engines, outerRing)},
	{name: "flr-reads-readerat", source: "flr/flr.go (disks come in as Disk values), DESIGN.md", pkg: "flr/...", scope: both,
		denied: join([]string{"repository/...", "vsphere/...", "dedup/...", "filerestore/..."}, engines, outerRing)},
	{name: "filerestore-no-http", source: "filerestore/service.go (what it does not: HTTP)", pkg: "filerestore/...", scope: prod,
		denied: outerRing},
	{name: "web-no-engines", source: "web/doc.go", pkg: "web/...", scope: prod,
		denied: join([]string{"vsphere/..."}, engines, []string{"cmd/...", "daemon/...", "vcsim-tests/..."})},
	{name: "web-http-only", source: "DESIGN.md, issue 13 (web is HTTP only)", pkg: "web", scope: prod,
		// internal/state itself; its schema leaf (the codec auth and task
		// share) is reached through them.
		denied: []string{"repository/...", "internal/state"}, exempt: webServiceFiles},
	{name: "web-tests-no-lab", source: "vcsim-tests/lab/doc.go (web never imports the lab)", pkg: "web/...", scope: tests,
		denied: []string{"vcsim-tests/...", "daemon/...", "cmd/..."}, never: []string{"github.com/vmware/govmomi/simulator"}},
	{name: "console-nothing", source: "web/console/doc.go", pkg: "web/console/...", scope: both,
		allowed: []string{"web/console/..."}},
	{name: "openapitest-nothing", source: "web/openapitest/openapitest.go", pkg: "web/openapitest/...", scope: both,
		allowed: []string{"web/openapitest/..."}},
	{name: "browsertest-nothing", source: "internal/browsertest/doc.go", pkg: "internal/browsertest/...", scope: both,
		allowed: []string{"internal/browsertest/..."}},
	{name: "imagebackup-engine", source: "imagebackup/imagebackup.go (the CLI's image engine: no HTTP, no daemon, no lab)", pkg: "imagebackup/...", scope: prod,
		denied: []string{"restore/...", "policy/...", "web/...", "cmd/...", "daemon/...", "vcsim-tests/..."}},
	{name: "vmstatus-pure", source: "vmstatus/vmstatus.go (pure: callers read the inventory, jobs, points and states)", pkg: "vmstatus/...", scope: prod,
		allowed: []string{"vmstatus/...", "policy/...", "internal/clock/..."}},
	{name: "progress-nothing", source: "internal/progress/progress.go", pkg: "internal/progress/...", scope: both,
		allowed: []string{"internal/progress/..."}},
	// The daemon package (daemon/, introduced by issue 13) may not exist
	// yet: these rules match nothing until it does.
	{name: "daemon-below-cmd", source: "DESIGN.md (cmd -> service layer -> web)", pkg: "daemon/...", scope: both,
		denied: []string{"cmd/..."}},
	// The daemon reaches web/api and web/console through web (transitive
	// edges), so only the lab is denied here; the symbol check keeps it off
	// web's old service types.
	{name: "daemon-no-lab", source: "DESIGN.md, issue 13 (the daemon never reaches the lab; the demo wires it)", pkg: "daemon/...", scope: prod,
		denied: []string{"vcsim-tests/..."}},
}

// importerRules say who may import a package at all.
var importerRules = []importerRule{
	{name: "testutil-tests-only", source: "internal/testutil/doc.go", target: "internal/testutil/..."},
	{name: "browsertest-tests-only", source: "internal/browsertest/doc.go", target: "internal/browsertest/..."},
	{name: "openapitest-tests-only", source: "web/openapitest/openapitest.go", target: "web/openapitest/...", from: []string{"web/webtest"}},
	{name: "webtest-tests-only", source: "web/webtest/webtest.go", target: "web/webtest/..."},
	// frtest is itself test support: it builds flrtest's images into a repository.
	{name: "flrtest-tests-only", source: "flr/flrtest/flrtest.go", target: "flr/flrtest/...", from: []string{"filerestore/frtest"}},
	{name: "frtest-tests-only", source: "filerestore/frtest/frtest.go", target: "filerestore/frtest/..."},
	{name: "lab-tests-and-demo-only", source: "vcsim-tests/lab/doc.go", target: "vcsim-tests/lab/...", from: []string{"cmd/appliance", "demo", "vcsim-tests/..."}},
	// demo wires the lab to the daemon for `appliance demo`, so it sits
	// above the daemon beside cmd/appliance, its only importer.
	{name: "daemon-from-cmd-only", source: "DESIGN.md (cmd/appliance imports the daemon, not the reverse; demo/doc: the demo runs it)", target: "daemon/...", from: []string{"cmd/...", "demo"}},
	{name: "demo-from-cmd-only", source: "demo/demo.go (only cmd/appliance imports it)", target: "demo/...", from: []string{"cmd/appliance"}},
	// Engines are driven from above (the service, the CLI, test support),
	// never imported by the layers they use.
	{name: "backup-imported-from-above", source: "DESIGN.md (policy -> backup/restore -> vsphere, dedup, repository)", target: "backup/...",
		from: []string{"cmd/...", "daemon/...", "imagebackup", "vcsim-tests/...", "filerestore/frtest"}},
	{name: "restore-imported-from-above", source: "DESIGN.md (policy -> backup/restore -> vsphere, dedup, repository)", target: "restore/...",
		from: []string{"cmd/...", "daemon/...", "vcsim-tests/..."}},
	// Every bbolt file has one owner package: state.db (internal/state),
	// the auth and task stores (web.db, through auth and task BoltStores),
	// index.db (repository), the file catalog (flr/catalog).
	{name: "bbolt-owners", source: "internal/state/doc.go, internal/auth/doc.go, internal/task/doc.go, repository/doc.go, flr/catalog/catalog.go", target: "go.etcd.io/bbolt", third: true,
		from: []string{"internal/state", "internal/state/schema", "internal/auth", "internal/task", "approval", "repository", "flr/catalog"},
		exempt: map[string]string{
			"settings/bolt.go": "settings persisted in web.db; removed when state.db has one owner (issue 13)",
			"copyjob/store.go": "copy jobs and their runs in state.db (buckets copy-jobs, copy-runs, declared in internal/state/schema), through the codec",
			"daemon/daemon.go": "tells bbolt's lock timeout (state.db held by another process) from other open errors; removed when internal/state returns its own sentinel (issue 13)",
		}},
}

var pairRules = []pairRule{
	{name: "inventory-only-bridge", source: "inventory/doc.go (the only package that knows both vsphere and policy)",
		a: "vsphere", b: "policy", only: []string{"inventory", "cmd/...", "daemon/..."}},
}

type violation struct {
	rule string
	msg  string
}

func (v violation) String() string { return v.rule + ": " + v.msg }

func kind(test bool) string {
	if test {
		return " (tests)"
	}
	return ""
}

// depBreaks returns what in deps breaks r (ours: module-relative).
func (r depRule) depBreaks(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if dr, ours := rel(d); ours {
			if dr == "internal/archtest" {
				continue
			}
			if matchAny(r.denied, dr) || (r.allowed != nil && !matchAny(r.allowed, dr)) {
				bad = append(bad, dr)
			}
			continue
		}
		for _, n := range r.never {
			if hasPrefixPath(d, []string{n}) && !slices.Contains(bad, n) {
				bad = append(bad, n) // the prefix once, not each subpackage
			}
		}
	}
	return bad
}

func (r depRule) thirdBreaks(imports []string) []string {
	if r.thirdParty == nil {
		return nil
	}
	var bad []string
	for _, d := range imports {
		if _, ours := rel(d); ours || standard(d) {
			continue
		}
		if !hasPrefixPath(d, r.thirdParty) {
			bad = append(bad, d)
		}
	}
	return bad
}

func (r depRule) check(g graph) []violation {
	var out []violation
	add := func(format string, a ...any) { out = append(out, violation{r.name, fmt.Sprintf(format, a...)}) }
	seenExempt := map[string]bool{}
	for _, p := range g {
		pr, ours := rel(p.Path)
		if !ours || !match(r.pkg, pr) || !r.scope.has(p.Test) {
			continue
		}
		if !p.Test && len(r.exempt) > 0 {
			// File by file: only the files not exempted must keep the rule.
			for _, f := range sortedKeys(p.Files) {
				bad := r.depBreaks(g.closure(p.Files[f]))
				if _, ok := r.exempt[f]; ok {
					seenExempt[f] = true
					if len(bad) == 0 {
						add("%s is exempted but no longer breaks the rule: remove it from the list", f)
					}
					continue
				}
				for _, b := range bad {
					add("%s (%s) -> %s", pr, f, b)
				}
			}
		} else {
			for _, b := range r.depBreaks(p.Deps) {
				add("%s%s -> %s", pr, kind(p.Test), b)
			}
		}
		for _, b := range r.thirdBreaks(p.Imports) {
			add("%s%s imports %s (not among %v)", pr, kind(p.Test), b, r.thirdParty)
		}
	}
	for _, f := range sortedKeys(r.exempt) {
		if !seenExempt[f] {
			add("%s is exempted but is not a file of %s any more: remove it from the list", f, r.pkg)
		}
	}
	return out
}

func (r importerRule) targets(imp string) bool {
	if r.third {
		return hasPrefixPath(imp, []string{r.target})
	}
	ir, ours := rel(imp)
	return ours && match(r.target, ir)
}

func (r importerRule) check(g graph) []violation {
	var out []violation
	used := map[string]bool{}
	for _, p := range g {
		pr, ours := rel(p.Path)
		if p.Test || !ours || (!r.third && match(r.target, pr)) || matchAny(r.from, pr) {
			continue
		}
		for _, f := range sortedKeys(p.Files) {
			for _, imp := range p.Files[f] {
				if !r.targets(imp) {
					continue
				}
				if _, ok := r.exempt[f]; ok {
					used[f] = true
					continue
				}
				out = append(out, violation{r.name, fmt.Sprintf("%s (%s) imports %s", pr, f, imp)})
			}
		}
	}
	for _, f := range sortedKeys(r.exempt) {
		if !used[f] {
			out = append(out, violation{r.name, fmt.Sprintf("%s is exempted but no longer imports %s: remove it from the list", f, r.target)})
		}
	}
	return out
}

func (r pairRule) check(g graph) []violation {
	var out []violation
	for _, p := range g {
		pr, ours := rel(p.Path)
		if p.Test || !ours || matchAny(r.only, pr) {
			continue
		}
		var a, b bool
		for _, imp := range p.Imports {
			ir, ours := rel(imp)
			a = a || (ours && match(r.a+"/...", ir))
			b = b || (ours && match(r.b+"/...", ir))
		}
		if a && b {
			out = append(out, violation{r.name, fmt.Sprintf("%s imports both %s and %s", pr, r.a, r.b)})
		}
	}
	return out
}

// allViolations runs every import rule over g.
func allViolations(g graph) []violation {
	var out []violation
	for _, r := range depRules {
		out = append(out, r.check(g)...)
	}
	for _, r := range importerRules {
		out = append(out, r.check(g)...)
	}
	for _, r := range pairRules {
		out = append(out, r.check(g)...)
	}
	return out
}

func ruleNames() []string {
	var names []string
	for _, r := range depRules {
		names = append(names, r.name)
	}
	for _, r := range importerRules {
		names = append(names, r.name)
	}
	for _, r := range pairRules {
		names = append(names, r.name)
	}
	return names
}

func ruleSource(name string) string {
	for _, r := range depRules {
		if r.name == name {
			return r.source
		}
	}
	for _, r := range importerRules {
		if r.name == name {
			return r.source
		}
	}
	for _, r := range pairRules {
		if r.name == name {
			return r.source
		}
	}
	return "?"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func describe(vs []violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("\n\t" + v.String())
	}
	return b.String()
}
