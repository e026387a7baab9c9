package lab_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// needTool fails the test (never skips) when a file-system tool is missing.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	for _, p := range []string{name, "/usr/sbin/" + name, "/sbin/" + name} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatalf("install %s (%s): make test does", pkg, name)
	return ""
}

// dumpDisk copies the guest's view of a disk to a file, for fsck and mtools.
func dumpDisk(t *testing.T, l *lab.Lab, vm string, capacity int64) string {
	t.Helper()
	b, err := l.ReadDisk(vm, 0, 0, int(capacity))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), vm+".img")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Sample VMs hold real file systems that fsck accepts and whose files read
// back; they are powered on with Tools running and stable instance UUIDs;
// Churn changes file contents (the change id advances) and leaves the file
// systems clean.
func TestAddSampleVMs(t *testing.T) {
	e2fsck := needTool(t, "e2fsck", "e2fsprogs")
	fsckFAT := needTool(t, "fsck.vfat", "dosfstools")
	mtype := needTool(t, "mtype", "mtools")
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{DiskCapacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	const capacity = 16 << 20
	specs := lab.DefaultSampleVMs(3, capacity)
	if got := []string{specs[0].Name, specs[1].Name, specs[2].Name}; strings.Join(got, ",") != "web-01,db-01,files-01" {
		t.Fatalf("names %v", got)
	}
	samples, err := l.AddSampleVMs(ctx, t.TempDir(), specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 3 {
		t.Fatalf("%d samples", len(samples))
	}
	names := strings.Join(l.VMNames(), ",")
	for _, s := range samples {
		if !strings.Contains(names, s.Name) {
			t.Errorf("%s not in the inventory %s", s.Name, names)
		}
		if s.Files < 5 || s.Bytes < capacity/4 || len(s.DataAreas) == 0 {
			t.Errorf("%s: %d files, %d bytes, %d data areas", s.Name, s.Files, s.Bytes, len(s.DataAreas))
		}
		var vm mo.VirtualMachine
		if err := l.Admin().RetrieveOne(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: s.MoRef}, []string{"config.instanceUuid", "runtime.powerState", "guest.toolsRunningStatus"}, &vm); err != nil {
			t.Fatal(err)
		}
		if vm.Config.InstanceUuid != s.InstanceUUID || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn ||
			vm.Guest.ToolsRunningStatus != string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) {
			t.Errorf("%s: uuid %s (want %s), power %s, tools %s", s.Name, vm.Config.InstanceUuid, s.InstanceUUID, vm.Runtime.PowerState, vm.Guest.ToolsRunningStatus)
		}
	}
	// The same name gives the same instance UUID in another lab (a demo
	// restarted on its state directory finds its VMs again).
	l2, err := lab.Start(ctx, lab.Options{DiskCapacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l2.Close)
	again, err := l2.AddSampleVMs(ctx, t.TempDir(), specs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if again[0].InstanceUUID != samples[0].InstanceUUID {
		t.Errorf("instance UUID not stable: %s then %s", samples[0].InstanceUUID, again[0].InstanceUUID)
	}

	fsck := func(s lab.Sample) {
		t.Helper()
		img := dumpDisk(t, l, s.MoRef, capacity)
		var cmd *exec.Cmd
		if s.FS == lab.FSExt4 {
			sb, _ := l.ReadDisk(s.MoRef, 0, 1024+56, 2)
			if binary.LittleEndian.Uint16(sb) != 0xEF53 {
				t.Errorf("%s: no ext4 superblock magic", s.Name)
			}
			cmd = exec.Command(e2fsck, "-fn", img)
		} else {
			out, err := exec.Command(mtype, "-i", img, "::/README.TXT").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Shared files of "+s.Name) {
				t.Errorf("%s: mtype README.TXT: %v %s", s.Name, err, out)
			}
			cmd = exec.Command(fsckFAT, "-n", img)
		}
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %s: %v\n%s", s.Name, cmd.Path, err, out)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range samples {
		fsck(s)
		before, err := l.ChangeID(s.MoRef, 0)
		if err != nil {
			t.Fatal(err)
		}
		content := func() string {
			var sb strings.Builder
			for _, a := range s.DataAreas {
				b, err := l.ReadDisk(s.MoRef, 0, a.Off, int(a.Len))
				if err != nil {
					t.Fatal(err)
				}
				sb.Write(b)
			}
			return sb.String()
		}
		old := content()
		// Snapshot so the change id advances past the writes.
		vm := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: s.MoRef})
		task, err := vm.CreateSnapshot(ctx, "churn", "", false, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := l.Churn(s, rng, 20)
		if err != nil || n < 20*4096 {
			t.Fatalf("%s: churn %d bytes: %v", s.Name, n, err)
		}
		task, err = vm.RemoveAllSnapshot(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		after, _ := l.ChangeID(s.MoRef, 0)
		if after == before {
			t.Errorf("%s: change id did not advance (%s)", s.Name, before)
		}
		if content() == old {
			t.Errorf("%s: churn changed nothing in the data areas", s.Name)
		}
		fsck(s)
	}

	if _, err := l.AddSampleVMs(ctx, t.TempDir(), []lab.SampleVM{{Name: "x", FS: "zfs"}}); err == nil || !strings.Contains(err.Error(), "unknown file system") {
		t.Errorf("unknown file system: %v", err)
	}
}
