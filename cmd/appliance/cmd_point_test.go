package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/service/verify"
)

// verifyDisk makes an MBR disk (sfdisk) with an ext4 partition made by
// mkfs.ext4 -d from a tree and a partition of random bytes; damage, if
// set, runs on the ext4 image before it goes in.
func verifyDisk(t *testing.T, damage func(img string)) string {
	t.Helper()
	guestfstest.Need(t, false, "mkfs.ext4", "sfdisk", "dd", "debugfs")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, BigDir: 100})
	img := filepath.Join(dir, "ext4.img")
	guestfstest.Ext4(t, img, src, 24, "-b", "4096", "-L", "root")
	if damage != nil {
		damage(img)
	}
	rnd := make([]byte, 2<<20)
	rand.Read(rnd)
	rndImg := filepath.Join(dir, "random.img")
	if err := os.WriteFile(rndImg, rnd, 0o644); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, "disk.img")
	guestfstest.MBR(t, disk, 32, guestfstest.Part{SizeMiB: 24, Type: "83", Image: img}, guestfstest.Part{SizeMiB: 2, Type: "83", Image: rndImg})
	return disk
}

func TestPointVerifyCLI(t *testing.T) {
	repo := initRepo(t)
	good := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "web01", verifyDisk(t, nil)))

	out := mustCLI(t, "point", "verify", "--repo", repo, "--restore-point", good[:12])
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "d0p1") || !strings.Contains(lines[0], "ext4") || !strings.Contains(lines[0], "root") ||
		!strings.Contains(lines[0], "passed") || !strings.HasPrefix(lines[1], "d0p2") || !strings.Contains(lines[1], "skipped  no known file system") ||
		!strings.HasPrefix(lines[2], "passed: 1 volume(s) walked without errors") {
		t.Fatalf("output:\n%s", out)
	}
	rep := decodeJSON[verify.Report](t, mustCLI(t, "point", "verify", "--repo", repo, "--restore-point", good, "--read-data", "--json"))
	if !rep.Passed || !rep.ReadData || rep.RestorePoint != good || len(rep.Volumes) != 2 || rep.Volumes[0].Files == 0 || rep.Volumes[0].BytesRead == 0 {
		t.Fatalf("report %+v", rep)
	}

	// /etc's directory block overwritten: exit 1, the volume and the path named.
	bad := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "web02", verifyDisk(t, func(img string) {
		out, err := exec.Command("debugfs", "-R", "blocks /etc", img).Output()
		if err != nil {
			t.Fatal(err)
		}
		blk, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(img, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xFF}, 4096), blk*4096); err != nil {
			t.Fatal(err)
		}
	})))
	res := runCLI(t, "point", "verify", "--repo", repo, "--restore-point", bad)
	if res.code != 1 || !strings.Contains(res.stdout, "failed: 1 of 2 volume(s) failed: d0p1 (ext4)") || !strings.Contains(res.stderr, "d0p1: /etc: readdir:") ||
		!strings.Contains(res.stderr, "verification failed") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	res = runCLI(t, "point", "verify", "--repo", repo, "--restore-point", bad, "--json")
	var jr verify.Report
	if err := json.Unmarshal([]byte(res.stdout), &jr); err != nil || res.code != 1 || jr.Passed || jr.Volumes[0].Errors[0].Path != "/etc" {
		t.Fatalf("--json: exit %d, %v, %+v", res.code, err, jr)
	}

	for _, args := range [][]string{
		{"point", "verify", "--repo", repo},
		{"point", "verify", "--repo", repo, "--restore-point", good, "extra"},
	} {
		if res := runCLI(t, args...); res.code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, res.code, res.stderr)
		}
	}
	if res := runCLI(t, "point", "verify", "--repo", repo, "--restore-point", "ffffffffffff"); res.code != 1 ||
		!strings.Contains(res.stderr, "not found") || repeatedPhrase(res.stderr) != "" {
		t.Errorf("unknown point: exit %d (%s)", res.code, res.stderr)
	}
}
