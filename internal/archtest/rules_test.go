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
	// except: our packages the rule lets through although denied matches
	// them (a pure leaf inside a denied tree).
	except []string
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
	// services: the packages behind the API (service/doc.go).
	services = []string{"service/..."}
	// webAbove: web's HTTP layer, what no service may import; web/api (the
	// DTOs both sides share) is not in it.
	webAbove = []string{"web", "web/console", "web/openapitest", "web/webtest"}
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
// live under service/, reached through web's interfaces.
var webServiceFiles = map[string]string{}

// depRules are the layering rules the package docs (doc.go) and
// docs/ARCHITECTURE.md ("Imports flow one way") state. Each is proved to
// fire by a planted violation in TestRulesCatchPlantedViolations.
var depRules = []depRule{
	{name: "dedup-pure", source: "dedup/doc.go", pkg: "dedup/...", scope: both,
		allowed: []string{"dedup/...", "internal/extent"}, thirdParty: []string{"github.com/restic/chunker", "golang.org/x/sync"}},
	{name: "extent-leaf", source: "internal/extent/extent.go (the one extent normaliser: imports nothing of ours)", pkg: "internal/extent/...", scope: both,
		allowed: []string{"internal/extent/..."}},
	// disk/ is pure format code: a VMDK or raw image in, extents and bytes
	// out, no network, no process, nothing of the appliance's.
	{name: "disk-pure", source: "disk/doc.go, disk/vmdk/doc.go, disk/imagefile/doc.go", pkg: "disk/...", scope: prod,
		allowed: []string{"disk/..."}, never: []string{"net", "os/exec"}},
	{name: "disk-tests-no-vcsim", source: "disk/vmdk/doc.go (pure)", pkg: "disk/...", scope: tests,
		allowed: []string{"disk/..."}, never: []string{"github.com/vmware/govmomi/simulator"}},
	{name: "vmconfig-nothing", source: "vmconfig/doc.go", pkg: "vmconfig/...", scope: both,
		allowed: []string{"vmconfig/..."}},
	{name: "clock-stdlib-only", source: "internal/clock/doc.go", pkg: "internal/clock/...", scope: both,
		allowed: []string{"internal/clock/..."}, thirdParty: []string{}},
	{name: "failpoint-nothing", source: "repository/doc.go, repository/storage (failpoint sits below them)", pkg: "internal/failpoint/...", scope: prod,
		allowed: []string{"internal/failpoint/..."}},
	{name: "repository-own", source: "repository/doc.go", pkg: "repository/...", scope: both,
		allowed: []string{"repository/...", "internal/failpoint", "internal/clock", "internal/ratelimit"}},
	{name: "ratelimit-leaf", source: "internal/ratelimit/doc.go (the storage layer's limiter: a clock is all it needs)", pkg: "internal/ratelimit/...", scope: both,
		allowed: []string{"internal/ratelimit/...", "internal/clock"}},
	{name: "storage-only-failpoint", source: "repository/storage/storage.go", pkg: "repository/storage", scope: prod,
		allowed: []string{"repository/storage", "internal/failpoint"}},
	{name: "vsphere-below-engines", source: "vsphere/doc.go, service/inventory/doc.go", pkg: "vsphere/...", scope: both,
		denied: join([]string{"repository/...", "dedup/...", "policy/...", "guestfs/..."}, engines, services, outerRing)},
	{name: "policy-no-engines", source: "policy/doc.go, service/inventory/doc.go (testable without vsphere)", pkg: "policy/...", scope: both,
		denied: join([]string{"vsphere/...", "repository/...", "dedup/..."}, engines, services, outerRing)},
	{name: "backup-layer", source: "backup/doc.go", pkg: "backup/...", scope: both,
		denied: join([]string{"restore/...", "policy/..."}, services, outerRing)},
	{name: "backup-unit-tests-fake", source: "backup/doc.go (unit tests use fakes; the vcsim lab is vcsim-tests/backupe2e's)", pkg: "backup/...", scope: tests,
		denied: []string{"vcsim-tests/..."}, never: []string{"github.com/vmware/govmomi/simulator"}},
	{name: "restore-layer", source: "restore/doc.go", pkg: "restore/...", scope: both,
		denied: join([]string{"backup/...", "policy/..."}, services, outerRing)},
	{name: "inventory-adapter-only", source: "service/inventory/doc.go", pkg: "service/inventory/...", scope: both,
		denied: join([]string{"repository/...", "dedup/..."}, engines, outerRing)},
	{name: "auth-knows-no-http", source: "internal/auth/doc.go", pkg: "internal/auth/...", scope: both,
		allowed: []string{"internal/auth/...", "internal/clock", "internal/state/schema", "internal/failpoint"}, thirdParty: []string{"golang.org/x/crypto", "go.etcd.io/bbolt"}},
	{name: "task-knows-no-engine", source: "internal/task/doc.go", pkg: "internal/task/...", scope: both,
		allowed: []string{"internal/task/...", "internal/clock", "internal/state/schema", "internal/failpoint"}, thirdParty: []string{"go.etcd.io/bbolt"}},
	{name: "schema-leaf", source: "internal/state/schema/doc.go (auth and task import it, so it imports nothing of ours but failpoint)", pkg: "internal/state/schema/...", scope: prod,
		allowed: []string{"internal/state/schema/...", "internal/failpoint"}},
	{name: "state-below-engines", source: "internal/state/doc.go", pkg: "internal/state/...", scope: both,
		denied: join([]string{"vsphere/...", "repository/..."}, engines, outerRing)},
	{name: "internal-below-service", source: "docs/ARCHITECTURE.md (imports flow one way)", pkg: "internal/...", scope: prod,
		denied: join(services, []string{"web/...", "cmd/...", "daemon/..."})},
	// The prefix rule of the service layer: a service is reached through
	// web's interfaces and never reaches back up into HTTP, the daemon
	// that wires it, the binary or the lab.
	{name: "service-below-web", source: "service/doc.go", pkg: "service/...", scope: prod,
		denied: join(webAbove, []string{"cmd/...", "daemon/...", "vcsim-tests/..."})},
	{name: "notify-reads-interfaces", source: "service/notify/doc.go", pkg: "service/notify", scope: both,
		denied: join([]string{"vsphere/...", "repository/...", "dedup/...", "service/inventory/..."}, engines, outerRing)},
	// feed adapts the appliance's records to the notifier; it reads
	// repositories and state.db but never drives an engine or vCenter.
	{name: "notify-feed-no-engines", source: "service/notify/feed/doc.go", pkg: "service/notify/feed/...", scope: both,
		denied: join([]string{"vsphere/...", "service/inventory/...", "cmd/...", "daemon/...", "vcsim-tests/..."}, engines, webAbove)},
	{name: "guestfs-reads-readerat", source: "guestfs/doc.go (disks come in as io.ReaderAt values)", pkg: "guestfs/...", scope: both,
		denied: join([]string{"repository/...", "vsphere/...", "dedup/...", "disk/..."}, engines, services, outerRing)},
	{name: "web-no-engines", source: "web/doc.go", pkg: "web/...", scope: prod,
		denied: join([]string{"vsphere/..."}, engines, []string{"cmd/...", "daemon/...", "vcsim-tests/..."})},
	// web, its DTOs and the console are HTTP only: no engine, no state
	// file, no service package, directly or through another import.
	// internal/state itself is denied; its schema leaf (the codec auth
	// and task share) is reached through them.
	{name: "web-http-only", source: "web/doc.go (web is HTTP only)", pkg: "web", scope: prod,
		denied: join([]string{"repository/...", "internal/state", "cmd/..."}, services), exempt: webServiceFiles,
		// Pure computations web shares with the services: the VM status
		// rules and the catalog's query language.
		except: []string{"service/vmstatus", "service/filerestore/catalog"}},
	{name: "web-dto-http-only", source: "web/api/doc.go (the DTOs both sides share)", pkg: "web/api/...", scope: prod,
		denied: join([]string{"repository/...", "internal/state", "vsphere/...", "cmd/...", "daemon/..."}, engines, services)},
	{name: "web-tests-no-lab", source: "vcsim-tests/lab/doc.go (web never imports the lab)", pkg: "web/...", scope: tests,
		denied: []string{"vcsim-tests/...", "daemon/...", "cmd/..."}, never: []string{"github.com/vmware/govmomi/simulator"}},
	{name: "console-nothing", source: "web/console/doc.go", pkg: "web/console/...", scope: both,
		allowed: []string{"web/console/..."}},
	{name: "openapitest-nothing", source: "web/openapitest/openapitest.go", pkg: "web/openapitest/...", scope: both,
		allowed: []string{"web/openapitest/..."}},
	{name: "browsertest-nothing", source: "internal/browsertest/doc.go", pkg: "internal/browsertest/...", scope: both,
		allowed: []string{"internal/browsertest/..."}},
	{name: "imagebackup-engine", source: "backup/imagebackup/imagebackup.go (the CLI's image engine: no HTTP, no daemon, no lab)", pkg: "backup/imagebackup/...", scope: prod,
		denied: join([]string{"restore/...", "policy/...", "web/...", "cmd/...", "daemon/...", "vcsim-tests/..."}, services)},
	{name: "vmstatus-pure", source: "service/vmstatus/vmstatus.go (pure: callers read the inventory, jobs, points and states)", pkg: "service/vmstatus/...", scope: prod,
		allowed: []string{"service/vmstatus/...", "policy/...", "internal/clock/..."}},
	{name: "progress-nothing", source: "internal/progress/progress.go", pkg: "internal/progress/...", scope: both,
		allowed: []string{"internal/progress/..."}},
	// Instant export reads a point through repository and serves it; it
	// never drives an engine, vCenter or the scheduler (the vCenter flow
	// of issue 25 will reach vsphere through an interface it declares).
	{name: "instant-reads-repositories", source: "service/instant/doc.go", pkg: "service/instant/...", scope: prod,
		denied: join([]string{"vsphere/...", "policy/...", "dedup/...", "guestfs/...", "internal/state/...", "web/..."}, engines, []string{"cmd/...", "daemon/...", "vcsim-tests/..."})},
	{name: "instant-overlay-leaf", source: "service/instant/overlay/doc.go", pkg: "service/instant/overlay/...", scope: both,
		allowed: []string{"service/instant/overlay/...", "internal/extent"}, thirdParty: []string{}},
	{name: "instant-portmap-leaf", source: "service/instant/portmap/doc.go", pkg: "service/instant/portmap/...", scope: both,
		allowed: []string{"service/instant/portmap/..."}, thirdParty: []string{}},
	{name: "daemon-below-cmd", source: "daemon/doc.go (cmd -> daemon -> services -> web)", pkg: "daemon/...", scope: both,
		denied: []string{"cmd/..."}},
	// The daemon reaches web/api and web/console through web (transitive
	// edges), so only the lab is denied here; daemon/demo is the one
	// package that wires the lab in, for `appliance demo`.
	{name: "daemon-no-lab", source: "daemon/doc.go (the daemon never reaches the lab; daemon/demo wires it)", pkg: "daemon", scope: prod,
		denied: []string{"vcsim-tests/..."}},
}

// importerRules say who may import a package at all.
var importerRules = []importerRule{
	{name: "testutil-tests-only", source: "internal/testutil/doc.go", target: "internal/testutil/..."},
	{name: "browsertest-tests-only", source: "internal/browsertest/doc.go", target: "internal/browsertest/..."},
	{name: "openapitest-tests-only", source: "web/openapitest/openapitest.go", target: "web/openapitest/...", from: []string{"web/webtest"}},
	{name: "webtest-tests-only", source: "web/webtest/webtest.go", target: "web/webtest/..."},
	// frtest is itself test support: it builds guestfstest's images into a repository.
	{name: "guestfstest-tests-only", source: "guestfs/guestfstest/guestfstest.go", target: "guestfs/guestfstest/...", from: []string{"service/filerestore/frtest"}},
	{name: "frtest-tests-only", source: "service/filerestore/frtest/frtest.go", target: "service/filerestore/frtest/..."},
	{name: "lab-tests-and-demo-only", source: "vcsim-tests/lab/doc.go", target: "vcsim-tests/lab/...", from: []string{"cmd/appliance", "daemon/demo", "vcsim-tests/..."}},
	// daemon/demo wires the lab to the daemon for `appliance demo`: it
	// sits below cmd/appliance, its only importer, beside the daemon.
	{name: "daemon-from-cmd-only", source: "daemon/doc.go (cmd/appliance imports the daemon, not the reverse)", target: "daemon/...", from: []string{"cmd/..."}},
	{name: "demo-from-cmd-only", source: "daemon/demo/demo.go (only cmd/appliance imports it)", target: "daemon/demo/...", from: []string{"cmd/appliance"}},
	// Engines are driven from above (the services, the CLI, test support),
	// never imported by the layers they use.
	{name: "backup-imported-from-above", source: "docs/ARCHITECTURE.md (policy -> backup/restore -> vsphere, dedup, repository)", target: "backup/...",
		from: []string{"cmd/...", "daemon/...", "service/backups", "vcsim-tests/...", "service/filerestore/frtest"}},
	{name: "restore-imported-from-above", source: "docs/ARCHITECTURE.md (policy -> backup/restore -> vsphere, dedup, repository)", target: "restore/...",
		from: []string{"cmd/...", "daemon/...", "service/restores", "service/instantvm", "vcsim-tests/..."}},
	// vSphere is spoken in one package: the rest of the product sees
	// vsphere's types, never govmomi's, so a govmomi upgrade or a vCenter
	// quirk is fixed in one place (the lab, test support, drives vcsim).
	{name: "govmomi-only-vsphere-and-lab", source: "vsphere/doc.go", target: "github.com/vmware/govmomi", third: true,
		from: []string{"vsphere/...", "vcsim-tests/lab/..."}},
	// Every bbolt file has one owner package: state.db (internal/state;
	// internal/auth and internal/task, below it, keep their buckets in it
	// through their BoltStores; the services that keep records there take
	// a state.Store, which opens only their own buckets), index.db
	// (repository), the file catalog (service/filerestore/catalog).
	{name: "bbolt-owners", source: "internal/state/doc.go, internal/auth/doc.go, internal/task/doc.go, repository/doc.go, service/filerestore/catalog/catalog.go", target: "go.etcd.io/bbolt", third: true,
		from: []string{"internal/state", "internal/state/schema", "internal/auth", "internal/task", "repository", "service/filerestore/catalog"}},
}

var pairRules = []pairRule{
	// service/backups binds the scheduler's jobs (policy) to the backup
	// engine's vSphere client: it is the backup half of the bridge.
	{name: "inventory-only-bridge", source: "service/inventory/doc.go (the only package that knows both vsphere and policy)",
		a: "vsphere", b: "policy", only: []string{"service/inventory", "service/backups", "cmd/...", "daemon/..."}},
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
			if matchAny(r.except, dr) {
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
