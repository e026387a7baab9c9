package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup/imagebackup"
	"github.com/vmvault/vmvault/repository"
)

// TestImageRoundTrip backs up images made by real tools and restores them
// byte-identical: raw ext4 and FAT file systems, dense random data, and the
// ext4 image converted by qemu-img into each VMDK subformat vmvault reads.
func TestImageRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ext4 := makeExt4(t, dir, 64, 1, 2<<20)
	cases := []struct {
		name  string
		image string // what is backed up
		want  string // the raw bytes a restore must give back
	}{
		{"ext4 raw sparse", ext4, ext4},
		{"vfat raw", makeVFAT(t, dir, 48, 2), ""},
		{"random dense", makeRandom(t, dir, 9<<20+123, 3), ""},
		{"vmdk monolithicSparse", qemuConvert(t, ext4, "monolithicSparse"), ext4},
		{"vmdk streamOptimized", qemuConvert(t, ext4, "streamOptimized"), ext4},
		{"vmdk monolithicFlat", qemuConvert(t, ext4, "monolithicFlat"), ext4},
	}
	for _, encrypted := range []bool{true, false} {
		var repo string
		if encrypted {
			repo = initRepo(t)
		} else {
			repo = filepath.Join(t.TempDir(), "plain")
			if r := runCLIEnv(t, nil, "repo", "init", "--repo", repo, "--no-encryption"); r.code != 0 {
				t.Fatalf("init unencrypted: %s", r.stderr)
			}
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/encrypted=%v", tc.name, encrypted), func(t *testing.T) {
				want := tc.want
				if want == "" {
					want = tc.image
				}
				env := map[string]string{}
				if encrypted {
					env["VMVAULT_PASSWORD"] = testPassword
				}
				r := runCLIEnv(t, env, "image", "backup", "--repo", repo, "--vm", tc.name, "--json", tc.image)
				if r.code != 0 {
					t.Fatalf("backup: %s", r.stderr)
				}
				res := decodeJSON[imagebackup.Result](t, r.stdout)
				ws, _ := os.Stat(want)
				if res.LogicalBytes != ws.Size() {
					t.Errorf("logicalBytes = %d, want %d", res.LogicalBytes, ws.Size())
				}
				out := filepath.Join(t.TempDir(), "restored.img")
				if r := runCLIEnv(t, env, "image", "restore", "--repo", repo, "--restore-point", res.RestorePoint, out); r.code != 0 {
					t.Fatalf("restore: %s", r.stderr)
				}
				assertSameFile(t, want, out)
				if want == ext4 {
					assertSparse(t, out)
				}
			})
		}
	}
}

// assertSparse checks that a restored sparse image did not write its holes.
func assertSparse(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	allocated := st.Sys().(*syscall.Stat_t).Blocks * 512
	if allocated >= st.Size()/2 {
		t.Errorf("restored image allocates %d of %d bytes: holes were written", allocated, st.Size())
	}
}

// changedRanges compares two images at 4 KiB granularity, as CBT would
// report the blocks a guest wrote.
func changedRanges(t *testing.T, a, b string) ([]map[string]int64, int64) {
	t.Helper()
	ab, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ab) != len(bb) {
		t.Fatalf("images differ in size: %d vs %d", len(ab), len(bb))
	}
	const blk = 4096
	var out []map[string]int64
	var total int64
	for off := 0; off < len(ab); off += blk {
		end := min(off+blk, len(ab))
		if string(ab[off:end]) == string(bb[off:end]) {
			continue
		}
		n := int64(end - off)
		total += n
		if k := len(out); k > 0 && out[k-1]["offset"]+out[k-1]["length"] == int64(off) {
			out[k-1]["length"] += n
			continue
		}
		out = append(out, map[string]int64{"offset": int64(off), "length": n})
	}
	return out, total
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	runTool(t, "cp", "--sparse=always", src, dst)
}

// TestIncrementalChanged changes an ext4 image in place the way a guest would
// (debugfs writing new files and rewriting one), hands the changed blocks to
// `--changed`, and checks that only those bytes are read and that both
// restore points restore byte-identical.
func TestIncrementalChanged(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	v1 := makeExt4(t, dir, 96, 21, 4<<20)
	base := decodeJSON[imagebackup.Result](t, mustCLI(t, "image", "backup", "--repo", repo, "--vm", "vm1", "--json", v1))

	v2 := filepath.Join(dir, "v2.img")
	copyFile(t, v1, v2)
	newFile := makeRandom(t, dir, 3<<20, 22)
	script := filepath.Join(dir, "debugfs.cmds")
	cmds := fmt.Sprintf("write %s newdata.bin\nmkdir logs\nwrite %s logs/app.log\n", newFile, filepath.Join(dir, "tree-21", "etc", "app0", "conf0.cfg"))
	if err := os.WriteFile(script, []byte(cmds), 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, "debugfs", "-w", "-f", script, v2)
	changed, changedBytes := changedRanges(t, v1, v2)
	if changedBytes < 3<<20 {
		t.Fatalf("debugfs changed only %d bytes", changedBytes)
	}
	cj, _ := json.Marshal(changed)
	changedPath := filepath.Join(dir, "changed.json")
	if err := os.WriteFile(changedPath, cj, 0o644); err != nil {
		t.Fatal(err)
	}
	inc := decodeJSON[imagebackup.Result](t, mustCLI(t, "image", "backup", "--repo", repo, "--vm", "vm1", "--json",
		"--parent", base.RestorePoint, "--changed", changedPath, v2))
	if inc.BytesRead != changedBytes {
		t.Errorf("incremental read %d bytes from the image, CBT reported %d changed", inc.BytesRead, changedBytes)
	}
	if inc.Disks[0].Mode != "incremental" {
		t.Errorf("mode = %q, want incremental", inc.Disks[0].Mode)
	}
	if inc.StoredBytesAdded > 3*changedBytes {
		t.Errorf("incremental stored %d bytes for %d changed bytes", inc.StoredBytesAdded, changedBytes)
	}
	for _, tc := range []struct{ id, want string }{{base.RestorePoint, v1}, {inc.RestorePoint, v2}} {
		out := filepath.Join(t.TempDir(), "out.img")
		mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", tc.id, out)
		assertSameFile(t, tc.want, out)
	}
	list := decodeJSON[[]pointJSON](t, mustCLI(t, "repo", "list", "--repo", repo, "--json"))
	if len(list) != 2 || list[1].Parent != base.RestorePoint || list[0].ID != base.RestorePoint {
		t.Fatalf("repo list = %+v, want the base then its incremental child", list)
	}
}

// TestSecondBackup: backing up an unchanged image again reads nothing (its
// file identity matches the last restore point); --force-read re-reads it
// and dedup stores no new bytes; a modified image is read again.
func TestSecondBackup(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	img := makeExt4(t, dir, 64, 31, 3<<20)
	backup := func(extra ...string) imagebackup.Result {
		t.Helper()
		args := append([]string{"image", "backup", "--repo", repo, "--vm", "a", "--json"}, extra...)
		return decodeJSON[imagebackup.Result](t, mustCLI(t, append(args, img)...))
	}
	first := backup()
	if first.NewBytes == 0 || first.Disks[0].Mode != "allocated" {
		t.Fatalf("first backup: %+v", first)
	}
	second := backup()
	if second.Disks[0].Mode != "unchanged" || second.BytesRead != 0 || second.Parent != first.RestorePoint {
		t.Errorf("second backup of an unchanged image: mode %q, read %d, parent %q", second.Disks[0].Mode, second.BytesRead, second.Parent)
	}
	forced := backup("--force-read")
	if forced.BytesRead == 0 || forced.NewBytes != 0 || forced.StoredBytesAdded > 64<<10 {
		t.Errorf("forced re-read: read %d, new %d, stored %d; want a full read that dedups to nothing", forced.BytesRead, forced.NewBytes, forced.StoredBytesAdded)
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("guest wrote this"), 40<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	changed := backup()
	if changed.Disks[0].Mode == "unchanged" || changed.NewBytes == 0 {
		t.Errorf("modified image was not read again: %+v", changed.Disks[0])
	}
	for _, id := range []string{second.RestorePoint, changed.RestorePoint} {
		out := filepath.Join(t.TempDir(), "out.img")
		mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", id, out)
		if id == changed.RestorePoint {
			assertSameFile(t, img, out)
		}
	}
}

// TestCLIBadInput: every bad input gets a clear error, a non-zero exit, and
// leaves the repository as it was.
func TestCLIBadInput(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	img := makeRandom(t, dir, 1<<20, 41)
	first := decodeJSON[imagebackup.Result](t, mustCLI(t, "image", "backup", "--repo", repo, "--vm", "a", "--json", img))
	badJSON := filepath.Join(dir, "bad.json")
	os.WriteFile(badJSON, []byte(`[{"offset": 5}]`), 0o644)
	outside := filepath.Join(dir, "outside.json")
	os.WriteFile(outside, []byte(`[{"offset": 1048000, "length": 4096}]`), 0o644)
	okChanged := filepath.Join(dir, "ok.json")
	os.WriteFile(okChanged, []byte(`[{"offset": 0, "length": 4096}]`), 0o644)
	garbage := filepath.Join(dir, "garbage.vmdk")
	os.WriteFile(garbage, append([]byte("KDMV"), make([]byte, 600)...), 0o644)
	wrongPw := filepath.Join(dir, "wrong.pw")
	os.WriteFile(wrongPw, []byte("not the passphrase\n"), 0o600)

	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string // in stderr
	}{
		{"no repo flag", nil, []string{"repo", "list"}, "--repo is required"},
		{"wrong passphrase", nil, []string{"repo", "list", "--repo", repo, "--password-file", wrongPw}, "passphrase"},
		{"no passphrase", map[string]string{}, []string{"repo", "list", "--repo", repo}, "encrypted"},
		{"missing image", nil, []string{"image", "backup", "--repo", repo, "--vm", "a", filepath.Join(dir, "nope.img")}, "nope.img"},
		{"hostile vmdk", nil, []string{"image", "backup", "--repo", repo, "--vm", "a", garbage}, "garbage.vmdk"},
		{"changed without parent", nil, []string{"image", "backup", "--repo", repo, "--vm", "a", "--changed", badJSON, img}, "--changed needs --parent"},
		{"changed malformed", nil, []string{"image", "backup", "--repo", repo, "--vm", "a", "--parent", first.RestorePoint, "--changed", badJSON, img}, "offset and length"},
		{"changed outside disk", nil, []string{"image", "backup", "--repo", repo, "--vm", "a", "--parent", first.RestorePoint, "--changed", outside, img}, "outside"},
		{"unknown parent", nil, []string{"image", "backup", "--repo", repo, "--vm", "a", "--parent", "ffffffff", "--changed", okChanged, img}, `--parent: restore point "ffffffff"`},
		{"unknown point", nil, []string{"image", "restore", "--repo", repo, "--restore-point", "ffffffff", filepath.Join(dir, "o")}, "ffffffff"},
		{"disk out of range", nil, []string{"image", "restore", "--repo", repo, "--restore-point", first.RestorePoint, "--disk", "3", filepath.Join(dir, "o")}, "--disk 3"},
		{"unknown flag", nil, []string{"repo", "list", "--repo", repo, "--bogus"}, "bogus"},
		{"unknown command", nil, []string{"repo", "frobnicate"}, "unknown command"},
		{"init existing", nil, []string{"repo", "init", "--repo", repo}, repo},
		{"polynomial not hex", nil, []string{"repo", "init", "--repo", filepath.Join(dir, "r2"), "--chunker-polynomial", "zz"}, "not a hex number"},
		{"polynomial reducible", nil, []string{"repo", "init", "--repo", filepath.Join(dir, "r3"), "--chunker-polynomial", "12345"}, "polynomial"},
		{"unknown id function", nil, []string{"repo", "init", "--repo", filepath.Join(dir, "r4"), "--id-function", "md5"}, `--id-function "md5"`},
		{"id function unencrypted", map[string]string{}, []string{"repo", "init", "--repo", filepath.Join(dir, "r5"), "--no-encryption", "--id-function", "hmac-sha256"}, "encrypted repositories"},
	}
	before := mustCLI(t, "repo", "stats", "--repo", repo, "--json")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = map[string]string{"VMVAULT_PASSWORD": testPassword}
			}
			r := runCLIEnv(t, env, tc.args...)
			if r.code == 0 {
				t.Fatalf("exit 0, want failure; stdout: %s", r.stdout)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not mention %q", r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "panic") {
				t.Errorf("panic: %s", r.stderr)
			}
		})
	}
	if after := mustCLI(t, "repo", "stats", "--repo", repo, "--json"); after != before {
		t.Errorf("bad input changed the repository:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := os.Stat(filepath.Join(dir, "o")); !os.IsNotExist(err) {
		t.Errorf("a failed restore left its output file behind (err %v)", err)
	}
}

// TestLockDeleteReclaim: a locked point cannot be deleted; deleting the
// other and reclaiming frees its bytes; the survivor still restores.
func TestLockDeleteReclaim(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	a := makeRandom(t, dir, 4<<20, 51)
	b := makeRandom(t, dir, 4<<20, 52)
	pa := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "a", a))
	pb := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "b", b))
	mustCLI(t, "repo", "lock", "--repo", repo, pa)
	if r := runCLI(t, "repo", "delete", "--repo", repo, pa); r.code == 0 {
		t.Fatal("deleting a locked restore point succeeded")
	}
	list := decodeJSON[[]pointJSON](t, mustCLI(t, "repo", "list", "--repo", repo, "--json"))
	if len(list) != 2 || !list[0].Locked || list[1].Locked {
		t.Fatalf("after lock: %+v", list)
	}
	type stats struct {
		DiskBytes int64 `json:"diskBytes"`
	}
	before := decodeJSON[stats](t, mustCLI(t, "repo", "stats", "--repo", repo, "--json"))
	mustCLI(t, "repo", "delete", "--repo", repo, pb)
	mustCLI(t, "repo", "reclaim", "--repo", repo)
	after := decodeJSON[stats](t, mustCLI(t, "repo", "stats", "--repo", repo, "--json"))
	if before.DiskBytes-after.DiskBytes < 4<<20 {
		t.Errorf("reclaim freed %d bytes, want at least the 4 MiB of the deleted point", before.DiskBytes-after.DiskBytes)
	}
	mustCLI(t, "repo", "check", "--repo", repo, "--read-data")
	out := filepath.Join(dir, "a.out")
	mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", pa, out)
	assertSameFile(t, a, out)
	mustCLI(t, "repo", "unlock", "--repo", repo, pa)
	mustCLI(t, "repo", "delete", "--repo", repo, pa)
	if list := decodeJSON[[]pointJSON](t, mustCLI(t, "repo", "list", "--repo", repo, "--json")); len(list) != 0 {
		t.Fatalf("points left after deleting all: %+v", list)
	}
}

// TestSecondWriterRefused: a repository held open by one process refuses a
// second writer with a clear message. The holder is a child process, so the
// lock is proven across processes.
func TestSecondWriterRefused(t *testing.T) {
	bin := applianceBinary(t)
	repo := initRepo(t)
	img := makeRandom(t, t.TempDir(), 1<<20, 61)
	_ = bin
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "VMVAULT_PASSWORD="+testPassword, "VMVAULT_TEST_HOLD_REPO="+repo)
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	buf := make([]byte, 64)
	if n, err := stdout.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "holding") {
		t.Fatalf("holder did not start: %q %v", buf[:n], err)
	}
	r := runCLI(t, "image", "backup", "--repo", repo, "--vm", "a", img)
	if r.code == 0 {
		t.Fatal("a second writer was allowed while another process holds the repository")
	}
	if !strings.Contains(r.stderr, "in use") && !strings.Contains(r.stderr, "locked") {
		t.Errorf("refusal does not say the repository is in use: %q", r.stderr)
	}
}

// TestRepoInitIDFunction: `repo init` writes keyed BLAKE3 ids unless told
// --id-function hmac-sha256 (what vmvault before format 1.3 reads), and
// both back up and restore.
func TestRepoInitIDFunction(t *testing.T) {
	img := makeRandom(t, t.TempDir(), 3<<20+17, 5)
	for _, tc := range []struct{ flag, want string }{
		{"", "blake3-keyed"},
		{"hmac-sha256", "hmac-sha256"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			var extra []string
			if tc.flag != "" {
				extra = []string{"--id-function", tc.flag}
			}
			repo := initRepo(t, extra...)
			b, err := os.ReadFile(filepath.Join(repo, "config"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"id_mac": "`+tc.want+`"`) {
				t.Fatalf("config does not name id_mac %s:\n%s", tc.want, b)
			}
			res := decodeJSON[imagebackup.Result](t, mustCLI(t, "image", "backup", "--repo", repo, "--vm", "v", "--json", img))
			out := filepath.Join(t.TempDir(), "out.img")
			mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", res.RestorePoint, out)
			assertSameFile(t, img, out)
		})
	}
}

// A time lock (set through the API) outlives `repo unlock`: the command
// fails naming the date instead of printing "unlock: ID" and exiting 0
// (audit 2, defect 4), and `repo list` shows the date.
func TestUnlockRefusedUnderTimeLock(t *testing.T) {
	repo := initRepo(t)
	img := makeRandom(t, t.TempDir(), 1<<20, 71)
	id := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "a", img))
	r, err := repository.Open(context.Background(), repo, []byte(testPassword), repository.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	if err := r.LockUntil(context.Background(), id, until); err != nil {
		t.Fatal(err)
	}
	r.Close()
	res := runCLI(t, "repo", "unlock", "--repo", repo, id)
	if res.code == 0 || strings.Contains(res.stdout, "unlock:") || !strings.Contains(res.stderr, until.Format(time.RFC3339)) {
		t.Fatalf("unlock under a time lock: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	list := decodeJSON[[]pointJSON](t, mustCLI(t, "repo", "list", "--repo", repo, "--json"))
	if len(list) != 1 || !list[0].Locked || list[0].LockedUntil == nil || !list[0].LockedUntil.Equal(until) {
		t.Fatalf("repo list --json: %+v", list)
	}
	if out := mustCLI(t, "repo", "list", "--repo", repo); !strings.Contains(out, "locked until "+until.Local().Format(time.DateTime)) {
		t.Errorf("repo list does not show the date:\n%s", out)
	}
}

// extend-locks is for immutable repositories: elsewhere it says why it has
// nothing to do instead of reporting a pass.
func TestExtendLocksNeedsObjectLock(t *testing.T) {
	repo := initRepo(t)
	res := runCLI(t, "repo", "extend-locks", "--repo", repo)
	if res.code == 0 || !strings.Contains(res.stderr, "no object lock") {
		t.Fatalf("extend-locks on a local repository: exit %d, stderr %q", res.code, res.stderr)
	}
}
