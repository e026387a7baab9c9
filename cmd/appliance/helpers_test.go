package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/daemon"
)

// shutdownGrace bounds how long the daemon takes to stop after SIGTERM.
const shutdownGrace = daemon.ShutdownGrace

const testPassword = "correct horse battery staple"

// cliResult is what one in-process run of the appliance command printed.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the appliance command in process with VMVAULT_PASSWORD set.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLIEnv(t, map[string]string{"VMVAULT_PASSWORD": testPassword}, args...)
}

func runCLIEnv(t *testing.T, vars map[string]string, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	code := run(context.Background(), env, args)
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

// mustCLI runs the command and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, args...)
	if r.code != 0 {
		t.Fatalf("appliance %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// initRepo creates an encrypted repository with cheap KDF parameters.
func initRepo(t *testing.T, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	args := append([]string{"repo", "init", "--repo", dir, "--kdf-memory", "1024", "--kdf-time", "1"}, extra...)
	mustCLI(t, args...)
	return dir
}

// requireTool fails (never skips) when a command the test needs is missing:
// `make test` installs them.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	for _, p := range []string{name, "/usr/sbin/" + name, "/sbin/" + name} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatalf("%s is not installed: `make test` installs it (Debian packages qemu-utils, e2fsprogs, dosfstools, mtools)", name)
	return ""
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(requireTool(t, name), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// fillTree writes a directory that looks like a small guest file system:
// text files, random binaries and a copy of real system documentation, so the
// image holds data nobody in this project wrote.
func fillTree(t *testing.T, dir string, seed uint64, randomBytes int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range 40 {
		sub := filepath.Join(dir, fmt.Sprintf("etc/app%d", i%5))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		text := strings.Repeat(fmt.Sprintf("setting_%d = value %d\n", i, rng.IntN(1000)), 50+rng.IntN(200))
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("conf%d.cfg", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := make([]byte, randomBytes)
	for i := range bin {
		bin[i] = byte(rng.Uint32())
	}
	if err := os.MkdirAll(filepath.Join(dir, "var/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "var/lib/blob.bin"), bin, 0o644); err != nil {
		t.Fatal(err)
	}
	// Real files from the system: the Debian licences are on every machine.
	runTool(t, "cp", "-r", "/usr/share/common-licenses", filepath.Join(dir, "licenses"))
}

// makeExt4 makes a sparse raw image of sizeMiB holding an ext4 file system
// built by mkfs.ext4 -d from a generated tree.
func makeExt4(t *testing.T, dir string, sizeMiB int, seed uint64, randomBytes int) string {
	t.Helper()
	tree := filepath.Join(dir, fmt.Sprintf("tree-%d", seed))
	fillTree(t, tree, seed, randomBytes)
	img := filepath.Join(dir, fmt.Sprintf("ext4-%d.img", seed))
	runTool(t, "mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0", "-U", fmt.Sprintf("00000000-0000-4000-8000-%012d", seed), "-d", tree, img, fmt.Sprintf("%dM", sizeMiB))
	return img
}

// makeVFAT makes a FAT image with mkfs.vfat and copies a tree in with mcopy.
func makeVFAT(t *testing.T, dir string, sizeMiB int, seed uint64) string {
	t.Helper()
	tree := filepath.Join(dir, fmt.Sprintf("fat-tree-%d", seed))
	fillTree(t, tree, seed, 1<<20)
	img := filepath.Join(dir, fmt.Sprintf("fat-%d.img", seed))
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(sizeMiB) << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	runTool(t, "mkfs.vfat", "-F", "32", img)
	entries, err := os.ReadDir(tree)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-i", img, "-s"}
	for _, e := range entries {
		args = append(args, filepath.Join(tree, e.Name()))
	}
	runTool(t, "mcopy", append(args, "::/")...)
	return img
}

// makeRandom writes n bytes of seeded random data.
func makeRandom(t *testing.T, dir string, n int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	p := filepath.Join(dir, fmt.Sprintf("random-%d.img", seed))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// qemuConvert converts a raw image to a VMDK subformat with qemu-img.
func qemuConvert(t *testing.T, raw, subformat string) string {
	t.Helper()
	out := strings.TrimSuffix(raw, ".img") + "-" + subformat + ".vmdk"
	runTool(t, "qemu-img", "convert", "-f", "raw", "-O", "vmdk", "-o", "subformat="+subformat, raw, out)
	return out
}

func fileDigest(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// assertSameFile compares two files byte for byte (through their digests, so
// large images are not held in memory).
func assertSameFile(t *testing.T, want, got string) {
	t.Helper()
	ws, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := os.Stat(got)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Size() != gs.Size() {
		t.Fatalf("%s is %d bytes, want %d (%s)", got, gs.Size(), ws.Size(), want)
	}
	if fileDigest(t, want) != fileDigest(t, got) {
		t.Fatalf("%s differs from %s", got, want)
	}
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}
