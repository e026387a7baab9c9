package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
)

type instantOut struct {
	Export  string   `json:"export"`
	Files   []string `json:"files"`
	Listen  string   `json:"listen"`
	Portmap string   `json:"portmap"`
	Overlay string   `json:"overlay"`
}

// startInstant runs `appliance instant export` in process until the
// returned stop is called; it returns what the command printed.
func startInstant(t *testing.T, args ...string) (instantOut, func() cliResult) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	ready := make(chan string, 1)
	done := make(chan int, 1)
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
		if k == "VMVAULT_PASSWORD" {
			return testPassword
		}
		return ""
	}, instantReady: func(s string) { ready <- s }}
	go func() { done <- run(ctx, env, append([]string{"instant", "export"}, args...)) }()
	var printed string
	select {
	case printed = <-ready:
	case code := <-done:
		cancel()
		t.Fatalf("instant export exited %d before it was ready:\n%s%s", code, out.String(), errb.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("instant export not ready after 30s")
	}
	var o instantOut
	if err := json.Unmarshal([]byte(printed), &o); err != nil || strings.Count(strings.TrimSpace(printed), "\n") != 0 {
		cancel()
		t.Fatalf("not one JSON line: %v\n%s", err, printed)
	}
	stopped := false
	stop := func() cliResult {
		if stopped {
			return cliResult{}
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
		case <-time.After(30 * time.Second):
			t.Fatal("instant export did not end 30s after its context")
		}
		return cliResult{}
	}
	t.Cleanup(func() { stop() })
	return o, stop
}

func nfsMount(t *testing.T, listen, export string) *nfsc.Target {
	t.Helper()
	_, ps, _ := net.SplitHostPort(listen)
	p, _ := strconv.Atoi(ps)
	c, err := nfsc.DialServiceAtPort("127.0.0.1", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	v, err := (&nfsc.Mount{Client: c}).Mount(export, rpc.NewAuthUnix("vmvault-test", 0, 0).Auth())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// nfsReadAll reads a file over NFS in 1 MiB READs and returns its digest.
func nfsReadAll(t *testing.T, v *nfsc.Target, name string, size int64) [32]byte {
	t.Helper()
	f, err := v.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n == 0 {
			t.Fatalf("read %s at %d: %v", name, off, err)
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

func TestInstantExport(t *testing.T) {
	size := 16 << 20
	if s := os.Getenv("VMVAULT_INSTANT_MIB"); s != "" {
		n, _ := strconv.Atoi(s)
		size = n << 20
	}
	repo := initRepo(t)
	dir := t.TempDir()
	img := makeRandom(t, dir, size, 42)
	point := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "web01", img))

	// What `image restore` writes, and how long it takes.
	restored := filepath.Join(dir, "restored.raw")
	start := time.Now()
	mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", point, restored)
	restoreSecs := time.Since(start).Seconds()
	assertSameFile(t, img, restored)

	overlay := filepath.Join(dir, "overlay")
	o, stop := startInstant(t, "--repo", repo, "--restore-point", point, "--listen", "127.0.0.1:0", "--portmap", "127.0.0.1:0",
		"--overlay", overlay, "--json")
	if !strings.HasPrefix(o.Export, "/vmvault/") || o.Portmap == "" || o.Overlay != overlay {
		t.Fatalf("printed %+v", o)
	}
	// An image backup has no VM configuration: no .vmx.
	if strings.Join(o.Files, " ") != "web01.vmdk web01-flat.vmdk" {
		t.Fatalf("files %v", o.Files)
	}
	v := nfsMount(t, o.Listen, o.Export)
	start = time.Now()
	got := nfsReadAll(t, v, "web01-flat.vmdk", int64(size))
	nfsSecs := time.Since(start).Seconds()
	if got != fileDigest(t, restored) {
		t.Fatal("the flat file over NFS differs from what image restore writes")
	}
	mib := float64(size) / (1 << 20)
	t.Logf("%.0f MiB: image restore %.2fs (%.0f MiB/s), NFS read (go client, 1 MiB READs, one stream) %.2fs (%.0f MiB/s)",
		mib, restoreSecs, mib/restoreSecs, nfsSecs, mib/nfsSecs)

	w, err := v.OpenFile("web01-flat.vmdk", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w.Seek(4096, io.SeekStart)
	if _, err := w.Write([]byte("instant")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(overlay, "session.json")); err != nil {
		t.Fatal(err)
	}
	res := stop()
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if _, err := os.Stat(overlay); !os.IsNotExist(err) {
		t.Fatalf("overlay left behind without --keep-overlay: %v", err)
	}
	// The repository is unchanged: restoring again gives the image.
	again := filepath.Join(dir, "again.raw")
	mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", point, again)
	assertSameFile(t, img, again)
	mustCLI(t, "repo", "check", "--repo", repo)
}

// TestInstantExportKeepOverlay: with --keep-overlay a second run of the
// same point has the same export path and what the first run's client
// wrote.
func TestInstantExportKeepOverlay(t *testing.T) {
	repo := initRepo(t)
	dir := t.TempDir()
	img := makeRandom(t, dir, 2<<20, 7)
	point := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "db", img))
	overlay := filepath.Join(dir, "ov")
	args := []string{"--repo", repo, "--restore-point", point, "--listen", "127.0.0.1:0", "--portmap", "off", "--overlay", overlay, "--keep-overlay", "--json"}
	o, stop := startInstant(t, args...)
	if o.Portmap != "" {
		t.Fatalf("portmap %q with --portmap off", o.Portmap)
	}
	w, err := nfsMount(t, o.Listen, o.Export).OpenFile("db-flat.vmdk", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	if r := stop(); r.code != 0 || !strings.Contains(r.stderr, "overlay kept in") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	o2, _ := startInstant(t, args...)
	if o2.Export != o.Export {
		t.Fatalf("export path changed across runs: %s, %s", o.Export, o2.Export)
	}
	f, err := nfsMount(t, o2.Listen, o2.Export).Open("db-flat.vmdk")
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != "kept" {
		t.Fatalf("read back %q: %v", b, err)
	}
}

func TestInstantExportUsage(t *testing.T) {
	repo := initRepo(t)
	for _, args := range [][]string{
		{"instant", "export", "--repo", repo},
		{"instant", "export", "--repo", repo, "--restore-point", "x", "--allow", "not-a-cidr"},
		{"instant", "export", "--repo", repo, "--restore-point", "x", "--overlay-limit-mib", "0"},
	} {
		if r := runCLI(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	if r := runCLI(t, "instant", "export", "--repo", repo, "--restore-point", "ffff", "--listen", "127.0.0.1:0", "--portmap", "off"); r.code != 1 {
		t.Errorf("unknown point: exit %d (%s)", r.code, r.stderr)
	}
}
