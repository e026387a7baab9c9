package vsphere

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// fakeSysfs lays out a Linux guest's device tree under a temp root.
func fakeSysfs(t *testing.T, files map[string]string, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range links {
		full := filepath.Join(root, link)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, target), full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestSysfsLocator(t *testing.T) {
	const uuid = "6000C29d-8e2b-1a4f-95c3-0123456789ab"
	cases := []struct {
		name  string
		files map[string]string
		links map[string]string
		want  string // relative to root, "" for none
	}{
		{"by-id scsi wwid link", map[string]string{"dev/sdb": "", "dev/sdb1": ""},
			map[string]string{"dev/disk/by-id/scsi-36000c29d8e2b1a4f95c30123456789ab": "dev/sdb",
				"dev/disk/by-id/scsi-36000c29d8e2b1a4f95c30123456789ab-part1": "dev/sdb1"}, "dev/sdb"},
		{"sysfs wwid", map[string]string{"sys/block/sdc/device/wwid": "naa.6000c29d8e2b1a4f95c30123456789ab\n",
			"sys/block/sda/device/wwid": "naa.6000c2900000000000000000000000aa\n"}, nil, "dev/sdc"},
		{"sysfs serial", map[string]string{"sys/block/sdd/device/serial": "6000c29d8e2b1a4f95c30123456789ab"}, nil, "dev/sdd"},
		{"other disks only", map[string]string{"sys/block/sda/device/wwid": "naa.6000c2900000000000000000000000aa\n"}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := fakeSysfs(t, c.files, c.links)
			got, err := SysfsLocator{Root: root}.Locate(context.Background(), uuid)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if c.want != "" {
				want = filepath.Join(root, c.want)
			}
			if got != want {
				t.Fatalf("Locate = %q, want %q", got, want)
			}
		})
	}
}

func TestSysfsLocatorRescanAndForget(t *testing.T) {
	root := fakeSysfs(t, map[string]string{
		"sys/class/scsi_host/host0/scan": "", "sys/class/scsi_host/host1/scan": "",
		"sys/block/sdb/device/delete": "",
	}, nil)
	l := SysfsLocator{Root: root}
	if err := l.Rescan(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"host0", "host1"} {
		b, _ := os.ReadFile(filepath.Join(root, "sys/class/scsi_host", h, "scan"))
		if string(b) != "- - -" {
			t.Fatalf("%s scan = %q", h, b)
		}
	}
	if err := l.Forget(context.Background(), filepath.Join(root, "dev/sdb")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sys/block/sdb/device/delete")); string(b) != "1" {
		t.Fatalf("delete = %q", b)
	}
	if err := l.Forget(context.Background(), "/dev/nothere"); err != nil {
		t.Fatalf("Forget of a non-SCSI device: %v", err)
	}
}

func TestSwapUUID(t *testing.T) {
	got := swapUUID("421a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8")
	if want := "3c2b1a42-5e4d-706f-8192-a3b4c5d6e7f8"; got != want {
		t.Fatalf("swapUUID = %s, want %s", got, want)
	}
	if swapUUID("nonsense") != "" {
		t.Fatal("swapUUID accepted a non-UUID")
	}
}
