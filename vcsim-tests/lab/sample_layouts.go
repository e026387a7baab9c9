package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The disk layouts administrators really have, for file-level restore:
// a RHEL-style Linux disk (GPT, one LVM physical volume, XFS on a logical
// volume) and a Windows-style data disk (GPT, one basic data partition
// holding NTFS). Both need root (loop devices, mount) and the tools of
// xfsprogs, lvm2, ntfs-3g and gdisk; without them AddSampleVMs fails with
// ErrMissingTool and says which.
const (
	FSXFSLVM = "xfs-lvm"
	FSNTFS   = "ntfs"
)

// minXFSDisk is the smallest disk of an FSXFSLVM sample: mkfs.xfs wants
// more than 300 MB in the LV.
const minXFSDisk = 320 << 20

// partStart is where the one partition starts (1 MiB, as sgdisk aligns).
const partStart = 1 << 20

// partSize is the size of a disk's one partition: from 1 MiB to the backup
// GPT (34 sectors) at the end, rounded down to a MiB.
func partSize(capacity int64) int64 { return (capacity - partStart - 34*512) / (1 << 20) * (1 << 20) }

type layout struct {
	ctx  context.Context
	name string
	work string
	// undo runs in reverse order, even on failure: loop devices and mounts
	// never outlive the call.
	undo []func()
}

func (l *layout) cleanup() {
	for i := len(l.undo) - 1; i >= 0; i-- {
		l.undo[i]()
	}
}

func (l *layout) run(name string, args ...string) (string, error) {
	p, err := lookTool(name)
	if err != nil {
		return "", fmt.Errorf("lab: %w: %w", err, ErrMissingTool)
	}
	cmd := exec.CommandContext(l.ctx, p, args...)
	cmd.Env = append(os.Environ(), "LVM_SUPPRESS_FD_WARNINGS=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("lab: sample %s: %s %s: %w\n%s%s", l.name, name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

func (l *layout) needRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab: sample %s: the %s layout needs root (loop devices, mount): %w", l.name, l.name, ErrMissingTool)
	}
	return nil
}

func mkfile(name string, size int64) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyAt copies src into dst at off, keeping holes.
func (l *layout) copyAt(dst, src string, skip, off, count int64) error {
	args := []string{"if=" + src, "of=" + dst, "bs=1M", fmt.Sprintf("skip=%d", skip), fmt.Sprintf("seek=%d", off),
		"iflag=skip_bytes,count_bytes", "oflag=seek_bytes", "conv=notrunc,sparse", "status=none"}
	if count > 0 {
		args = append(args, fmt.Sprintf("count=%d", count))
	}
	_, err := l.run("dd", args...)
	return err
}

// populate formats img (mkfs...) and copies root into it through a loop
// mount of the given type.
func (l *layout) populate(img string, size int64, root, mountType string, mkfs ...string) error {
	if err := mkfile(img, size); err != nil {
		return err
	}
	if _, err := l.run(mkfs[0], append(mkfs[1:], img)...); err != nil {
		return err
	}
	mnt := filepath.Join(l.work, "mnt-"+mountType)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	if _, err := l.run("mount", "-t", mountType, "-o", "loop", img, mnt); err != nil {
		return err
	}
	mounted := true
	l.undo = append(l.undo, func() {
		if mounted {
			exec.Command("umount", mnt).Run()
		}
	})
	if _, err := l.run("cp", "-a", root+"/.", mnt+"/"); err != nil {
		return err
	}
	if _, err := l.run("umount", mnt); err != nil {
		return err
	}
	mounted = false
	return nil
}

func (l *layout) gpt(img string, capacity int64, typ string) error {
	if err := mkfile(img, capacity); err != nil {
		return err
	}
	_, err := l.run("sgdisk", "-o", fmt.Sprintf("-n=1:%d:+%dK", partStart/512, partSize(capacity)>>10), "-t=1:"+typ, img)
	return err
}

// makeNTFS: GPT, partition 1 "Microsoft basic data" holding NTFS (mkntfs,
// populated through an ntfs-3g mount).
func makeNTFS(ctx context.Context, s SampleVM, root, img string) error {
	l := &layout{ctx: ctx, name: s.Name, work: filepath.Dir(img)}
	defer l.cleanup()
	if err := l.needRoot(); err != nil {
		return err
	}
	label := strings.ToUpper(strings.ReplaceAll(s.Name, "-", ""))
	fsimg := filepath.Join(l.work, "ntfs.img")
	if err := l.populate(fsimg, partSize(s.Capacity), root, "ntfs-3g", "mkntfs", "-Q", "-F", "-q", "-L", label); err != nil {
		return err
	}
	if err := l.gpt(img, s.Capacity, "0700"); err != nil {
		return err
	}
	defer os.Remove(fsimg)
	return l.copyAt(img, fsimg, 0, partStart, 0)
}

// makeXFSLVM: GPT, partition 1 "Linux LVM" as the one PV of VG vg_<name>
// with LV root holding XFS, as RHEL installs. lvm2 writes the metadata
// without device-mapper (--driverloaded n); the XFS image is laid along
// the LV's extents where lvs says they are.
func makeXFSLVM(ctx context.Context, s SampleVM, root, img string) error {
	l := &layout{ctx: ctx, name: s.Name, work: filepath.Dir(img)}
	defer l.cleanup()
	if err := l.needRoot(); err != nil {
		return err
	}
	for _, t := range []string{"pvcreate", "vgcreate", "lvcreate", "lvs", "pvs", "losetup", "mkfs.xfs", "sgdisk"} {
		if _, err := lookTool(t); err != nil {
			return fmt.Errorf("lab: sample %s: %w: %w", s.Name, err, ErrMissingTool)
		}
	}
	if err := l.gpt(img, s.Capacity, "8e00"); err != nil {
		return err
	}
	pv := filepath.Join(l.work, "pv.img")
	psize := partSize(s.Capacity)
	if err := mkfile(pv, psize); err != nil {
		return err
	}
	out, err := l.run("losetup", "-f", "--show", pv)
	if err != nil {
		return err
	}
	dev := strings.TrimSpace(out)
	l.undo = append(l.undo, func() { exec.Command("losetup", "-d", dev).Run() })
	vg := "vg_" + strings.NewReplacer("-", "", ".", "").Replace(s.Name)
	only := "--devices=" + dev
	const extent = 4 << 20
	if _, err := l.run("pvcreate", only, "-q", dev); err != nil {
		return err
	}
	if _, err := l.run("vgcreate", only, "-q", "-s", "4M", vg, dev); err != nil {
		return err
	}
	// Leave room for the metadata area: the LV takes what the PV has left
	// but one extent.
	out, err = l.run("vgs", only, "--noheadings", "--units", "b", "--nosuffix", "-o", "vg_free_count", vg)
	if err != nil {
		return err
	}
	var free int64
	if _, err := fmt.Sscan(out, &free); err != nil || free < 8 {
		return fmt.Errorf("lab: sample %s: VG %s has %q free extents: disk too small", s.Name, vg, strings.TrimSpace(out))
	}
	lvExtents := free - 1
	if _, err := l.run("lvcreate", only, "-q", "--driverloaded", "n", "-an", "-Zn", "-l", fmt.Sprint(lvExtents), "-n", "root", vg); err != nil {
		return err
	}
	out, err = l.run("pvs", only, "--noheadings", "--units", "b", "--nosuffix", "-o", "pe_start", dev)
	if err != nil {
		return err
	}
	var peStart int64
	if _, err := fmt.Sscan(out, &peStart); err != nil {
		return fmt.Errorf("lab: sample %s: pe_start %q: %w", s.Name, out, err)
	}
	out, err = l.run("lvs", only, "--driverloaded", "n", "--noheadings", "-o", "seg_pe_ranges", vg+"/root")
	if err != nil {
		return err
	}
	xfs := filepath.Join(l.work, "xfs.img")
	if err := l.populate(xfs, lvExtents*extent, root, "xfs", "mkfs.xfs", "-q", "-f", "-L", strings.ReplaceAll(s.Name, "-", "")); err != nil {
		return err
	}
	defer os.Remove(xfs)
	var lvOff int64
	for _, r := range strings.Fields(out) {
		i := strings.LastIndexByte(r, ':')
		var a, b int64
		if i < 0 {
			continue
		}
		if _, err := fmt.Sscanf(r[i+1:], "%d-%d", &a, &b); err != nil {
			return fmt.Errorf("lab: sample %s: seg_pe_ranges %q: %w", s.Name, r, err)
		}
		n := (b - a + 1) * extent
		if err := l.copyAt(pv, xfs, lvOff, peStart+a*extent, n); err != nil {
			return err
		}
		lvOff += n
	}
	if lvOff != lvExtents*extent {
		return fmt.Errorf("lab: sample %s: LV segments cover %d bytes, want %d", s.Name, lvOff, lvExtents*extent)
	}
	// The VG leaves the host's view with its loop device (cleanup); the PV
	// goes into the partition.
	return l.copyAt(img, pv, 0, partStart, 0)
}
