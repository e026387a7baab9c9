package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// filesPoint backs up two real disks into a real repository: a GPT disk
// with an EFI-type partition and an ext4 partition, and an MBR disk with
// ext4 in logical partition 5.
func filesPoint(t *testing.T) (repo, point, src string) {
	t.Helper()
	guestfstest.Need(t, false, "mkfs.ext4", "sgdisk", "sfdisk", "dd")
	dir := t.TempDir()
	src = filepath.Join(dir, "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, Unicode: true, BigDir: 2000, SparseMiB: 32, Modes: true})
	fsimg := filepath.Join(dir, "ext4.img")
	guestfstest.Ext4(t, fsimg, src, 96)
	gpt := filepath.Join(dir, "gpt.img")
	guestfstest.GPT(t, gpt, 160, guestfstest.Part{SizeMiB: 32, Type: "ef00"}, guestfstest.Part{SizeMiB: 100, Type: "8300", Image: fsimg})
	mbr := filepath.Join(dir, "mbr.img")
	guestfstest.MBR(t, mbr, 240, guestfstest.Part{SizeMiB: 16, Type: "83"}, guestfstest.Part{SizeMiB: 16, Type: "82"},
		guestfstest.Part{SizeMiB: 16, Type: "83"}, guestfstest.Part{SizeMiB: 100, Type: "83", Image: fsimg})
	repo = initRepo(t)
	out := mustCLI(t, "image", "backup", "--repo", repo, "--vm", "web01", gpt, mbr)
	return repo, lastLine(out), src
}

func TestFilesCLI(t *testing.T) {
	repo, point, src := filesPoint(t)
	base := []string{"--repo", repo, "--restore-point", point}

	var vols []guestfs.Volume
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"files", "volumes", "--json"}, base...)...)), &vols); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vols {
		got[v.ID] = v.FS
	}
	for id, kind := range map[string]string{"d0p1": guestfs.KindUnknown, "d0p2": guestfs.KindExt4, "d1p1": guestfs.KindUnknown, "d1p2": guestfs.KindUnknown, "d1p5": guestfs.KindUnknown, "d1p6": guestfs.KindExt4} {
		if got[id] != kind {
			t.Errorf("volume %s: fs %q, want %q (all: %+v)", id, got[id], kind, vols)
		}
	}
	mustCLI(t, append([]string{"files", "volumes"}, base...)...) // the table form works too

	for _, vol := range []string{"d0p2", "d1p6"} {
		t.Run(vol, func(t *testing.T) {
			vb := append(append([]string{}, base...), "--volume", vol)
			var ents []guestfs.Entry
			if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"files", "ls", "--json"}, append(vb, "/etc")...)...)), &ents); err != nil {
				t.Fatal(err)
			}
			names := map[string]guestfs.Entry{}
			for _, e := range ents {
				names[e.Name] = e
			}
			if e := names["host-link"]; e.Type != "symlink" || e.Target != "hostname" {
				t.Errorf("ls /etc: host-link = %+v", e)
			}
			if e := names["hostname"]; e.Type != "file" || e.Size != 6 || e.Mtime.Year() != 2024 {
				t.Errorf("ls /etc: hostname = %+v", e)
			}
			if raw := mustCLI(t, append([]string{"files", "ls", "--json"}, append(vb, "/etc/nginx")...)...); !strings.Contains(raw, `"mode": "0600"`) {
				t.Errorf("ls --json: no octal mode for nginx: %s", raw)
			}

			out := t.TempDir()
			// One file.
			one := filepath.Join(out, "random.bin")
			mustCLI(t, append([]string{"files", "get"}, append(vb, "--output", one, "/data/random-1m.bin")...)...)
			sameFile(t, filepath.Join(src, "data/random-1m.bin"), one)
			// A sparse file stays sparse.
			sp := filepath.Join(out, "sparse")
			mustCLI(t, append([]string{"files", "get"}, append(vb, "--output", sp, "/sparse.img")...)...)
			sameFile(t, filepath.Join(src, "sparse.img"), sp)
			assertSparse(t, sp)
			// The whole volume into a new directory.
			tree := filepath.Join(out, "tree")
			mustCLI(t, append([]string{"files", "get"}, append(vb, "--output", tree, "/")...)...)
			os.RemoveAll(filepath.Join(tree, "lost+found"))
			sameTree(t, src, tree)
			assertSparse(t, filepath.Join(tree, "sparse.img"))
			// Several paths into a .tar and a .zip.
			for _, ext := range []string{".tar", ".zip"} {
				a := filepath.Join(out, "sel"+ext)
				mustCLI(t, append([]string{"files", "get"}, append(vb, "--output", a, "/etc", "/data", "/unicode", "/escape-link")...)...)
				x := filepath.Join(out, "x"+ext)
				extract(t, a, x)
				for _, d := range []string{"etc", "data", "unicode"} {
					sameTree(t, filepath.Join(src, d), filepath.Join(x, d))
				}
				if l, err := os.Readlink(filepath.Join(x, "escape-link")); err != nil || l != "../../../../../../etc/passwd" {
					t.Errorf("%s: escape-link = %q, %v", ext, l, err)
				}
			}
		})
	}

	// Bad input: a clear usage error, nothing written.
	vb := append(append([]string{}, base...), "--volume", "d0p2")
	dst := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		append([]string{"files", "get", "--output", dst, "/../etc"}, vb...),
		append([]string{"files", "ls", "../.."}, vb...),
		append([]string{"files", "ls", "--volume", "d9p9"}, base...),
	} {
		if r := runCLI(t, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	if r := runCLI(t, append([]string{"files", "ls", "/no/such"}, vb...)...); r.code != 1 || !strings.Contains(r.stderr, "not exist") {
		t.Errorf("ls missing: exit %d: %s", r.code, r.stderr)
	}
	if r := runCLI(t, append([]string{"files", "ls"}, append(base, "--volume", "d1p2")...)...); r.code == 0 || !strings.Contains(r.stderr, "cannot be browsed") {
		t.Errorf("ls on an unknown volume: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Lstat(dst); !os.IsNotExist(err) {
		t.Errorf("a refused get left %s behind", dst)
	}
	existing := t.TempDir()
	if r := runCLI(t, append([]string{"files", "get", "--output", existing, "/etc"}, vb...)...); r.code != 2 {
		t.Errorf("get over an existing OUT: exit %d", r.code)
	}
}

func sameFile(t *testing.T, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("%s: %d bytes differ from %s (%d bytes)", got, len(b), want, len(a))
	}
	wi, _ := os.Stat(want)
	gi, _ := os.Stat(got)
	if wi.Mode().Perm() != gi.Mode().Perm() || !wi.ModTime().Equal(gi.ModTime()) {
		t.Errorf("%s: mode %v mtime %v, want %v %v", got, gi.Mode(), gi.ModTime(), wi.Mode(), wi.ModTime())
	}
}

// sameTree compares two directory trees: names, types, bytes, link targets,
// file modes and mtimes.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		g := filepath.Join(got, rel)
		gi, err := os.Lstat(g)
		if err != nil {
			t.Fatalf("missing %s: %v", rel, err)
		}
		if gi.Mode().Type() != d.Type() {
			t.Fatalf("%s: type %v, want %v", rel, gi.Mode().Type(), d.Type())
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			a, _ := os.Readlink(p)
			b, _ := os.Readlink(g)
			if a != b {
				t.Fatalf("%s: link %q, want %q", rel, b, a)
			}
		case d.Type().IsRegular():
			sameFile(t, p, g)
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	filepath.WalkDir(got, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(got, p)
		if _, err := os.Lstat(filepath.Join(want, rel)); err != nil {
			extra = append(extra, rel)
		}
		return nil
	})
	if len(extra) > 0 {
		t.Fatalf("%s holds more than %s: %q", got, want, extra)
	}
	if n == 0 {
		t.Fatalf("no files compared under %s", want)
	}
}

// extract unpacks a .tar or .zip (made by files get) into dir, with modes,
// mtimes and symlinks.
func extract(t *testing.T, archive, dir string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	type ent struct {
		name, link string
		mode       fs.FileMode
		mtime      int64
		data       []byte
		dir        bool
	}
	var ents []ent
	if strings.HasSuffix(archive, ".tar") {
		f, err := os.Open(archive)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			ents = append(ents, ent{name: h.Name, link: h.Linkname, mode: fs.FileMode(h.Mode).Perm(), mtime: h.ModTime.UnixNano(),
				data: b, dir: h.Typeflag == tar.TypeDir})
		}
	} else {
		zr, err := zip.OpenReader(archive)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, zf := range zr.File {
			rc, _ := zf.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			e := ent{name: zf.Name, mode: zf.Mode().Perm(), mtime: zf.Modified.UnixNano(), data: b, dir: zf.Mode().IsDir()}
			if zf.Mode()&fs.ModeSymlink != 0 {
				e.link = string(b)
			}
			ents = append(ents, e)
		}
	}
	for _, e := range ents {
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(e.name, "/")))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("archive entry %q escapes", e.name)
		}
		switch {
		case e.dir:
			os.MkdirAll(p, 0o755)
		case e.link != "":
			if err := os.Symlink(e.link, p); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, e.data, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, e.mode)
			mt := timeUnixNano(e.mtime)
			os.Chtimes(p, mt, mt)
		}
	}
}

func timeUnixNano(n int64) time.Time { return time.Unix(0, n) }

// TestFilesMount mounts a restore point through FUSE and compares the tree
// with cp-like reads, then unmounts on cancel.
func TestFilesMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skipf("SKIP: FUSE needs /dev/fuse and root (%v, uid %d)", err, os.Geteuid())
	}
	repo, point, src := filesPoint(t)
	mnt := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan cliResult, 1)
	go func() {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
			return map[string]string{"VMVAULT_PASSWORD": testPassword}[k]
		}}
		code := run(ctx, env, []string{"files", "mount", "--repo", repo, "--restore-point", point, mnt})
		done <- cliResult{code: code, stdout: out.String(), stderr: errb.String()}
	}()
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(mnt, "d0p2", "etc")); err == nil {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("mount ended: %d %s %s", r.code, r.stdout, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("not mounted after 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	tree := filepath.Join(mnt, "d1p6")
	os.RemoveAll(filepath.Join(t.TempDir(), "x"))
	copyTree := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", tree, copyTree).CombinedOutput(); err != nil {
		t.Fatalf("cp -a from the mount: %v\n%s", err, out)
	}
	os.RemoveAll(filepath.Join(copyTree, "lost+found"))
	sameTree(t, src, copyTree)
	if err := os.WriteFile(filepath.Join(mnt, "d0p2", "new"), []byte("x"), 0o644); err == nil {
		t.Error("write into the read-only mount succeeded")
	}
	cancel()
	select {
	case r := <-done:
		if r.code != 0 {
			t.Fatalf("mount exit %d: %s", r.code, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mount did not end after cancel")
	}
}

// TestFilesGetCycle: a directory hard-linked into itself (debugfs) makes
// `files get` stop with an error in bounded time and leave no OUT behind.
func TestFilesGetCycle(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4", "debugfs")
	src := t.TempDir()
	guestfstest.MakeTree(t, src, guestfstest.Options{})
	img := filepath.Join(t.TempDir(), "fs.img")
	guestfstest.Ext4(t, img, src, 32)
	guestfstest.Run(t, "debugfs", "-w", "-R", "ln /etc /etc/nginx/loop", img)
	repo := initRepo(t)
	point := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "loop", img))
	for _, out := range []string{filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "out.tar")} {
		start := time.Now()
		r := runCLI(t, "files", "get", "--repo", repo, "--restore-point", point, "--volume", "d0", "--output", out, "/etc")
		if r.code != 1 || !strings.Contains(r.stderr, "may loop") {
			t.Errorf("get through a cycle into %s: exit %d: %s", out, r.code, r.stderr)
		}
		if d := time.Since(start); d > 60*time.Second {
			t.Errorf("took %v", d)
		}
		if _, err := os.Lstat(out); !os.IsNotExist(err) {
			t.Errorf("a failed get left %s behind", out)
		}
	}
}
