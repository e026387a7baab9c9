package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// TestRestoreCommands: a lab VM backed up with `backup` comes back through
// `restore` (new VM, rehearsal), `restore-disk` (VMDK file, attach) and
// `rehearsal cleanup`; the bytes and digests match the source; usage
// errors exit 2 and validation failures exit 1 without changing anything.
func TestRestoreCommands(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	repo := initRepo(t)
	env := backupEnv(l.URL().String(), l.Username(), l.Password())
	tp := []string{"--thumbprint", l.Thumbprint()}
	vm := "DC0_H0_VM0"
	if err := l.WriteDisk(vm, 0, 1<<20, randBytes(9, 1<<20)); err != nil {
		t.Fatal(err)
	}
	src, err := l.ReadDisk(vm, 0, 0, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	digest := hex.EncodeToString(sum[:])
	cli := func(want int, args ...string) cliResult {
		t.Helper()
		r := runCLIEnv(t, env, args...)
		if r.code != want {
			t.Fatalf("appliance %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	bj := decodeJSON[[]backupJSON](t, cli(0, append([]string{"backup", "--repo", repo, "--vm", vm, "--json", "--unsafe-no-fsync"}, tp...)...).stdout)
	pt := bj[0].RestorePoint

	// To a new VM, powered on.
	res := decodeJSON[restore.Result](t, cli(0, append([]string{"restore", "--repo", repo, "--restore-point", pt, "--name", "cli-new",
		"--cluster", "DC0_C0", "--datastore", "LocalDS_0", "--network-map", "VM Network=DC0_DVPG0", "--thin", "--power-on", "--json"}, tp...)...).stdout)
	if res.Mode != "new" || res.VM.Name != "cli-new" || !res.PoweredOn || len(res.Disks) != 1 || res.Disks[0].SHA256 != digest {
		t.Fatalf("restore result %+v", res)
	}
	got, err := l.ReadDisk("cli-new", 0, 0, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sum {
		t.Fatal("restored disk differs from the source")
	}

	// Rehearsal, then cleanup.
	text := cli(0, append([]string{"restore", "--repo", repo, "--restore-point", pt, "--rehearsal", "--transport", "nfc"}, tp...)...).stdout
	if !strings.Contains(text, "rehearsal: VM DC0_H0_VM0-rehearsal-") || !strings.Contains(text, "appliance rehearsal cleanup") {
		t.Errorf("rehearsal output:\n%s", text)
	}
	removed := decodeJSON[[]restore.Rehearsal](t, cli(0, append([]string{"rehearsal", "cleanup", "--json"}, tp...)...).stdout)
	if len(removed) != 1 || !removed[0].Removed || removed[0].Source != vm {
		t.Errorf("cleanup %+v", removed)
	}

	// One disk as a VMDK file (no vCenter needed), and attached to a VM.
	out := filepath.Join(t.TempDir(), "d.vmdk")
	dl := decodeJSON[restore.Result](t, cli(0, "restore-disk", "--repo", repo, "--restore-point", pt, "--disk", "0", "--output", out, "--format", "vmdk", "--json").stdout)
	if dl.Disks[0].SHA256 != digest {
		t.Errorf("download %+v", dl)
	}
	raw := filepath.Join(t.TempDir(), "d.raw")
	runTool(t, "qemu-img", "convert", "-f", "vmdk", "-O", "raw", out, raw)
	if b, err := os.ReadFile(raw); err != nil || sha256.Sum256(b) != sum {
		t.Errorf("VMDK converted back differs (%v)", err)
	}
	at := decodeJSON[restore.Result](t, cli(0, append([]string{"restore-disk", "--repo", repo, "--restore-point", pt, "--disk", "0",
		"--attach-to", "DC0_H0_VM1", "--json"}, tp...)...).stdout)
	if at.Mode != "attach" || at.Disks[0].SHA256 != digest {
		t.Errorf("attach %+v", at)
	}

	// Usage errors: exit 2.
	for _, args := range [][]string{
		{"restore", "--repo", repo},
		{"restore", "--repo", repo, "--restore-point", pt, "--overwrite", "--name", "x"},
		{"restore", "--repo", repo, "--restore-point", pt, "--power-off"},
		{"restore", "--repo", repo, "--restore-point", pt, "--network-map", "nodst"},
		{"restore-disk", "--repo", repo, "--restore-point", pt, "--disk", "0"},
		{"restore-disk", "--repo", repo, "--restore-point", pt, "--disk", "0", "--output", out, "--attach-to", vm},
		{"restore-disk", "--repo", repo, "--restore-point", pt, "--disk", "0", "--output", out, "--format", "qcow2"},
		{"rehearsal", "cleanup", "--older-than", "-1h"},
		{"restore", "--repo", repo, "--restore-point", pt, "--transport", "ftp"},
	} {
		cli(2, append(args, tp...)...)
	}
	// Validation failures: exit 1 with the reason, nothing created.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"restore", "--repo", repo, "--restore-point", pt, "--name", "x", "--datastore", "NoDS"}, "NoDS"},
		{[]string{"restore", "--repo", repo, "--restore-point", pt}, "name in use"},
		{[]string{"restore", "--repo", repo, "--restore-point", pt, "--overwrite"}, "powered on"},
		{[]string{"restore-disk", "--repo", repo, "--restore-point", pt, "--disk", "3", "--attach-to", vm}, "no disk 3"},
	} {
		r := cli(1, append(tc.args, tp...)...)
		if !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, r.stderr, tc.msg)
		}
	}
	if _, err := l.MoRef("x"); err == nil {
		t.Error("a failed restore created VM x")
	}
}
