package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
)

const minimalConfig = `
state_dir: /var/lib/vmvault
repositories:
  - name: main
    path: /srv/main
    passphrase_env: MAIN_PASS
`

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // "" = valid; else a substring naming the field
	}{
		{"minimal", minimalConfig, ""},
		{"full", `
listen: 0.0.0.0:8443
tls: {cert_file: c.pem, key_file: k.pem}
state_dir: /s
time_zone: Europe/Paris
log_level: debug
admin: {user: root, password_file: /etc/pw}
vcenter: {url: https://vc, username: svc, password_env: VC_PASS, role: operator, thumbprint: "AA:BB"}
repositories:
  - {name: a, path: /a, passphrase_file: /pa}
  - {name: b, path: /b}
limits: {max_concurrent_backups: 8, max_running_tasks: 3}
sessions: {ttl: 8h}
api: {trust_proxy: true}
`, ""},
		{"unknown top field", minimalConfig + "colour: red\n", `unknown field "colour"`},
		{"unknown nested field", minimalConfig + "tls: {cert: x}\n", `unknown field "cert"`},
		{"wrong type", minimalConfig + "limits: {max_running_tasks: many}\n", "limits.max_running_tasks: wrong type"},
		{"wrong type listen", minimalConfig + "listen: [1]\n", "listen: wrong type"},
		{"no state dir", "repositories: [{name: a, path: /a}]\n", "state_dir: required"},
		{"no repositories", "state_dir: /s\n", "repositories: at least one"},
		{"duplicate repository", "state_dir: /s\nrepositories: [{name: a, path: /a}, {name: a, path: /b}]\n", "repositories[1].name: duplicate"},
		{"repository without path", "state_dir: /s\nrepositories: [{name: a}]\n", "repositories[0].path: required"},
		{"unknown repository scheme", "state_dir: /s\nrepositories: [{name: a, path: \"sftp:host:/x\"}]\n", "repositories[0].path: repository location"},
		{"s3 repository", "state_dir: /s\nrepositories: [{name: a, path: \"s3:http://127.0.0.1:9000/bucket\"}]\n", ""},
		{"two passphrase sources", "state_dir: /s\nrepositories: [{name: a, path: /a, passphrase_file: f, passphrase_env: E}]\n", "repositories[0]: give at most one"},
		{"bad zone", minimalConfig + "time_zone: Mars/Olympus\n", "time_zone"},
		{"bad level", minimalConfig + "log_level: loud\n", "log_level"},
		{"bad listen", minimalConfig + "listen: nohost\n", "listen"},
		{"half tls", minimalConfig + "tls: {cert_file: c.pem}\n", "tls: give both"},
		{"plain http on a public address", minimalConfig + "listen: 0.0.0.0:80\ntls: {disable: true}\n", "tls.disable"},
		{"plain http on loopback", minimalConfig + "listen: 127.0.0.1:8080\ntls: {disable: true}\n", ""},
		{"vcenter without password", minimalConfig + "vcenter: {url: https://vc, username: u}\n", "vcenter: give exactly one"},
		{"vcenter bad role", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, role: god}\n", "vcenter.role"},
		{"vcenter roles", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, roles: [{user: \"VSPHERE.LOCAL\\\\alice\", role: operator}, {group: BackupAdmins, role: administrator}, {user: bob@example.com, role: restore-only}]}\n", ""},
		{"vcenter role none", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, role: none}\n", ""},
		{"vcenter rule user and group", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, roles: [{user: a, group: b, role: operator}]}\n", "vcenter.roles[0]: name exactly one of user and group"},
		{"vcenter rule neither", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, roles: [{role: operator}]}\n", "vcenter.roles[0]: name exactly one"},
		{"vcenter rule bad role", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, roles: [{group: g, role: root}]}\n", "vcenter.roles[0].role"},
		{"vcenter rule no role", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, roles: [{group: g}]}\n", "vcenter.roles[0].role"},
		{"vcenter rule twice", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, roles: [{group: Admins, role: operator}, {group: admins, role: administrator}]}\n", "vcenter.roles[1].group: group \"admins\" is mapped twice"},
		{"vcenter rule bad name", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, roles: [{user: \" alice\", role: operator}]}\n", "vcenter.roles[0].user"},
		{"vcenter rule unknown field", minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, roles: [{users: a, role: operator}]}\n", `unknown field "users"`},
		{"bad ttl", minimalConfig + "sessions: {ttl: forever}\n", "sessions.ttl"},
		{"approvals delay", minimalConfig + "approvals: {delay: 24h}\n", ""},
		{"approvals no delay", minimalConfig + "approvals: {delay: \"0\"}\n", ""},
		{"approvals bad delay", minimalConfig + "approvals: {delay: tomorrow}\n", "approvals.delay"},
		{"approvals negative delay", minimalConfig + "approvals: {delay: -1h}\n", "approvals.delay"},
		{"approvals delay too long", minimalConfig + "approvals: {delay: 1000h}\n", "approvals.delay"},
		{"instant", minimalConfig + "instant: {listen: ':2049', advertise: 10.0.0.5, allow: [10.0.0.0/24]}\n", ""},
		{"instant no allow list", minimalConfig + "instant: {listen: ':2049', advertise: 10.0.0.5}\n", "instant.allow"},
		{"instant bad allow", minimalConfig + "instant: {listen: ':2049', advertise: 10.0.0.5, allow: [everyone]}\n", "instant.allow"},
		{"instant no advertise", minimalConfig + "instant: {listen: ':2049', allow: [10.0.0.0/24]}\n", "instant.advertise"},
		{"instant bad listen", minimalConfig + "instant: {listen: '2049', advertise: 10.0.0.5, allow: [10.0.0.0/24]}\n", "instant.listen"},
		{"instant bad portmap", minimalConfig + "instant: {listen: ':2049', portmap: yes, advertise: 10.0.0.5, allow: [10.0.0.0/24]}\n", "instant.portmap"},
		{"limits too high", minimalConfig + "limits: {max_concurrent_backups: 1000}\n", "limits.max_concurrent_backups"},
		{"maintenance window", minimalConfig + "time_zone: Europe/Paris\nmaintenance: {window: {days: {saturday: [\"01:00-07:00\"]}}, full_check_days: 14}\n", ""},
		{"bad maintenance window", minimalConfig + "maintenance: {window: {days: {funday: [\"01:00-07:00\"]}}}\n", "maintenance.window"},
		{"bad maintenance range", minimalConfig + "maintenance: {window: {days: {monday: [\"25:00-26:00\"]}}}\n", "maintenance.window"},
		{"smtp full", minimalConfig + "smtp: {host: smtp.example.com, port: 587, tls: starttls, ca_file: /etc/ca.pem, username: vmvault, password_file: /etc/vmvault/smtp.pass, from: \"vmvault <vmvault@example.com>\", to: [ops@example.com, b@example.com], daily_report_at: \"06:30\", alerts: false}\n", ""},
		{"smtp minimal relay", minimalConfig + "smtp: {host: localhost, tls: none, from: v@example.com, to: [ops@example.com]}\n", ""},
		{"smtp daily report off", minimalConfig + "smtp: {host: mx.example.com, tls: implicit, username: u, password_env: SMTP_PASS, from: v@example.com, to: [o@example.com], daily_report_at: \"off\"}\n", ""},
		{"smtp no host", minimalConfig + "smtp: {from: v@example.com, to: [o@example.com]}\n", "smtp.host: required"},
		{"smtp host with port", minimalConfig + "smtp: {host: \"mx.example.com:25\", from: v@example.com, to: [o@example.com]}\n", "smtp.host"},
		{"smtp bad tls", minimalConfig + "smtp: {host: mx, tls: ssl, from: v@example.com, to: [o@example.com]}\n", "smtp.tls"},
		{"smtp plain to a remote host", minimalConfig + "smtp: {host: mx.example.com, tls: none, from: v@example.com, to: [o@example.com]}\n", "smtp.tls: none only for a loopback host"},
		{"smtp bad port", minimalConfig + "smtp: {host: mx, port: 99999, from: v@example.com, to: [o@example.com]}\n", "smtp.port"},
		{"smtp port wrong type", minimalConfig + "smtp: {host: mx, port: submission, from: v@example.com, to: [o@example.com]}\n", "smtp.port: wrong type"},
		{"smtp two password sources", minimalConfig + "smtp: {host: mx, username: u, password_file: f, password_env: E, from: v@example.com, to: [o@example.com]}\n", "smtp: give at most one"},
		{"smtp user without password", minimalConfig + "smtp: {host: mx, username: u, from: v@example.com, to: [o@example.com]}\n", "smtp: username needs"},
		{"smtp password without user", minimalConfig + "smtp: {host: mx, password_env: E, from: v@example.com, to: [o@example.com]}\n", "smtp.username: required"},
		{"smtp no from", minimalConfig + "smtp: {host: mx, to: [o@example.com]}\n", "smtp.from: required"},
		{"smtp bad from", minimalConfig + "smtp: {host: mx, from: nobody, to: [o@example.com]}\n", "smtp.from"},
		{"smtp no recipients", minimalConfig + "smtp: {host: mx, from: v@example.com}\n", "smtp.to: at least one"},
		{"smtp bad recipient", minimalConfig + "smtp: {host: mx, from: v@example.com, to: [o@example.com, \"not mail\"]}\n", "smtp.to[1]"},
		{"smtp to not a list", minimalConfig + "smtp: {host: mx, from: v@example.com, to: o@example.com}\n", "smtp.to: wrong type"},
		{"smtp bad daily time", minimalConfig + "smtp: {host: mx, from: v@example.com, to: [o@example.com], daily_report_at: \"7am\"}\n", "smtp.daily_report_at"},
		{"smtp daily time out of range", minimalConfig + "smtp: {host: mx, from: v@example.com, to: [o@example.com], daily_report_at: \"24:00\"}\n", "smtp.daily_report_at"},
		{"smtp unknown field", minimalConfig + "smtp: {host: mx, from: v@example.com, to: [o@example.com], password: hunter2}\n", `unknown field "password"`},
		{"smtp alerts wrong type", minimalConfig + "smtp: {host: mx, from: v@example.com, to: [o@example.com], alerts: sometimes}\n", "smtp.alerts: wrong type"},
		{"empty", "", "empty configuration"},
		{"not a mapping", "- a\n- b\n", "mapping"},
		{"bad yaml", "state_dir: [\n", "parse YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if tc.want == "" && (cfg.Listen == "" || cfg.LogLevel == "" || cfg.Admin.User == "") {
				t.Fatalf("defaults not applied: %+v", cfg)
			}
			if tc.want == "" && cfg.Maintenance.Window != nil && cfg.Maintenance.Window.Location.String() != "Europe/Paris" {
				t.Fatalf("maintenance window location %v, want the appliance time zone", cfg.Maintenance.Window.Location)
			}
		})
	}
}

// vcenter.role defaults to no role at all (it was administrator): only the
// users and groups of vcenter.roles log in with vCenter credentials.
func TestConfigVCenterRoleDefault(t *testing.T) {
	cfg, err := ParseConfig([]byte(minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.VCenter.authRole(); r != "" {
		t.Fatalf("default vCenter role %q, want none", r)
	}
	cfg, err = ParseConfig([]byte(minimalConfig + "vcenter: {url: https://vc, username: u, password_env: P, role: none, roles: [{user: \"VSPHERE.LOCAL\\\\alice\", role: operator}, {group: BackupAdmins, role: administrator}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []auth.VCenterRule{{User: `VSPHERE.LOCAL\alice`, Role: auth.RoleOperator}, {Group: "BackupAdmins", Role: auth.RoleAdministrator}}
	if r := cfg.VCenter.authRole(); r != "" || !reflect.DeepEqual(cfg.VCenter.authRules(), want) {
		t.Fatalf("role %q rules %+v", r, cfg.VCenter.authRules())
	}
}

func TestConfigRelativePaths(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "vmvault.yaml")
	if err := os.WriteFile(p, []byte("state_dir: state\nrepositories: [{name: a, path: repo, passphrase_file: pass}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir != filepath.Join(dir, "state") || cfg.Repositories[0].PassphraseFile != filepath.Join(dir, "pass") {
		t.Fatalf("paths %+v", cfg)
	}
	// A remote location is not a relative path: it is kept as written
	// (it used to become DIR/s3:http:/…, a local directory).
	if err := os.WriteFile(p, []byte("state_dir: state\nrepositories: [{name: a, path: \"s3:http://127.0.0.1:9000/bucket/p\"}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err = LoadConfig(p); err != nil || cfg.Repositories[0].Path != "s3:http://127.0.0.1:9000/bucket/p" {
		t.Fatalf("s3 location: %v %+v", err, cfg)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("missing file accepted")
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(minimalConfig))
	f.Add([]byte("state_dir: /s\nrepositories: [{name: a, path: /a}]\nlimits: {max_running_tasks: 1}\n"))
	f.Add([]byte("{a: &x [*x]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseConfig(b) // must not panic
	})
}
