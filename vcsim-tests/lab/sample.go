package lab

import (
	"bytes"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// ErrMissingTool is returned by AddSampleVMs when a file-system tool
// (mkfs.ext4, mkfs.vfat, mcopy) is not installed.
var ErrMissingTool = errors.New("file-system tool missing")

// Sample file-system kinds.
const (
	FSExt4 = "ext4"
	FSVFAT = "vfat"
)

// SampleVM describes one VM AddSampleVMs creates: a powered-on VM with one
// thin disk holding a real file system made from a generated tree.
type SampleVM struct {
	Name string
	// Kind picks the generated tree: "web" (site, logs, a cache file), "db"
	// (table and WAL files), "files" (documents and pictures).
	Kind string
	// FS is FSExt4 (mkfs.ext4 -d), FSVFAT (mkfs.vfat + mcopy), FSXFSLVM
	// (GPT + LVM + XFS) or FSNTFS (GPT + NTFS); the last two need root.
	FS string
	// Capacity is the disk size (default 64 MiB); Fill about how many bytes
	// of files the tree holds (default Capacity/3).
	Capacity, Fill int64
	// Seed makes the content reproducible (the same spec gives the same
	// bytes, so a demo restarted on the same state directory deduplicates).
	Seed uint64
}

// DefaultSampleVMs returns n specs of capacity bytes each: web-01 (ext4),
// db-01 (ext4), files-01 (FAT), then web-02, db-02, files-02, ...
func DefaultSampleVMs(n int, capacity int64) []SampleVM {
	// app and win (GPT + LVM + XFS, GPT + NTFS) come fourth and fifth: they
	// need root, so the first three work anywhere.
	kinds := []struct{ kind, fs string }{{"web", FSExt4}, {"db", FSExt4}, {"files", FSVFAT}, {"app", FSXFSLVM}, {"win", FSNTFS}}
	out := make([]SampleVM, 0, n)
	for i := range n {
		k := kinds[i%len(kinds)]
		sv := SampleVM{
			Name: fmt.Sprintf("%s-%02d", k.kind, i/len(kinds)+1), Kind: k.kind, FS: k.fs,
			Capacity: capacity, Seed: uint64(i + 1),
		}
		if k.fs == FSXFSLVM && capacity < minXFSDisk {
			// mkfs.xfs refuses file systems under 300 MB; the disk is thin,
			// and the files stay as many as the others'.
			sv.Capacity, sv.Fill = minXFSDisk, capacity/3
		}
		out = append(out, sv)
	}
	return out
}

// Area is a byte range [Off, Off+Len) of a disk.
type Area struct{ Off, Len int64 }

// Sample is a VM AddSampleVMs made.
type Sample struct {
	Name, MoRef, InstanceUUID string
	FS                        string
	Files                     int   // files in the tree
	Bytes                     int64 // bytes of file content
	// DataAreas are where the contents of the tree's binary files lie on the
	// disk (found by matching them in the image): Churn rewrites inside them,
	// so the file system's metadata stays intact as the contents change.
	DataAreas []Area
}

// AddSampleVMs creates the VMs of specs in the first cluster, each with a
// disk holding a real file system built in dir (a scratch directory; the
// images are removed once copied). Tools run and the guest family matches
// the file system, so quiesced snapshots work.
func (l *Lab) AddSampleVMs(ctx context.Context, dir string, specs []SampleVM) ([]Sample, error) {
	need := map[string]string{}
	for _, s := range specs {
		switch s.FS {
		case FSExt4:
			need["mkfs.ext4"] = "e2fsprogs"
		case FSVFAT:
			need["mkfs.vfat"], need["mcopy"] = "dosfstools", "mtools"
		case FSXFSLVM:
			need["mkfs.xfs"], need["pvcreate"], need["sgdisk"] = "xfsprogs", "lvm2", "gdisk"
		case FSNTFS:
			need["mkntfs"], need["ntfs-3g"], need["sgdisk"] = "ntfs-3g", "ntfs-3g", "gdisk"
		default:
			return nil, fmt.Errorf("lab: sample VM %s: unknown file system %q (want %s, %s, %s or %s)", s.Name, s.FS, FSExt4, FSVFAT, FSXFSLVM, FSNTFS)
		}
	}
	for tool, pkg := range need {
		if _, err := lookTool(tool); err != nil {
			return nil, fmt.Errorf("install %s: make test does (%s not found): %w", pkg, tool, ErrMissingTool)
		}
	}
	folder, pool, ds, err := l.placement(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(specs))
	for _, s := range specs {
		if s.Capacity <= 0 {
			s.Capacity = 64 << 20
		}
		if s.Fill <= 0 {
			s.Fill = s.Capacity / 3
		}
		smp, err := l.addSample(ctx, dir, folder, pool, ds, s)
		if err != nil {
			return nil, err
		}
		out = append(out, smp)
	}
	return out, nil
}

func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func (l *Lab) placement(ctx context.Context) (*object.Folder, *object.ResourcePool, *object.Datastore, error) {
	f := find.NewFinder(l.admin.Client, true)
	dc, err := f.DefaultDatacenter(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("lab: datacenter: %w", err)
	}
	f.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("lab: folders: %w", err)
	}
	pools, err := f.ResourcePoolList(ctx, "*/Resources")
	if err != nil || len(pools) == 0 {
		return nil, nil, nil, fmt.Errorf("lab: resource pool: %v", err)
	}
	dss, err := f.DatastoreList(ctx, "*")
	if err != nil || len(dss) == 0 {
		return nil, nil, nil, fmt.Errorf("lab: datastore: %v", err)
	}
	return folders.VmFolder, pools[0], dss[0], nil
}

// sampleUUID derives a stable UUID from the VM name, so a demo restarted
// on the same state directory sees the same VMs (same instance UUIDs).
func sampleUUID(kind, name string) string {
	h := sha1.Sum([]byte("vmvault sample " + kind + " " + name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func (l *Lab) addSample(ctx context.Context, dir string, folder *object.Folder, pool *object.ResourcePool, ds *object.Datastore, s SampleVM) (Sample, error) {
	work, err := os.MkdirTemp(dir, "sample-"+s.Name+"-")
	if err != nil {
		return Sample{}, fmt.Errorf("lab: sample %s: %w", s.Name, err)
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	files, err := genTree(root, s)
	if err != nil {
		return Sample{}, fmt.Errorf("lab: sample %s tree: %w", s.Name, err)
	}
	img := filepath.Join(work, "disk.img")
	if err := makeFS(ctx, s, root, img); err != nil {
		return Sample{}, err
	}
	image, err := os.ReadFile(img)
	if err != nil {
		return Sample{}, fmt.Errorf("lab: sample %s: %w", s.Name, err)
	}
	smp := Sample{Name: s.Name, FS: s.FS, Files: len(files)}
	for _, f := range files {
		smp.Bytes += int64(len(f.data))
		if f.binary {
			if a, ok := locate(image, f.data); ok {
				smp.DataAreas = append(smp.DataAreas, a)
			}
		}
	}
	if len(smp.DataAreas) == 0 {
		return Sample{}, fmt.Errorf("lab: sample %s: no file data found in the %s image", s.Name, s.FS)
	}

	var devs object.VirtualDeviceList
	ctl, err := devs.CreateSCSIController("pvscsi")
	if err != nil {
		return Sample{}, err
	}
	devs = append(devs, ctl)
	disk := devs.CreateDisk(ctl.(types.BaseVirtualController), ds.Reference(), "")
	disk.CapacityInKB = s.Capacity / 1024
	disk.CapacityInBytes = s.Capacity
	disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ThinProvisioned = types.NewBool(true)
	devs = append(devs, disk)
	changes, err := devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return Sample{}, err
	}
	for _, ch := range changes {
		if sp := ch.GetVirtualDeviceConfigSpec(); sp.Device == disk {
			sp.FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	guest, family := "otherLinux64Guest", "linuxGuest"
	switch s.FS {
	case FSVFAT, FSNTFS:
		guest, family = "windows9Server64Guest", "windowsGuest"
	case FSXFSLVM:
		guest = "rhel9_64Guest"
	}
	smp.InstanceUUID = sampleUUID("instance", s.Name)
	spec := types.VirtualMachineConfigSpec{
		Name: s.Name, GuestId: guest, NumCPUs: 2, MemoryMB: 2048,
		Uuid: sampleUUID("bios", s.Name), InstanceUuid: smp.InstanceUUID,
		// As on an estate already protected by a CBT-based product.
		ChangeTrackingEnabled: types.NewBool(true),
		Annotation:            fmt.Sprintf("vmvault demo VM: %s file system with %d generated files", s.FS, len(files)),
		Files:                 &types.VirtualMachineFileInfo{VmPathName: "[" + ds.Name() + "]"},
		DeviceChange:          changes,
	}
	task, err := folder.CreateVM(ctx, spec, pool, nil)
	if err != nil {
		return Sample{}, fmt.Errorf("lab: create VM %s: %w", s.Name, err)
	}
	res, err := task.WaitForResult(ctx)
	if err != nil {
		return Sample{}, fmt.Errorf("lab: create VM %s: %w", s.Name, err)
	}
	ref, ok := res.Result.(types.ManagedObjectReference)
	if !ok {
		return Sample{}, fmt.Errorf("lab: create VM %s: task returned %T", s.Name, res.Result)
	}
	smp.MoRef = ref.Value
	info, err := l.Disk(ref.Value, 0)
	if err != nil {
		return Sample{}, err
	}
	if err := os.Truncate(info.FlatPath, s.Capacity); err != nil {
		return Sample{}, fmt.Errorf("lab: size disk of %s: %w", s.Name, err)
	}
	if err := l.WriteDiskFrom(ref.Value, 0, bytes.NewReader(image)); err != nil {
		return Sample{}, fmt.Errorf("lab: sample %s: %w", s.Name, err)
	}
	vm := object.NewVirtualMachine(l.admin.Client, ref)
	ptask, err := vm.PowerOn(ctx)
	if err == nil {
		err = ptask.Wait(ctx)
	}
	if err != nil {
		return Sample{}, fmt.Errorf("lab: power on %s: %w", s.Name, err)
	}
	if err := l.SetToolsRunning(ref.Value, true); err != nil {
		return Sample{}, err
	}
	if err := l.SetGuestFamily(ref.Value, family); err != nil {
		return Sample{}, err
	}
	return smp, nil
}

// locate finds data in image and returns the contiguous stretch of the
// image that matches it from its start (the file's first extent).
func locate(image, data []byte) (Area, bool) {
	head := data[:min(len(data), 4096)]
	at := bytes.Index(image, head)
	if at < 0 {
		return Area{}, false
	}
	n := 0
	for n < len(data) && at+n < len(image) && image[at+n] == data[n] {
		n++
	}
	// Whole 4 KiB blocks only, so writes never touch a neighbour's tail.
	n = n / 4096 * 4096
	if n == 0 {
		return Area{}, false
	}
	return Area{Off: int64(at), Len: int64(n)}, true
}

type genFile struct {
	path   string
	data   []byte
	binary bool
}

var words = strings.Fields(`the a of and to in backup restore snapshot disk volume server request
	response user session table index query page cache log error warning info customer order invoice
	report quarter revenue meeting project schedule release build deploy config value`)

func textOf(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		line := 6 + rng.IntN(10)
		for i := range line {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		b.WriteString(".\n")
	}
	return b.Bytes()[:n]
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8 && i+k < n; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return b
}

// genTree writes the sample's tree under root: a few text files (config,
// pages, logs, documents) and binary data files making up most of Fill.
func genTree(root string, s SampleVM) ([]genFile, error) {
	rng := rand.New(rand.NewPCG(s.Seed, 0x766d7661756c74))
	var files []genFile
	add := func(p string, data []byte, binary bool) {
		files = append(files, genFile{path: p, data: data, binary: binary})
	}
	text := func(p string, n int) { add(p, textOf(rng, n), false) }
	var binDir, binExt, txtDir, txtExt string
	switch s.Kind {
	case "db":
		add("etc/hostname", []byte(s.Name+"\n"), false)
		text("etc/postgresql/postgresql.conf", 6<<10)
		text("var/log/postgresql/postgresql.log", 96<<10)
		binDir, binExt, txtDir, txtExt = "var/lib/postgresql/base/16384", ".dat", "var/lib/postgresql/pg_wal", ".wal"
	case "files":
		add("README.TXT", []byte("Shared files of "+s.Name+"\r\n"), false)
		binDir, binExt, txtDir, txtExt = "Pictures", ".jpg", "Documents", ".txt"
	case "win":
		add("README.TXT", []byte("Data disk of "+s.Name+"\r\n"), false)
		text("Users/alice/Documents/Quarterly report.txt", 12<<10)
		binDir, binExt, txtDir, txtExt = "Users/alice/Pictures", ".jpg", "Shares/Finance", ".csv"
	case "app":
		add("etc/hostname", []byte(s.Name+"\n"), false)
		text("etc/app/app.conf", 2<<10)
		text("var/log/app/app.log", 64<<10)
		binDir, binExt, txtDir, txtExt = "srv/app/data", ".db", "home/alice", ".txt"
	default:
		add("etc/hostname", []byte(s.Name+"\n"), false)
		text("etc/nginx/nginx.conf", 3<<10)
		text("var/log/nginx/access.log", 128<<10)
		binDir, binExt, txtDir, txtExt = "var/lib/app/cache", ".bin", "var/www/html", ".html"
	}
	var total int64
	for _, f := range files {
		total += int64(len(f.data))
	}
	// A quarter text, the rest binary data files of 64 KiB–2 MiB.
	for i := 0; total < s.Fill/4; i++ {
		n := 4<<10 + rng.IntN(60<<10)
		text(fmt.Sprintf("%s/doc%03d%s", txtDir, i, txtExt), n)
		total += int64(n)
	}
	for i := 0; total < s.Fill; i++ {
		n := 64<<10 + rng.IntN(2<<20-64<<10)
		n = int(min(int64(n), s.Fill-total+4096))
		add(fmt.Sprintf("%s/f%03d%s", binDir, i, binExt), randomBytes(rng, n), true)
		total += int64(n)
	}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// makeFS builds the raw image of the sample's file system from root.
func makeFS(ctx context.Context, s SampleVM, root, img string) error {
	run := func(env []string, name string, args ...string) error {
		p, err := lookTool(name)
		if err != nil {
			return fmt.Errorf("lab: %w: %w", err, ErrMissingTool)
		}
		cmd := exec.CommandContext(ctx, p, args...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("lab: sample %s: %s: %w\n%s", s.Name, name, err, out)
		}
		return nil
	}
	label := strings.ToUpper(strings.ReplaceAll(s.Name, "-", ""))
	if len(label) > 11 {
		label = label[:11]
	}
	switch s.FS {
	case FSExt4:
		return run(nil, "mkfs.ext4", "-q", "-F", "-L", s.Name, "-d", root, img, strconv.FormatInt(s.Capacity>>10, 10)+"k")
	case FSXFSLVM:
		return makeXFSLVM(ctx, s, root, img)
	case FSNTFS:
		return makeNTFS(ctx, s, root, img)
	case FSVFAT:
		f, err := os.Create(img)
		if err != nil {
			return fmt.Errorf("lab: sample %s: %w", s.Name, err)
		}
		err = f.Truncate(s.Capacity)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("lab: sample %s: %w", s.Name, err)
		}
		if err := run(nil, "mkfs.vfat", "-n", label, img); err != nil {
			return err
		}
		ents, err := os.ReadDir(root)
		if err != nil {
			return err
		}
		args := []string{"-i", img, "-s", "-Q"}
		for _, e := range ents {
			args = append(args, filepath.Join(root, e.Name()))
		}
		return run([]string{"MTOOLS_SKIP_CHECK=1"}, "mcopy", append(args, "::/")...)
	}
	return fmt.Errorf("lab: unknown file system %q", s.FS)
}

// Churn makes the sample's guest write a little: writes rewrites of 4 KiB to
// 1 MiB (4 KiB aligned) at random places inside its data areas, through
// WriteDisk (CBT records them; while a snapshot exists they go to the
// overlay). It returns the bytes written.
func (l *Lab) Churn(s Sample, rng *rand.Rand, writes int) (int64, error) {
	if len(s.DataAreas) == 0 {
		return 0, fmt.Errorf("lab: sample %s has no data areas", s.Name)
	}
	var total int64
	for range writes {
		a := s.DataAreas[rng.IntN(len(s.DataAreas))]
		blocks := a.Len / 4096
		n := 1 + rng.Int64N(min(blocks, 256))
		off := a.Off + rng.Int64N(blocks-n+1)*4096
		if err := l.WriteDisk(s.MoRef, 0, off, randomBytes(rng, int(n*4096))); err != nil {
			return total, fmt.Errorf("lab: churn %s: %w", s.Name, err)
		}
		total += n * 4096
	}
	return total, nil
}
