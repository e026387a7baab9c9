package archtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportRules checks every layering rule against the module as it is,
// non-test and test builds.
func TestImportRules(t *testing.T) {
	g := loadGraph(t, moduleRoot(t))
	var prodN, testN int
	for _, p := range g {
		if p.Test {
			testN++
		} else {
			prodN++
		}
	}
	if prodN < 20 || testN < 10 {
		t.Fatalf("go list found %d packages and %d test builds; the rule check would prove nothing", prodN, testN)
	}
	for _, v := range allViolations(g) {
		t.Errorf("%s (stated in %s)", v, ruleSource(v.rule))
	}
}

// TestLoaderSeesTestImports runs the loader and the rules on a planted
// module in a temporary directory: an external test package of backup that
// imports the lab, a web file importing internal/state, and dedup's
// internal test importing repository are all reported.
func TestLoaderSeesTestImports(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                  "module " + module + "\n\ngo 1.22\n",
		"vcsim-tests/lab/lab.go":  "package lab\n",
		"repository/repo.go":      "package repository\n",
		"internal/state/state.go": "package state\n",
		"backup/backup.go":        "package backup\n",
		"backup/backup_test.go":   "package backup_test\n\nimport _ \"" + module + "/vcsim-tests/lab\"\n",
		"dedup/dedup.go":          "package dedup\n",
		"dedup/dedup_test.go":     "package dedup\n\nimport _ \"" + module + "/repository\"\n",
		"web/server.go":           "package web\n",
		"web/jobs.go":             "package web\n\nimport _ \"" + module + "/internal/state\"\n",
	}
	for name, src := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, v := range allViolations(loadGraph(t, root)) {
		got = append(got, v.String())
	}
	for _, want := range []string{
		"backup-unit-tests-fake: backup (tests) -> vcsim-tests/lab",
		"dedup-pure: dedup (tests) -> repository",
		"web-http-only: web -> internal/state",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in:\n\t%s", want, strings.Join(got, "\n\t"))
		}
	}
}

// synthetic graph builders: paths are module-relative unless their first
// element has a dot (third party) or they start with "std:".
func full(p string) string {
	if s, ok := strings.CutPrefix(p, "std:"); ok {
		return s
	}
	first, _, _ := strings.Cut(p, "/")
	if strings.Contains(first, ".") {
		return p
	}
	return module + "/" + p
}

func fulls(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = full(p)
	}
	return out
}

// lib is a non-test package with one file (dir/x.go) importing imports;
// its deps are its imports (enough for a synthetic graph).
func lib(path string, imports ...string) pkg {
	return pkg{Path: full(path), Imports: fulls(imports), Deps: fulls(imports), Files: map[string][]string{path + "/x.go": fulls(imports)}}
}

// libFiles is a non-test package whose files import what files says.
func libFiles(path string, files map[string][]string) pkg {
	p := pkg{Path: full(path), Files: map[string][]string{}}
	for f, imps := range files {
		p.Files[f] = fulls(imps)
		p.Imports = append(p.Imports, fulls(imps)...)
		p.Deps = append(p.Deps, fulls(imps)...)
	}
	return p
}

// testOf is the test build of path.
func testOf(path string, deps ...string) pkg {
	return pkg{Path: full(path), Test: true, Imports: fulls(deps), Deps: fulls(deps)}
}

// webToday is web as it is while the exempted files still exist.
func webToday() pkg {
	files := map[string][]string{"web/server.go": {"internal/auth", "policy"}}
	for f := range webServiceFiles {
		files[f] = []string{"repository"}
	}
	return libFiles("web", files)
}

// plantedCases holds, for every rule, a graph that breaks it once and the
// violation it must produce.
var plantedCases = []struct {
	rule  string
	graph graph
	want  string
}{
	{"dedup-pure", graph{lib("dedup", "repository")}, "dedup -> repository"},
	{"dedup-pure", graph{testOf("dedup", "github.com/klauspost/compress/zstd")}, "dedup (tests) imports github.com/klauspost/compress/zstd"},
	{"disk-pure", graph{lib("disk/vmdk", "std:net/http")}, "disk/vmdk -> net"},
	{"disk-pure", graph{lib("disk/imagefile", "disk/vmdk", "repository")}, "disk/imagefile -> repository"},
	{"disk-tests-no-vcsim", graph{testOf("disk/vmdk", "github.com/vmware/govmomi/simulator")}, "disk/vmdk (tests) -> github.com/vmware/govmomi/simulator"},
	{"vmconfig-nothing", graph{lib("vmconfig", "vsphere")}, "vmconfig -> vsphere"},
	{"clock-stdlib-only", graph{lib("internal/clock", "github.com/benbjohnson/clock")}, "internal/clock imports github.com/benbjohnson/clock"},
	{"failpoint-nothing", graph{lib("internal/failpoint", "internal/clock")}, "internal/failpoint -> internal/clock"},
	{"repository-own", graph{lib("repository/pack", "vsphere")}, "repository/pack -> vsphere"},
	{"storage-only-failpoint", graph{lib("repository/storage", "repository")}, "repository/storage -> repository"},
	{"storage-only-failpoint", graph{lib("repository/storage", "internal/ratelimit")}, "repository/storage -> internal/ratelimit"},
	{"ratelimit-leaf", graph{lib("internal/ratelimit", "policy")}, "internal/ratelimit -> policy"},
	{"vsphere-below-engines", graph{lib("vsphere", "repository")}, "vsphere -> repository"},
	{"policy-no-engines", graph{testOf("policy", "vsphere")}, "policy (tests) -> vsphere"},
	{"backup-layer", graph{lib("backup", "restore")}, "backup -> restore"},
	{"backup-unit-tests-fake", graph{testOf("backup", "vcsim-tests/lab")}, "backup (tests) -> vcsim-tests/lab"},
	{"backup-unit-tests-fake", graph{testOf("backup", "github.com/vmware/govmomi/simulator")}, "backup (tests) -> github.com/vmware/govmomi/simulator"},
	{"restore-layer", graph{lib("restore", "backup")}, "restore -> backup"},
	{"inventory-adapter-only", graph{lib("service/inventory", "repository")}, "service/inventory -> repository"},
	{"auth-knows-no-http", graph{lib("internal/auth", "web")}, "internal/auth -> web"},
	{"auth-knows-no-http", graph{lib("internal/auth", "github.com/gin-gonic/gin")}, "internal/auth imports github.com/gin-gonic/gin"},
	{"task-knows-no-engine", graph{lib("internal/task", "policy")}, "internal/task -> policy"},
	{"state-below-engines", graph{lib("internal/state", "repository")}, "internal/state -> repository"},
	{"internal-below-service", graph{lib("internal/cache", "web")}, "internal/cache -> web"},
	{"notify-reads-interfaces", graph{lib("service/notify", "backup")}, "service/notify -> backup"},
	{"notify-reads-interfaces", graph{lib("service/notify", "service/inventory")}, "service/notify -> service/inventory"},
	{"notify-feed-no-engines", graph{lib("service/notify/feed", "backup")}, "service/notify/feed -> backup"},
	{"guestfs-reads-readerat", graph{lib("guestfs/ext4", "repository")}, "guestfs/ext4 -> repository"},
	{"guestfs-reads-readerat", graph{lib("guestfs", "service/filerestore/catalog")}, "guestfs -> service/filerestore/catalog"},
	{"service-below-web", graph{lib("service/filerestore", "web")}, "service/filerestore -> web"},
	{"service-below-web", graph{lib("service/repos/repostest", "daemon")}, "service/repos/repostest -> daemon"},
	{"web-dto-http-only", graph{lib("web/api", "service/repos")}, "web/api -> service/repos"},
	// A service that web must reach through its interfaces, not an import.
	{"web-http-only", graph{lib("web", "service/settings")}, "web -> service/settings"},
	{"web-no-engines", graph{lib("web", "restore")}, "web -> restore"},
	// A file not on the list that imports internal/state fails...
	{"web-http-only", graph{webToday(), libFiles("web", map[string][]string{"web/jobs.go": {"internal/state"}})}, "web -> internal/state"},
	// ...and so does one that reaches repository through another package.
	{"web-http-only", graph{webToday(), libFiles("web", map[string][]string{"web/files.go": {"repository"}})}, "web -> repository"},
	// An exempted file that no longer imports them must leave the list.
	{"web-tests-no-lab", graph{testOf("web", "vcsim-tests/lab")}, "web (tests) -> vcsim-tests/lab"},
	{"console-nothing", graph{lib("web/console", "web")}, "web/console -> web"},
	{"openapitest-nothing", graph{lib("web/openapitest", "web")}, "web/openapitest -> web"},
	{"browsertest-nothing", graph{lib("internal/browsertest", "internal/testutil")}, "internal/browsertest -> internal/testutil"},
	{"daemon-below-cmd", graph{testOf("daemon", "cmd/appliance")}, "daemon (tests) -> cmd/appliance"},
	{"daemon-no-lab", graph{lib("daemon", "vcsim-tests/lab")}, "daemon -> vcsim-tests/lab"},
	{"imagebackup-engine", graph{lib("backup/imagebackup", "service/repos")}, "backup/imagebackup -> service/repos"},
	{"extent-leaf", graph{lib("internal/extent", "policy")}, "internal/extent -> policy"},
	{"schema-leaf", graph{lib("internal/state/schema", "policy")}, "internal/state/schema -> policy"},
	{"webtest-tests-only", graph{lib("daemon", "web/webtest")}, "daemon (daemon/x.go) imports github.com/vmvault/vmvault/web/webtest"},
	{"vmstatus-pure", graph{lib("service/vmstatus", "repository")}, "service/vmstatus -> repository"},
	{"progress-nothing", graph{lib("internal/progress", "internal/clock")}, "internal/progress -> internal/clock"},
	{"testutil-tests-only", graph{lib("backup", "internal/testutil")}, "backup (backup/x.go) imports " + module + "/internal/testutil"},
	{"browsertest-tests-only", graph{lib("web", "internal/browsertest")}, "web (web/x.go) imports"},
	{"openapitest-tests-only", graph{lib("daemon", "web/openapitest")}, "daemon (daemon/x.go) imports"},
	{"guestfstest-tests-only", graph{lib("service/filerestore", "guestfs/guestfstest")}, "service/filerestore (service/filerestore/x.go) imports"},
	{"frtest-tests-only", graph{lib("web", "service/filerestore/frtest")}, "web (web/x.go) imports"},
	{"lab-tests-and-demo-only", graph{lib("daemon", "vcsim-tests/lab")}, "daemon (daemon/x.go) imports"},
	{"lab-tests-and-demo-only", graph{lib("service/repos", "vcsim-tests/lab")}, "service/repos (service/repos/x.go) imports"},
	{"demo-from-cmd-only", graph{lib("daemon", "daemon/demo")}, "daemon (daemon/x.go) imports " + module + "/daemon/demo"},
	{"daemon-from-cmd-only", graph{lib("service/backups", "daemon")}, "service/backups (service/backups/x.go) imports " + module + "/daemon"},
	{"daemon-from-cmd-only", graph{lib("web", "daemon")}, "web (web/x.go) imports " + module + "/daemon"},
	{"backup-imported-from-above", graph{lib("policy", "backup")}, "policy (policy/x.go) imports"},
	{"restore-imported-from-above", graph{lib("service/filerestore", "restore")}, "service/filerestore (service/filerestore/x.go) imports"},
	{"backup-imported-from-above", graph{lib("service/restores", "backup")}, "service/restores (service/restores/x.go) imports"},
	{"bbolt-owners", graph{lib("service/notify", "go.etcd.io/bbolt")}, "service/notify (service/notify/x.go) imports go.etcd.io/bbolt"},
	// The services that keep records in state.db take a state.Store, not the file.
	{"bbolt-owners", graph{lib("service/settings", "go.etcd.io/bbolt")}, "service/settings (service/settings/x.go) imports go.etcd.io/bbolt"},
	{"bbolt-owners", graph{lib("service/approval", "go.etcd.io/bbolt")}, "service/approval (service/approval/x.go) imports go.etcd.io/bbolt"},
	{"bbolt-owners", graph{libFiles("daemon", map[string][]string{"daemon/daemon.go": {"go.etcd.io/bbolt/errors"}})}, "daemon (daemon/daemon.go) imports go.etcd.io/bbolt/errors"},
	{"govmomi-only-vsphere-and-lab", graph{lib("service/inventory", "github.com/vmware/govmomi/vim25")}, "service/inventory (service/inventory/x.go) imports github.com/vmware/govmomi/vim25"},
	{"govmomi-only-vsphere-and-lab", graph{lib("cmd/appliance", "github.com/vmware/govmomi")}, "cmd/appliance (cmd/appliance/x.go) imports github.com/vmware/govmomi"},
	{"inventory-only-bridge", graph{lib("backup", "vsphere", "policy")}, "backup imports both vsphere and policy"},
	{"instant-reads-repositories", graph{lib("service/instant", "backup")}, "service/instant -> backup"},
	{"instant-reads-repositories", graph{lib("service/instant", "vsphere")}, "service/instant -> vsphere"},
	{"instant-overlay-leaf", graph{lib("service/instant/overlay", "repository")}, "service/instant/overlay -> repository"},
	{"instant-portmap-leaf", graph{testOf("service/instant/portmap", "github.com/willscott/go-nfs")}, "service/instant/portmap (tests) imports github.com/willscott/go-nfs"},
}

// TestRulesCatchPlantedViolations proves no rule is vacuous: each planted
// graph breaks its rule, and the checker says so.
func TestRulesCatchPlantedViolations(t *testing.T) {
	for _, c := range plantedCases {
		t.Run(c.rule, func(t *testing.T) {
			var got []violation
			for _, v := range allViolations(c.graph) {
				if v.rule == c.rule {
					got = append(got, v)
				}
			}
			for _, v := range got {
				if strings.Contains(v.msg, c.want) {
					return
				}
			}
			t.Errorf("planted violation not reported: want %q among %s", c.want, describe(got))
		})
	}
}

// An importer rule's exemption that no longer applies fails too, so the
// lists only shrink (bbolt-owners has none left; this rule is planted).
func TestStaleImporterExemptionFails(t *testing.T) {
	r := importerRule{name: "planted", target: "go.etcd.io/bbolt", third: true, from: []string{"internal/state"},
		exempt: map[string]string{"service/settings/bolt.go": "planted"}}
	vs := r.check(graph{lib("service/settings", "policy")})
	if len(vs) != 1 || !strings.Contains(vs[0].msg, "service/settings/bolt.go is exempted but no longer imports go.etcd.io/bbolt") {
		t.Fatalf("stale exemption: %s", describe(vs))
	}
	if vs := r.check(graph{libFiles("service/settings", map[string][]string{"service/settings/bolt.go": {"go.etcd.io/bbolt"}})}); len(vs) != 0 {
		t.Fatalf("used exemption: %s", describe(vs))
	}
}

// TestEveryRuleIsPlanted: a rule added without a planted violation could be
// vacuous (a pattern that matches nothing), so the table must cover it.
func TestEveryRuleIsPlanted(t *testing.T) {
	planted := map[string]bool{}
	for _, c := range plantedCases {
		planted[c.rule] = true
	}
	seen := map[string]bool{}
	for _, n := range ruleNames() {
		if seen[n] {
			t.Errorf("rule name %q used twice", n)
		}
		seen[n] = true
		if !planted[n] {
			t.Errorf("rule %q has no planted violation in plantedCases", n)
		}
	}
}

// TestCleanGraphPasses: a graph laid out as the docs say breaks nothing,
// so the rules are not so broad that they fail everywhere.
func TestCleanGraphPasses(t *testing.T) {
	g := graph{
		lib("dedup", "github.com/restic/chunker", "golang.org/x/sync/errgroup"),
		lib("disk/vmdk"), lib("disk/imagefile", "disk/vmdk"), lib("vmconfig"),
		lib("internal/clock"), lib("internal/failpoint"),
		lib("repository/storage", "internal/failpoint"),
		lib("repository", "repository/storage", "internal/failpoint", "go.etcd.io/bbolt"),
		lib("vsphere", "disk/vmdk", "github.com/vmware/govmomi/vim25"), lib("policy", "internal/clock"),
		lib("service/inventory", "vsphere", "policy"),
		lib("service/topology", "vsphere", "service/inventory", "web/api", "internal/cache"),
		lib("backup", "vsphere", "dedup", "repository", "vmconfig"),
		lib("restore", "vsphere", "repository", "vmconfig", "disk/vmdk"),
		lib("internal/auth", "internal/clock", "golang.org/x/crypto/argon2", "go.etcd.io/bbolt"),
		lib("internal/task", "internal/clock", "go.etcd.io/bbolt"),
		lib("internal/state", "policy", "internal/clock", "go.etcd.io/bbolt"),
		lib("service/notify", "policy", "internal/clock"),
		lib("service/notify/feed", "service/notify", "repository", "internal/state", "service/repos", "web/api"),
		lib("guestfs", "guestfs/ext4"), lib("service/filerestore", "guestfs", "repository", "service/filerestore/catalog"),
		lib("service/backups", "backup", "vsphere", "policy", "web/api", "service/repos"),
		lib("service/restores", "restore", "repository", "web/api"),
		lib("service/vmstatus", "policy"),
		lib("service/settings", "internal/state", "internal/state/schema", "web/api"),
		lib("service/copyjob", "internal/state", "internal/state/schema", "repository", "web/api"),
		lib("service/approval", "internal/state", "internal/state/schema", "web/api"),
		webToday(), lib("web/console"), lib("web/api", "policy"),
		lib("web", "web/api", "service/vmstatus", "service/filerestore/catalog"),
		libFiles("cmd/appliance", map[string][]string{"cmd/appliance/main.go": {"daemon", "daemon/demo", "vcsim-tests/lab"}}),
		lib("daemon/demo", "daemon", "vcsim-tests/lab", "service/repos", "policy"), // the demo wires the lab to the daemon
		lib("vcsim-tests/lab", "github.com/vmware/govmomi/simulator"),
		lib("daemon", "web", "backup", "restore", "service/inventory", "service/backups", "policy", "vsphere"),
		testOf("backup", "internal/testutil", "repository"),
		testOf("web", "web/openapitest", "service/filerestore/frtest"),
		testOf("daemon", "web/openapitest", "vcsim-tests/lab"),
	}
	if vs := allViolations(g); len(vs) != 0 {
		t.Errorf("a graph that keeps the rules fails:%s", describe(vs))
	}
}
