package guestfstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// LVPart is one segment of a logical volume: SizeMiB on PV number PV.
type LVPart struct {
	PV      int
	SizeMiB int
}

// LV is a logical volume to create, segment by segment (lvcreate, then
// lvextend onto the next PV), and the file-system image to lay along its
// extents, if any.
type LV struct {
	Name  string
	Parts []LVPart
	Image string
}

// PVSpec is where a PV lives: a whole image file, or Size bytes at Offset.
type PVSpec struct {
	Image        string
	Offset, Size int64
}

// LVM makes each PVSpec a PV through a loop device, creates VG vg with
// 4 MiB extents and the LVs without device-mapper (--driverloaded n), then
// copies each LV's image along the PE ranges lvs reports. Loop devices are
// detached before it returns; LVM commands see only those devices.
func LVM(t testing.TB, vg string, pvs []PVSpec, lvs ...LV) {
	t.Helper()
	var devs []string
	defer func() {
		for _, d := range devs {
			exec.Command("losetup", "-d", d).Run()
		}
	}()
	for _, p := range pvs {
		args := []string{"-f", "--show"}
		if p.Size > 0 {
			args = append(args, "-o", fmt.Sprint(p.Offset), "--sizelimit", fmt.Sprint(p.Size))
		}
		devs = append(devs, strings.TrimSpace(Run(t, "losetup", append(args, p.Image)...)))
	}
	only := "--devices=" + strings.Join(devs, ",")
	lvmRun := func(cmd string, args ...string) string {
		t.Helper()
		c := exec.Command(cmd, append([]string{only}, args...)...)
		c.Env = append(os.Environ(), "LVM_SUPPRESS_FD_WARNINGS=1")
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s%s", cmd, strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	lvmRun("pvcreate", append([]string{"-q"}, devs...)...)
	lvmRun("vgcreate", append([]string{"-q", "-s", "4M", vg}, devs...)...)
	for _, lv := range lvs {
		for i, p := range lv.Parts {
			if i == 0 {
				lvmRun("lvcreate", "-q", "--driverloaded", "n", "-an", "-Zn", "-L", fmt.Sprintf("%dM", p.SizeMiB), "-n", lv.Name, vg, devs[p.PV])
			} else {
				lvmRun("lvextend", "-q", "--driverloaded", "n", "-L", fmt.Sprintf("+%dM", p.SizeMiB), vg+"/"+lv.Name, devs[p.PV])
			}
		}
	}
	peStart := map[string]int64{}
	for _, l := range strings.Split(lvmRun("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "pv_name,pe_start"), "\n") {
		var name string
		var start int64
		if n, _ := fmt.Sscan(l, &name, &start); n == 2 {
			peStart[name] = start
		}
	}
	const extent = 4 << 20
	for _, lv := range lvs {
		if lv.Image == "" {
			continue
		}
		out := lvmRun("lvs", "--driverloaded", "n", "--noheadings", "-o", "seg_pe_ranges", vg+"/"+lv.Name)
		var lvOff int64
		for _, l := range strings.Fields(out) {
			// /dev/loop3:0-9
			i := strings.LastIndexByte(l, ':')
			var a, b int64
			if i < 0 {
				continue
			}
			if _, err := fmt.Sscanf(l[i+1:], "%d-%d", &a, &b); err != nil {
				t.Fatalf("seg_pe_ranges %q: %v", l, err)
			}
			dev := l[:i]
			pi := -1
			for k, d := range devs {
				if d == dev {
					pi = k
				}
			}
			if pi < 0 {
				t.Fatalf("segment on unknown device %s", dev)
			}
			n := (b - a + 1) * extent
			at := pvs[pi].Offset + peStart[dev] + a*extent
			Run(t, "dd", "if="+lv.Image, "of="+pvs[pi].Image, "bs=1M", fmt.Sprintf("skip=%d", lvOff), fmt.Sprintf("seek=%d", at),
				fmt.Sprintf("count=%d", n), "iflag=skip_bytes,count_bytes", "oflag=seek_bytes", "conv=notrunc,sparse", "status=none")
			lvOff += n
		}
	}
}
