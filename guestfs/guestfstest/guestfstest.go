// Package guestfstest builds real disk images for the tests of file-level
// restore (here, in the API and in the CLI) with the third-party tools
// (mkfs.ext4 -d, mkfs.xfs + loop mount, mkntfs + ntfs-3g, mkfs.vfat +
// mcopy, sgdisk, sfdisk, lvm2) and compares what a reader returns with the
// files that went in. Only tests import it.
package guestfstest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Need skips the test, loudly, when a tool is missing (make test installs
// them: see TEST_TOOLS in the Makefile), and fails it when not root but
// root is needed.
func Need(t testing.TB, root bool, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: %s is not installed (make test installs it via TEST_TOOLS): %v", tool, err)
		}
	}
	if root && os.Geteuid() != 0 {
		t.Skipf("SKIP: needs root for loop mounts (uid %d)", os.Geteuid())
	}
}

// Run runs a command and fails the test with its output on error.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Options says what a tree holds; file systems differ in what they keep.
type Options struct {
	Symlinks  bool // fast and slow symbolic links
	Unicode   bool
	BigDir    int   // entries in big/ (htree on ext4)
	SparseMiB int64 // a sparse file of this size with data at both ends
	Modes     bool  // distinct permission bits survive
	ShortOnly bool  // FAT: ASCII long names only, no case-only differences
}

// MakeTree writes a tree of test files under dir.
func MakeTree(t testing.TB, dir string, o Options) {
	t.Helper()
	w := func(name string, data []byte, mode os.FileMode) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if o.Modes {
			os.Chmod(p, mode)
		}
	}
	rnd := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	w("etc/hostname", []byte("web01\n"), 0o644)
	w("etc/nginx/nginx.conf", bytes.Repeat([]byte("worker_processes 4;\n"), 300), 0o600)
	w("empty", nil, 0o644)
	w("tiny.txt", []byte("x"), 0o644)
	w("data/random-1m.bin", rnd(1<<20+123), 0o640)
	w("data/random-300k.bin", rnd(300_000), 0o755)
	w("Long File Name With Spaces.document.txt", []byte("long names\n"), 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if o.Unicode {
		w("unicode/Grüße-😀.txt", []byte("unicode\n"), 0o644)
		w("unicode/日本語/ファイル.txt", []byte("nihongo\n"), 0o644)
	}
	if o.Symlinks {
		mk := func(target, name string) {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		mk("hostname", "etc/host-link")                         // fast, relative
		mk("/etc/nginx/nginx.conf", "etc/abs-link")             // absolute: inside the volume
		mk(strings.Repeat("long-target/", 10)+"x", "slow-link") // > 60 bytes: slow link
		mk("../../../../../../etc/passwd", "escape-link")       // must never leave the volume
		mk("data", "data-link")                                 // a link to a directory
	}
	if o.BigDir > 0 {
		for i := 0; i < o.BigDir; i++ {
			w(fmt.Sprintf("big/file-%06d", i), []byte(fmt.Sprintf("%d\n", i)), 0o644)
		}
	}
	if o.SparseMiB > 0 {
		p := filepath.Join(dir, "sparse.img")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("start"), 0)
		f.WriteAt([]byte("middle"), o.SparseMiB<<19)
		f.WriteAt([]byte("end"), o.SparseMiB<<20-3)
		f.Close()
	}
	// Fixed mtimes, to see that they come back.
	mt := time.Date(2024, 3, 5, 7, 9, 11, 0, time.UTC)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSymlink == 0 && !d.IsDir() {
			os.Chtimes(p, mt, mt)
		}
		return nil
	})
}

// FS is what Compare reads: guestfs.FS satisfies it.
type FS interface {
	ReadDir(name string) ([]fs.DirEntry, error)
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	Open(name string) (fs.File, error)
}

// CompareOptions relax the comparison where a file system keeps less.
type CompareOptions struct {
	Modes    bool // compare permission bits
	Mtimes   bool // compare mtimes (to 2 s: FAT)
	Symlinks bool
	Ignore   func(name string) bool // entries the file system adds (lost+found, System Volume Information)
}

// Compare checks that fsys holds exactly the tree under dir: same names,
// types, bytes, link targets and (if asked) modes and mtimes.
func Compare(t testing.TB, fsys FS, dir string, o CompareOptions) (files int) {
	t.Helper()
	var walk func(rel string)
	walk = func(rel string) {
		want, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fsys.ReadDir(rel)
		if err != nil {
			t.Fatalf("ReadDir(%q): %v", rel, err)
		}
		var gn []string
		gm := map[string]fs.DirEntry{}
		for _, g := range got {
			p := path.Join(rel, g.Name())
			if o.Ignore != nil && o.Ignore(p) {
				continue
			}
			gn = append(gn, g.Name())
			gm[g.Name()] = g
		}
		var wn []string
		for _, w := range want {
			wn = append(wn, w.Name())
		}
		sort.Strings(gn)
		sort.Strings(wn)
		if strings.Join(gn, "\x00") != strings.Join(wn, "\x00") {
			t.Fatalf("directory %q: got %d entries %q, want %d %q", rel, len(gn), head(gn), len(wn), head(wn))
		}
		for _, w := range want {
			p := path.Join(rel, w.Name())
			wi, _ := w.Info()
			gi, err := fsys.Lstat(p)
			if err != nil {
				t.Fatalf("Lstat(%q): %v", p, err)
			}
			if wi.Mode().Type() != gi.Mode().Type() {
				t.Fatalf("%s: type %v, want %v", p, gi.Mode().Type(), wi.Mode().Type())
			}
			if o.Modes && wi.Mode().Type() != fs.ModeSymlink && wi.Mode().Perm() != gi.Mode().Perm() {
				t.Errorf("%s: mode %v, want %v", p, gi.Mode(), wi.Mode())
			}
			if o.Mtimes && wi.Mode().IsRegular() {
				if d := gi.ModTime().Sub(wi.ModTime()); d < -2*time.Second || d > 2*time.Second {
					t.Errorf("%s: mtime %v, want %v", p, gi.ModTime(), wi.ModTime())
				}
			}
			switch {
			case wi.IsDir():
				walk(p)
			case wi.Mode()&fs.ModeSymlink != 0:
				wt, _ := os.Readlink(filepath.Join(dir, p))
				gt, err := fsys.Readlink(p)
				if err != nil || gt != wt {
					t.Fatalf("Readlink(%q) = %q, %v; want %q", p, gt, err, wt)
				}
			case wi.Mode().IsRegular():
				wb, err := os.ReadFile(filepath.Join(dir, p))
				if err != nil {
					t.Fatal(err)
				}
				f, err := fsys.Open(p)
				if err != nil {
					t.Fatalf("Open(%q): %v", p, err)
				}
				gb, err := io.ReadAll(f)
				f.Close()
				if err != nil {
					t.Fatalf("read %q: %v", p, err)
				}
				if gi.Size() != int64(len(wb)) || !bytes.Equal(gb, wb) {
					t.Fatalf("%s: %d bytes (size %d) differ from the %d that went in", p, len(gb), gi.Size(), len(wb))
				}
				files++
			}
		}
	}
	walk(".")
	return files
}

func head(s []string) []string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// Ext4 makes an ext4 image of sizeMiB from dir with mkfs.ext4 -d; extra
// mkfs options (e.g. "-O", "inline_data", "-t", "ext2") go first.
func Ext4(t testing.TB, img, dir string, sizeMiB int, extra ...string) {
	t.Helper()
	args := append([]string{"-q", "-F", "-E", "root_owner=0:0"}, extra...)
	args = append(args, "-d", dir, img, fmt.Sprintf("%dM", sizeMiB))
	Run(t, "mkfs.ext4", args...)
}

// Part is one partition to lay out: its size, its type (sgdisk's hex code
// such as "8300", or sfdisk's "83") and the image to copy into it, if any.
type Part struct {
	SizeMiB int
	Type    string
	Image   string
}

// GPT makes a GPT disk of sizeMiB with sgdisk, partitions starting at 1 MiB
// one after the other, each image copied to its partition's offset.
func GPT(t testing.TB, img string, sizeMiB int, parts ...Part) {
	t.Helper()
	mkfile(t, img, int64(sizeMiB)<<20)
	args := []string{"-o"}
	for i, p := range parts {
		args = append(args, fmt.Sprintf("-n=%d:0:+%dM", i+1, p.SizeMiB), fmt.Sprintf("-t=%d:%s", i+1, p.Type))
	}
	Run(t, "sgdisk", append(args, img)...)
	off := int64(1) << 20
	for _, p := range parts {
		if p.Image != "" {
			CopyAt(t, img, p.Image, off)
		}
		off += int64(p.SizeMiB) << 20
	}
}

// MBR makes an MBR disk with sfdisk: the first two parts primary, the rest
// logical partitions (5, 6, …) inside an extended partition, each logical
// one preceded by its EBR (1 MiB apart, as sfdisk aligns them). It returns
// each part's byte offset.
func MBR(t testing.TB, img string, sizeMiB int, parts ...Part) []int64 {
	t.Helper()
	mkfile(t, img, int64(sizeMiB)<<20)
	var script strings.Builder
	script.WriteString("label: dos\nunit: sectors\n")
	var offs []int64
	off := int64(1) << 20
	for i, p := range parts {
		if i == 2 {
			fmt.Fprintf(&script, "start=%d, type=5\n", off/512)
			off += 1 << 20
		} else if i > 2 {
			off += 1 << 20 // room for the next EBR
		}
		fmt.Fprintf(&script, "start=%d, size=%d, type=%s\n", off/512, int64(p.SizeMiB)<<11, p.Type)
		offs = append(offs, off)
		off += int64(p.SizeMiB) << 20
	}
	cmd := exec.Command("sfdisk", "-q", img)
	cmd.Stdin = strings.NewReader(script.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v\n%s\n%s", err, out, script.String())
	}
	for i, p := range parts {
		if p.Image != "" {
			CopyAt(t, img, p.Image, offs[i])
		}
	}
	return offs
}

func mkfile(t testing.TB, name string, size int64) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// CopyAt copies file src into dst at byte offset off, keeping holes.
func CopyAt(t testing.TB, dst, src string, off int64) {
	t.Helper()
	Run(t, "dd", "if="+src, "of="+dst, "bs=1M", fmt.Sprintf("seek=%d", off), "oflag=seek_bytes", "conv=notrunc,sparse", "status=none")
}

// Mounted formats img with mkfs (e.g. "mkfs.xfs", "-f"), loop-mounts it
// with the given mount type and options, copies dir in with cp -a and
// unmounts, so the file system is written by the kernel (or ntfs-3g).
// then runs hook (if any) on the mounted tree.
func Mounted(t testing.TB, img string, sizeMiB int, dir, mountType string, hook func(mnt string), mkfs ...string) {
	t.Helper()
	mkfile(t, img, int64(sizeMiB)<<20)
	Run(t, mkfs[0], append(mkfs[1:], img)...)
	mnt := t.TempDir()
	Run(t, "mount", "-t", mountType, "-o", "loop", img, mnt)
	mounted := true
	defer func() {
		if mounted {
			exec.Command("umount", mnt).Run()
		}
	}()
	Run(t, "cp", "-a", dir+"/.", mnt+"/")
	if hook != nil {
		hook(mnt)
	}
	Run(t, "umount", mnt)
	mounted = false
}

// FAT makes a FAT image (bits 12, 16 or 32) of sizeKiB with mkfs.vfat and
// copies dir in with mcopy -s -m (mtimes kept).
func FAT(t testing.TB, img string, bits, sizeKiB int, dir string) {
	t.Helper()
	Run(t, "mkfs.vfat", "-F", fmt.Sprint(bits), "-n", fmt.Sprintf("ESP%d", bits), "-C", img, fmt.Sprint(sizeKiB))
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-s", "-m", "-i", img}
	for _, e := range ents {
		args = append(args, filepath.Join(dir, e.Name()))
	}
	Run(t, "mcopy", append(args, "::/")...)
}

// ExFAT makes an exFAT image of sizeMiB with mkfs.exfat (exfatprogs) and
// fills it from dir through exfat-fuse on a loop device: this kernel has
// no exfat module, and mount.exfat-fuse wants a block device, not a file.
// Extra mkfs.exfat options (e.g. "-c", "128K") go first. hook (if any)
// runs on the mounted tree after the copy.
func ExFAT(t testing.TB, img string, sizeMiB int, dir, label string, hook func(mnt string), extra ...string) {
	t.Helper()
	mkfile(t, img, int64(sizeMiB)<<20)
	Run(t, "mkfs.exfat", append(append(extra, "-L", label), img)...)
	dev := strings.TrimSpace(Run(t, "losetup", "-f", "--show", img))
	defer exec.Command("losetup", "-d", dev).Run()
	mnt := t.TempDir()
	Run(t, "mount.exfat-fuse", dev, mnt)
	mounted := true
	defer func() {
		if mounted {
			exec.Command("umount", mnt).Run()
		}
	}()
	// cp -r then touch -r: exfat-fuse keeps mtimes but not modes or owners.
	Run(t, "cp", "-r", "--preserve=timestamps", dir+"/.", mnt+"/")
	if hook != nil {
		hook(mnt)
	}
	Run(t, "umount", mnt)
	mounted = false
}
