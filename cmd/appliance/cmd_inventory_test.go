package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

func startTestLab(t *testing.T) *lab.Lab {
	t.Helper()
	l := labtest.Start(t, lab.Options{})
	return l
}

func TestInventoryCommand(t *testing.T) {
	l := startTestLab(t)
	pwFile := filepath.Join(t.TempDir(), "vc-password")
	if err := os.WriteFile(pwFile, []byte(l.Password()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err := l.CAFile()
	if err != nil {
		t.Fatal(err)
	}
	envVars := map[string]string{
		"VMVAULT_VCENTER_URL": l.URL().String(), "VMVAULT_VCENTER_USERNAME": l.Username(),
		"VMVAULT_VCENTER_PASSWORD": l.Password(), "VMVAULT_VCENTER_INSECURE": "1",
	}
	flags := []string{"--vcenter", l.URL().String(), "--username", l.Username(), "--password-file", pwFile}
	cases := []struct {
		name     string
		env      map[string]string
		args     []string
		code     int
		contains []string
	}{
		{"flags with thumbprint, text", nil, append(append([]string{"inventory"}, flags...), "--thumbprint", l.Thumbprint()), 0,
			[]string{"4 VMs", "DC0_C0_RP0_VM0", "/DC0/vm/DC0_H0_VM1", "LocalDS_0", "poweredOn"}},
		{"flags with CA file", nil, append(append([]string{"inventory"}, flags...), "--ca-file", ca), 0, []string{"4 VMs"}},
		{"environment only, insecure", envVars, []string{"inventory"}, 0, []string{"4 VMs"}},
		{"untrusted certificate", nil, append([]string{"inventory"}, flags...), 1, []string{"certificate"}},
		{"wrong password", map[string]string{"VMVAULT_VCENTER_PASSWORD": "wrong", "VMVAULT_VCENTER_INSECURE": "1"},
			[]string{"inventory", "--vcenter", l.URL().String(), "--username", l.Username()}, 1, []string{"login failed"}},
		{"no URL", nil, []string{"inventory"}, 2, []string{"--vcenter"}},
		{"no password", nil, []string{"inventory", "--vcenter", l.URL().String(), "--username", "u"}, 2, []string{"password"}},
		{"insecure and pin", nil, append(append([]string{"inventory"}, flags...), "--insecure", "--thumbprint", "AA"), 2, []string{"contradicts"}},
		{"password is not a flag", nil, []string{"inventory", "--password", "x"}, 2, []string{"flag provided but not defined"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env == nil {
				tc.env = map[string]string{}
			}
			r := runCLIEnv(t, tc.env, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, s := range tc.contains {
				if !strings.Contains(r.stdout+r.stderr, s) {
					t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", s, r.stdout, r.stderr)
				}
			}
			if strings.Contains(r.stdout+r.stderr, l.Password()) {
				t.Error("the password appears in the output")
			}
		})
	}

	r := runCLIEnv(t, envVars, "inventory", "--json")
	if r.code != 0 {
		t.Fatalf("--json: exit %d: %s", r.code, r.stderr)
	}
	var inv vsphere.Inventory
	if err := json.Unmarshal([]byte(r.stdout), &inv); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, r.stdout)
	}
	if len(inv.VMs) != 4 || len(inv.VMs[0].Disks) != 1 || inv.VMs[0].Disks[0].CapacityBytes != l.Options().DiskCapacity {
		t.Errorf("JSON inventory = %+v", inv.VMs)
	}
}
