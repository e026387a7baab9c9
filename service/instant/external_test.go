package instant

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// need skips, loudly, when a client tool is missing: `make test` installs
// it (TEST_TOOLS in the Makefile).
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: %s is not installed (make test installs it via TEST_TOOLS): %v", tool, err)
		}
	}
}

func run(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// libnfsURL names a file of the export for libnfs, with the ports given so
// that no portmapper is asked.
func libnfsURL(t *testing.T, srv *Server, s *Session, file string) string {
	p := port(t, srv.Addr())
	return fmt.Sprintf("nfs://127.0.0.1%s/%s?version=3&nfsport=%d&mountport=%d", s.Export, file, p, p)
}

// TestLibnfsClient: Debian's libnfs utilities (C, not go-nfs-client) list
// the export and read the flat file byte-identical to the image.
func TestLibnfsClient(t *testing.T) {
	need(t, "nfs-ls", "nfs-cat", "nfs-cp")
	s, srv, src, _ := exported(t, nil, 0)
	out, err := run(t, "nfs-ls", strings.TrimSuffix(libnfsURL(t, srv, s, ""), "/"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Files() {
		if !bytes.Contains(out, []byte(f.Name)) {
			t.Errorf("nfs-ls lacks %s:\n%s", f.Name, out)
		}
	}
	got, err := run(t, "nfs-cat", libnfsURL(t, srv, s, "web01-flat.vmdk"))
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(src) {
		t.Fatalf("nfs-cat read %d bytes differing from the %d-byte image", len(got), len(src))
	}
	vmx, err := run(t, "nfs-cat", libnfsURL(t, srv, s, "web01.vmx"))
	if err != nil || !bytes.Contains(vmx, []byte(`displayName = "web01"`)) {
		t.Fatalf("vmx: %v\n%s", err, vmx)
	}
	// nfs-cp onto a read-only file is refused, and changes nothing.
	local := filepath.Join(t.TempDir(), "x")
	os.WriteFile(local, []byte("overwrite"), 0o644)
	if _, err := run(t, "nfs-cp", local, libnfsURL(t, srv, s, "web01.vmx")); err == nil {
		t.Error("nfs-cp replaced the .vmx")
	}
	if again, _ := run(t, "nfs-cat", libnfsURL(t, srv, s, "web01.vmx")); !bytes.Equal(again, vmx) {
		t.Error("the .vmx changed")
	}
}

// portmapOn111 starts the export with the portmapper on 127.0.0.1:111,
// where QEMU and libnfs look when no port is given.
func portmapOn111(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("SKIP: the portmapper's port 111 needs root (uid %d)", os.Geteuid())
	}
	l, err := net.Listen("tcp", "127.0.0.1:111")
	if err != nil {
		t.Skipf("SKIP: 127.0.0.1:111 is taken (an rpcbind running?): %v", err)
	}
	l.Close()
}

// TestQemuClient: QEMU's NFS block driver (libnfs through the portmapper)
// reads the flat file (qemu-img convert) and writes through it (qemu-io),
// and the write lands in the overlay only.
func TestQemuClient(t *testing.T) {
	need(t, "qemu-img", "qemu-io")
	if m, _ := filepath.Glob("/usr/lib/*/qemu/block-nfs.so"); len(m) == 0 {
		t.Skip("SKIP: QEMU's NFS block driver (qemu-block-extra) is not installed (make test-deps installs it)")
	}
	portmapOn111(t)
	s, srv, src, r := exportedAt(t, "127.0.0.1:111")
	before := diskDigest(t, r, s.Point.ID)
	url := "nfs://127.0.0.1" + s.Export + "/web01-flat.vmdk"
	info, err := run(t, "qemu-img", "info", "--output=json", "-f", "raw", url)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(info, []byte(fmt.Sprintf(`"virtual-size": %d`, len(src)))) {
		t.Fatalf("qemu-img info:\n%s", info)
	}
	out := filepath.Join(t.TempDir(), "out.raw")
	if _, err := run(t, "qemu-img", "convert", "-f", "raw", "-O", "raw", url, out); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, src) {
		t.Fatal("qemu-img convert over NFS differs from the image")
	}
	// The descriptor, fetched over NFS beside the flat file fetched over
	// NFS, opens in QEMU as a VMDK of the image's bytes. (QEMU's nfs
	// driver cannot open an extent relative to a descriptor on NFS: it
	// looks for nfs://.../web01.vmdk/web01-flat.vmdk.)
	local := t.TempDir()
	desc, err := run(t, "qemu-img", "convert", "-f", "raw", "-O", "raw", "nfs://127.0.0.1"+s.Export+"/web01.vmdk", filepath.Join(local, "desc"))
	if err != nil {
		t.Fatal(err)
	}
	desc, _ = os.ReadFile(filepath.Join(local, "desc"))
	desc = bytes.TrimRight(desc, "\x00")
	os.WriteFile(filepath.Join(local, "web01.vmdk"), desc, 0o644)
	os.Rename(out, filepath.Join(local, "web01-flat.vmdk"))
	if _, err := run(t, "qemu-img", "compare", "-f", "vmdk", "-F", "raw", filepath.Join(local, "web01.vmdk"), url); err != nil {
		t.Fatalf("the descriptor as QEMU reads it: %v\n%s", err, desc)
	}
	if _, err := run(t, "qemu-io", "-f", "raw", "-c", "write -P 0xab 1048576 65536", "-c", "flush", url); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(src)
	copy(want[1<<20:], bytes.Repeat([]byte{0xab}, 65536))
	if _, err := run(t, "qemu-img", "convert", "-f", "raw", "-O", "raw", url, out); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(out)
	if !bytes.Equal(got, want) {
		t.Fatal("qemu-io's write not read back")
	}
	if diskDigest(t, r, s.Point.ID) != before {
		t.Fatal("the repository's disk changed")
	}
	_ = srv
}
