package main

import (
	"bytes"
	"crypto/tls"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// backupEnv is the environment of a backup command against l.
func backupEnv(url, user, password string) map[string]string {
	return map[string]string{"VMVAULT_PASSWORD": testPassword, "VMVAULT_VCENTER_URL": url,
		"VMVAULT_VCENTER_USERNAME": user, "VMVAULT_VCENTER_PASSWORD": password}
}

func randBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// restored restores disk 0 of a point to a file and returns its bytes.
func restored(t *testing.T, repo, point string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "disk.img")
	mustCLI(t, "image restore", "--repo", repo, "--restore-point", point, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBackupCommand: two VMs backed up, JSON and text output, the points
// restore to the disks' bytes, the second run is incremental, a missing VM
// fails on its own with exit 1, usage errors exit 2.
func TestBackupCommand(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	repo := initRepo(t)
	env := backupEnv(l.URL().String(), l.Username(), l.Password())
	vc := []string{"--thumbprint", l.Thumbprint(), "--appliance-id", "cli-test"}
	vms := []string{"DC0_H0_VM0", "DC0_C0_RP0_VM1"}
	for i, vm := range vms {
		if err := l.WriteDisk(vm, 0, int64(i)<<20, randBytes(uint64(i), 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"backup", "--repo", repo, "--vm", vms[0], "--vm", vms[1], "--json", "--unsafe-no-fsync"}, vc...)
	r := runCLIEnv(t, env, args...)
	if r.code != 0 {
		t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	got := decodeJSON[[]backupJSON](t, r.stdout)
	if len(got) != 2 {
		t.Fatalf("JSON has %d entries", len(got))
	}
	for i, j := range got {
		if j.VM != vms[i] || j.RestorePoint == "" || j.Mode != "allocated" || j.Consistency != "filesystem" || j.BytesRead == 0 || j.Warnings == nil {
			t.Errorf("entry %d = %+v", i, j)
		}
		want, err := l.ReadDisk(vms[i], 0, 0, 4<<20)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(restored(t, repo, j.RestorePoint), want) {
			t.Errorf("%s: restored disk differs", vms[i])
		}
	}

	// Text output, incremental, progress on stderr.
	if err := l.WriteDisk(vms[0], 0, 3<<20, []byte("changed")); err != nil {
		t.Fatal(err)
	}
	r = runCLIEnv(t, env, append([]string{"backup", "--repo", repo, "--vm", vms[0], "--progress", "--quiesce", "off"}, vc...)...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, vms[0]+" ") || !strings.Contains(r.stdout, " incremental crash") || !strings.Contains(r.stderr, "done") {
		t.Fatalf("incremental: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	id := strings.Fields(r.stdout)[1]
	want, _ := l.ReadDisk(vms[0], 0, 0, 4<<20)
	if !bytes.Equal(restored(t, repo, id), want) {
		t.Error("incremental restores differently")
	}

	// One VM missing: the other is still backed up, exit 1, reason per VM.
	r = runCLIEnv(t, env, append([]string{"backup", "--repo", repo, "--vm", "nosuch", "--vm", vms[1]}, vc...)...)
	if r.code != 1 || !strings.Contains(r.stdout, "nosuch FAILED: ") || !strings.Contains(r.stdout, vms[1]+" ") || !strings.Contains(r.stderr, "1 of 2 VMs failed") {
		t.Errorf("missing VM: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}

	// --all-in a cluster: its VMs only.
	r = runCLIEnv(t, env, append([]string{"backup", "--repo", repo, "--all-in", "/DC0/host/DC0_C0", "--json"}, vc...)...)
	if r.code != 0 {
		t.Fatalf("--all-in: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	all := decodeJSON[[]backupJSON](t, r.stdout)
	names := map[string]bool{}
	for _, j := range all {
		names[j.VM] = true
	}
	if len(all) != 2 || !names["DC0_C0_RP0_VM0"] || !names["DC0_C0_RP0_VM1"] {
		t.Errorf("--all-in cluster backed up %v", names)
	}
	if snaps, _ := l.Snapshots(vms[0]); len(snaps) != 0 {
		t.Errorf("snapshots left: %v", snaps)
	}

	usage := [][]string{
		{"backup", "--repo", repo},
		{"backup", "--repo", repo, "--vm", "x", "--quiesce", "sometimes"},
		{"backup", "--repo", repo, "--vm", "x", "--quiesce-level", "deep"},
		{"backup", "--repo", repo, "--vm", "x", "--vss-type", "log"},
		{"backup", "--repo", repo, "--vm", "x", "--quiesce-level", "filesystem", "--vss-type", "full"},
		{"backup", "--repo", repo, "--vm", "x", "--parallel", "0"},
		{"backup", "--vm", "x"},
		{"backup", "--repo", repo, "extra"},
	}
	for _, a := range usage {
		if r := runCLIEnv(t, env, a...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", a, r.code, r.stderr)
		}
	}
}

// TestBackupPlainVcsim: vcsim without the lab has no CBT at all
// (QueryChangedDiskAreas is not implemented, change ids stay empty): every
// backup reads the whole disk and is still exact.
func TestBackupPlainVcsim(t *testing.T) {
	m := simulator.VPX()
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Remove)
	const size = 2 << 20
	var flat string
	for _, e := range m.Map().All("VirtualMachine") {
		vm := e.(*simulator.VirtualMachine)
		if vm.Name != "DC0_H0_VM0" {
			continue
		}
		vd := object.VirtualDeviceList(vm.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil))[0].(*types.VirtualDisk)
		vd.CapacityInBytes, vd.CapacityInKB = size, size/1024
		var dp object.DatastorePath
		dp.FromString(vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo).FileName)
		for _, d := range m.Map().All("Datastore") {
			if ds := d.(*simulator.Datastore); ds.Name == dp.Datastore {
				flat = filepath.Join(ds.Summary.Url, strings.TrimSuffix(dp.Path, ".vmdk")+"-flat.vmdk")
			}
		}
	}
	data := randBytes(7, size)
	copy(data[size/2:], make([]byte, size/4))
	if err := os.WriteFile(flat, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m.Service.TLS = new(tls.Config)
	s := m.Service.NewServer()
	t.Cleanup(s.Close)
	repo := initRepo(t)
	env := backupEnv(s.URL.String(), "user", "pass")
	env["VMVAULT_VCENTER_INSECURE"] = "1"
	for run := 0; run < 2; run++ {
		r := runCLIEnv(t, env, "backup", "--repo", repo, "--vm", "DC0_H0_VM0", "--json")
		if r.code != 0 {
			t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		j := decodeJSON[[]backupJSON](t, r.stdout)[0]
		if j.Mode != "full" || j.BytesRead != size {
			t.Errorf("run %d: mode %s read %d, want a full read of %d bytes (%q)", run, j.Mode, j.BytesRead, size, j.Warnings)
		}
		if !bytes.Equal(restored(t, repo, j.RestorePoint), data) {
			t.Fatalf("run %d: restored disk differs", run)
		}
		data[run*4096] ^= 0xff
		if err := os.WriteFile(flat, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
