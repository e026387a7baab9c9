package restoree2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// TestRestoreNewVM backs up a VM with three disks on two controllers and
// two NICs, restores it to a new VM with a network mapping and checks the
// configuration and every disk's bytes on the lab datastore, and that the
// reported digest equals the source disk's and restore.DiskDigest's.
func TestRestoreNewVM(t *testing.T) {
	l := labtest.Start(t, lab.Options{Datastores: 2})
	c := connect(t, l)
	r := labtest.Repo(t)
	src, imgs := makeSource(t, l, c, "src-new", 1)
	ctx := context.Background()
	dc, err := find.NewFinder(l.Admin().Client).Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := dc.Folders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.VmFolder.CreateFolder(ctx, "F0"); err != nil {
		t.Fatal(err)
	}
	pt := backUp(t, c, r, src.Name)

	for _, transport := range []string{restore.TransportPUT, restore.TransportNFC} {
		t.Run(transport, func(t *testing.T) { checkNewVM(t, l, c, r, pt, src, imgs, transport) })
	}
}

func checkNewVM(t *testing.T, l *lab.Lab, c *vsphere.Client, r restore.Points, pt string, src vsphere.VM, imgs [][]byte, transport string) {
	ctx := context.Background()
	e := newEngine(r, c)
	var phases []string
	name := "restored-" + transport
	// vcsim's import lease names disk files by base name only, so two disks
	// on two datastores (same base name) collide there: NFC stays on one.
	diskDS := map[int]string{2: "LocalDS_1"}
	if transport == restore.TransportNFC {
		diskDS = nil
	}
	// put: into a folder, on the cluster; nfc: on the standalone host.
	folder, host := "/DC0/vm/F0", ""
	if transport == restore.TransportNFC {
		folder, host = "", "DC0_H0"
	}
	res, err := e.RestoreVM(ctx, restore.VMRequest{RestorePoint: pt[:12], Name: name, Transport: transport, Folder: folder, Host: host,
		NetworkMap: map[string]string{"DC0_DVPG0": "VM Network"}, DiskDatastores: diskDS,
		PowerOn: true, Progress: func(p restore.Progress) {
			if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
				phases = append(phases, p.Phase)
			}
		}})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if res.Mode != "new" || !res.PoweredOn || len(res.Disks) != 3 || res.BytesWritten != 9<<20 || res.BytesPerSec <= 0 {
		t.Fatalf("result %+v", res)
	}
	if strings.Join(phases, ",") != "validate,create,disk,power-on,done" {
		t.Errorf("phases %v", phases)
	}
	got, err := c.VM(ctx, res.VM)
	if err != nil {
		t.Fatal(err)
	}
	det, err := c.Details(ctx, res.VM)
	if err != nil {
		t.Fatal(err)
	}
	if got.NumCPU != 4 || det.CoresPerSocket != 2 || got.MemoryMB != 512 || det.Firmware != "efi" || got.GuestID != "otherLinux64Guest" ||
		det.ExtraConfig["disk.EnableUUID"] != "TRUE" || got.PowerState != "poweredOn" {
		t.Errorf("restored VM %+v details %+v", got, det)
	}
	if folder != "" && got.Path != folder+"/"+name {
		t.Errorf("restored VM at %s, want in %s", got.Path, folder)
	}
	if host != "" {
		inv, err := c.Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		onHost := ""
		for _, v := range inv.VMs {
			if v.MoRef == got.MoRef {
				onHost = v.Host
			}
		}
		if onHost != host {
			t.Errorf("restored VM on host %q, want %s", onHost, host)
		}
	}
	if got.InstanceUUID == src.InstanceUUID || got.BIOSUUID == src.BIOSUUID {
		t.Errorf("restored VM kept the source's UUIDs")
	}
	// Disks: same controllers, units and capacities; content identical.
	for i, sd := range src.Disks {
		var td *vsphere.Disk
		for j := range got.Disks {
			if got.Disks[j].ControllerType == sd.ControllerType && got.Disks[j].Bus == sd.Bus && got.Disks[j].Unit == sd.Unit {
				td = &got.Disks[j]
			}
		}
		if td == nil {
			t.Fatalf("no restored disk at %s%d:%d (got %+v)", sd.ControllerType, sd.Bus, sd.Unit, got.Disks)
		}
		if td.CapacityBytes != sd.CapacityBytes || td.Thin != sd.Thin {
			t.Errorf("disk %d: capacity %d thin %v, want %d %v", i, td.CapacityBytes, td.Thin, sd.CapacityBytes, sd.Thin)
		}
		wantDS := ds0
		if i == 2 && diskDS != nil {
			wantDS = "LocalDS_1"
		}
		if td.Datastore != wantDS {
			t.Errorf("disk %d on %s, want %s", i, td.Datastore, wantDS)
		}
		labtest.SameBytes(t, "restored disk", diskByKey(t, l, name, td.Key), imgs[i])
		if res.Disks[i].SHA256 != sha(imgs[i]) || res.Disks[i].TargetKey != td.Key {
			t.Errorf("disk %d: result %+v, want digest %s key %d", i, res.Disks[i], sha(imgs[i]), td.Key)
		}
		d, err := restore.DiskDigest(ctx, r, pt, i)
		if err != nil || d != res.Disks[i].SHA256 {
			t.Errorf("DiskDigest %d = %s, %v; restore reported %s", i, d, err, res.Disks[i].SHA256)
		}
	}
	// NICs: same count and types; DVPG0 mapped to "VM Network"; fresh MACs.
	if len(got.NICs) != 2 {
		t.Fatalf("NICs %+v", got.NICs)
	}
	for i, n := range got.NICs {
		if n.Type != src.NICs[i].Type || n.Network != "VM Network" || n.MAC == src.NICs[i].MAC || !n.Connected {
			t.Errorf("NIC %d = %+v (source %+v)", i, n, src.NICs[i])
		}
	}
}

// TestRehearsal restores a copy named <vm>-rehearsal-<time> with NICs
// disconnected, then removes it with CleanupRehearsals (which leaves other
// VMs alone and honours the age limit).
func TestRehearsal(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, imgs := makeSource(t, l, c, "src-reh", 2)
	if err := c.PowerOn(ctx, src.VMRef); err != nil {
		t.Fatal(err)
	}
	pt := backUp(t, c, r, src.Name)
	before := vmNames(t, c)

	e := newEngine(r, c)
	res, err := e.RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Rehearsal: true, PowerOn: true})
	if err != nil {
		t.Fatalf("rehearsal: %v", err)
	}
	want := "src-reh-rehearsal-20261129T180000Z"
	if res.Mode != "rehearsal" || res.VM.Name != want || !strings.Contains(res.RemoveCommand, "appliance rehearsal cleanup") {
		t.Fatalf("result %+v", res)
	}
	got, err := c.VM(ctx, res.VM)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.NICs) != 2 {
		t.Fatalf("NICs %+v", got.NICs)
	}
	for _, n := range got.NICs {
		if n.Connected {
			t.Errorf("rehearsal NIC %+v is connected", n)
		}
	}
	for i := range imgs {
		labtest.SameBytes(t, "rehearsal disk", diskByKey(t, l, want, res.Disks[i].TargetKey), imgs[i])
	}
	// The source is untouched and still connected.
	if s, _ := c.VM(ctx, src.VMRef); len(s.NICs) != 2 || !s.NICs[0].Connected || !s.NICs[1].Connected {
		t.Errorf("source NICs changed: %+v", s.NICs)
	}
	// Too young for --older-than 1h: kept.
	rm, err := e.CleanupRehearsals(ctx, time1h)
	if err != nil || len(rm) != 0 {
		t.Fatalf("cleanup older than 1h: %v %+v", err, rm)
	}
	rm, err = e.CleanupRehearsals(ctx, 0)
	if err != nil || len(rm) != 1 || !rm[0].Removed || rm[0].Source != "src-reh" || rm[0].Point != pt {
		t.Fatalf("cleanup: %v %+v", err, rm)
	}
	if after := vmNames(t, c); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("VMs after cleanup %v, before the rehearsal %v", after, before)
	}
}

// TestOverOriginal changes the source's disks, then restores the point over
// it: refused while powered on, done with PowerOff; identity kept, bytes
// back to the restore point's.
func TestOverOriginal(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, imgs := makeSource(t, l, c, "src-over", 3)
	if err := c.PowerOn(ctx, src.VMRef); err != nil {
		t.Fatal(err)
	}
	pt := backUp(t, c, r, src.Name)
	for i := range imgs {
		if err := l.WriteDisk(src.Name, i, 4096, []byte("changed after the backup")); err != nil {
			t.Fatal(err)
		}
	}
	e := newEngine(r, c)
	if _, err := e.RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Overwrite: true}); !errors.Is(err, restore.ErrPoweredOn) {
		t.Fatalf("over a powered-on VM without permission: %v", err)
	}
	if b, _ := l.ReadDisk(src.Name, 0, 4096, 7); string(b) != "changed" {
		t.Fatal("refused restore changed the disk")
	}
	res, err := e.RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Overwrite: true, PowerOff: true, PowerOn: true})
	if err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if res.VM.MoRef != src.MoRef || res.Mode != "overwrite" || !res.PoweredOn || len(res.Warnings) == 0 {
		t.Errorf("result %+v", res)
	}
	got, err := c.VM(ctx, src.VMRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.InstanceUUID != src.InstanceUUID || got.BIOSUUID != src.BIOSUUID || got.NICs[0].MAC != src.NICs[0].MAC || got.PowerState != "poweredOn" {
		t.Errorf("identity or power changed: %+v", got)
	}
	for i, d := range src.Disks {
		labtest.SameBytes(t, "overwritten disk", diskByKey(t, l, src.Name, d.Key), imgs[i])
		if res.Disks[i].SHA256 != sha(imgs[i]) {
			t.Errorf("disk %d digest %s", i, res.Disks[i].SHA256)
		}
	}
}

// TestBackupAfterOverwrite: point A, change, point B (CBT baseline B),
// restore A over the original, back up again: the new point must hold A's
// bytes. The restore's writes bypass CBT, so without the CBT reset the
// incremental from B would see no change and record B's bytes.
func TestBackupAfterOverwrite(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, imgs := makeSource(t, l, c, "src-cbt", 10)
	ptA := backUp(t, c, r, src.Name)
	for i := range imgs {
		if err := l.WriteDisk(src.Name, i, 8192, []byte("written between A and B")); err != nil {
			t.Fatal(err)
		}
	}
	backUp(t, c, r, src.Name)
	if _, err := newEngine(r, c).RestoreVM(ctx, restore.VMRequest{RestorePoint: ptA, Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	ptC := backUp(t, c, r, src.Name)
	for i := range imgs {
		d, err := restore.DiskDigest(ctx, r, ptC, i)
		if err != nil || d != sha(imgs[i]) {
			t.Errorf("disk %d of the backup after the restore: digest %s (%v), want A's %s", i, d, err, sha(imgs[i]))
		}
	}
}

const time1h = 3600 * 1e9

// TestRestoreWarnsAboutSkippedDisks: a disk the backup could not take (an
// independent disk) is left out of the restored VM with a warning; the
// other disks come back at their units.
func TestRestoreWarnsAboutSkippedDisks(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, imgs := makeSource(t, l, c, "src-skip", 9)
	ovm := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: src.MoRef})
	devs, err := ovm.Device(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vd := devs.FindByKey(src.Disks[1].Key).(*types.VirtualDisk)
	vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo).DiskMode = string(types.VirtualDiskModeIndependent_persistent)
	if err := ovm.EditDevice(ctx, vd); err != nil {
		t.Fatal(err)
	}
	// Devices tied to the source host: recorded, not restored, named.
	serial := &types.VirtualSerialPort{VirtualDevice: types.VirtualDevice{
		Key:     -100,
		Backing: &types.VirtualSerialPortFileBackingInfo{VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: "[LocalDS_0] src-skip/serial.log"}},
	}}
	if err := ovm.AddDevice(ctx, serial, &types.VirtualUSBController{VirtualController: types.VirtualController{VirtualDevice: types.VirtualDevice{Key: -101}}}); err != nil {
		t.Fatal(err)
	}
	pt := backUp(t, c, r, src.Name)
	res, err := newEngine(r, c).RestoreVM(ctx, restore.VMRequest{RestorePoint: pt, Name: "skip-restored"})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	warned := map[string]bool{}
	for _, w := range res.Warnings {
		for _, k := range []string{"not backed up", "serial", "usb-controller"} {
			warned[k] = warned[k] || strings.Contains(w, k)
		}
	}
	if !warned["not backed up"] || !warned["serial"] || !warned["usb-controller"] || len(res.Disks) != 2 {
		t.Fatalf("result %+v", res)
	}
	rdevs, err := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: res.VM.MoRef}).Device(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rdevs.SelectByType((*types.VirtualSerialPort)(nil))); n != 0 {
		t.Errorf("restored VM has %d serial ports; the source's was tied to its host", n)
	}
	got, err := c.VM(ctx, res.VM)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Disks) != 2 {
		t.Fatalf("restored VM has %d disks", len(got.Disks))
	}
	for _, d := range res.Disks {
		i := 0
		if d.SourceKey == src.Disks[2].Key {
			i = 2
		}
		labtest.SameBytes(t, "restored disk", diskByKey(t, l, "skip-restored", d.TargetKey), imgs[i])
	}
}

// TestControllerModel: when the configuration records the SCSI model, the
// restored VM gets that model (and no warning); without it, pvscsi and a
// warning.
func TestControllerModel(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, _ := makeSource(t, l, c, "src-model", 11)
	pt := backUp(t, c, r, src.Name)
	p, err := r.Point(ctx, pt)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := r.LoadConfigBlob(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := vmconfig.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	recorded := ""
	for _, ct := range cfg.Controllers {
		if ct.Type == "scsi" {
			recorded = ct.Model
		}
	}
	if recorded != "pvscsi" {
		t.Fatalf("backup recorded SCSI model %q, want the source's pvscsi", recorded)
	}
	// Two derived points: one with another model, one as a point made
	// before models were recorded.
	derive := func(model string) string {
		t.Helper()
		c2 := cfg
		c2.Controllers = append([]vmconfig.ControllerConfig(nil), cfg.Controllers...)
		for i := range c2.Controllers {
			if c2.Controllers[i].Type == "scsi" {
				c2.Controllers[i].Model = model
			}
		}
		blob, err := vmconfig.Encode(c2)
		if err != nil {
			t.Fatal(err)
		}
		s, err := r.NewSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		np, err := s.Commit(ctx, repository.NewPoint{VM: p.VM, Time: time.Now(), Config: blob, Disks: p.Disks})
		if err != nil {
			t.Fatal(err)
		}
		return np.ID
	}
	withModel, withoutModel := derive("lsilogic-sas"), derive("")
	for _, tc := range []struct {
		point, name, model string
		warn               bool
	}{
		{withModel, "model-recorded", "lsilogic-sas", false},
		{withoutModel, "model-unknown", "pvscsi", true},
	} {
		res, err := newEngine(r, c).RestoreVM(ctx, restore.VMRequest{RestorePoint: tc.point, Name: tc.name})
		if err != nil {
			t.Fatal(err)
		}
		det, err := c.Details(ctx, res.VM)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := c.VM(ctx, res.VM)
		var model string
		for _, d := range got.Disks {
			if d.ControllerType == "scsi" {
				model = det.ControllerModels[d.ControllerKey]
			}
		}
		warned := false
		for _, w := range res.Warnings {
			warned = warned || strings.Contains(w, "model is not recorded")
		}
		if model != tc.model || warned != tc.warn {
			t.Errorf("%s: SCSI model %q (warned %v), want %q (%v); warnings %q", tc.name, model, warned, tc.model, tc.warn, res.Warnings)
		}
	}
}
