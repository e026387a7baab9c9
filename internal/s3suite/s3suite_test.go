package s3suite

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/s3store"
)

// buildAppliance compiles cmd/appliance once per test binary.
func buildAppliance(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "appliance")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/vmvault/vmvault/cmd/appliance")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build appliance: %v\n%s", err, out)
	}
	return bin
}

type cli struct {
	t    *testing.T
	bin  string
	repo string
	env  []string
}

func (c *cli) cmd(args ...string) *exec.Cmd {
	full := append([]string{}, args[:2]...)
	full = append(full, "--repo", c.repo)
	full = append(full, args[2:]...)
	cmd := exec.Command(c.bin, full...)
	cmd.Env = append(os.Environ(), c.env...)
	return cmd
}

func (c *cli) run(args ...string) string {
	c.t.Helper()
	var out, errb bytes.Buffer
	cmd := c.cmd(args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("appliance %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// writeImage writes a raw disk image: random data with a zero hole.
func writeImage(t *testing.T, path string, size int64) []byte {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	clear(b[size/4 : size/2])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

type point struct {
	ID string `json:"id"`
}

func (c *cli) points() []point {
	c.t.Helper()
	var ps []point
	if err := json.Unmarshal([]byte(c.run("repo", "list", "--json")), &ps); err != nil {
		c.t.Fatalf("repo list --json: %v", err)
	}
	return ps
}

func (c *cli) restoreEquals(id string, want []byte) {
	c.t.Helper()
	out := filepath.Join(c.t.TempDir(), "restored.img")
	c.run("image", "restore", "--restore-point", id, out)
	got, err := os.ReadFile(out)
	if err != nil {
		c.t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		c.t.Fatalf("restore of %s differs from the backed-up image (%d vs %d bytes)", id, len(got), len(want))
	}
}

func (c *cli) checkReadData() {
	c.t.Helper()
	var rep struct {
		Problems []json.RawMessage `json:"problems"`
	}
	out := c.run("repo", "check", "--read-data", "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		c.t.Fatalf("repo check --json: %v\n%s", err, out)
	}
	if len(rep.Problems) != 0 {
		c.t.Fatalf("repo check --read-data found problems:\n%s", out)
	}
}

func countObjects(t *testing.T, root, prefix string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(filepath.Join(root, prefix), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestS3Suite runs the appliance CLI against versitygw: init, image backup,
// byte-identical restore, check --read-data, delete + reclaim, and a kill
// -9 in the middle of a backup that loses nothing committed.
func TestS3Suite(t *testing.T) {
	srv := s3store.StartTestServer(t)
	bin := buildAppliance(t)
	dir := t.TempDir()
	c := &cli{t: t, bin: bin, repo: srv.Location("vmvault-suite", "appliance-1"), env: []string{
		"VMVAULT_PASSWORD=correct horse",
		"VMVAULT_CACHE_DIR=" + filepath.Join(dir, "cache"),
	}}
	c.run("repo", "init", "--create-bucket", "--pack-size", "1048576", "--kdf-memory", "8192", "--kdf-time", "1")
	if _, err := os.Stat(filepath.Join(srv.Dir, "vmvault-suite", "appliance-1", "config")); err != nil {
		t.Fatalf("init wrote no config object into the bucket: %v", err)
	}
	if m, _ := filepath.Glob("s3:*"); len(m) != 0 {
		t.Fatalf("init created a local directory %v", m)
	}

	img1 := filepath.Join(dir, "disk1.img")
	want1 := writeImage(t, img1, 24<<20)
	c.run("image", "backup", "--vm", "web01", img1)
	ps := c.points()
	if len(ps) != 1 {
		t.Fatalf("%d points after one backup", len(ps))
	}
	p1 := ps[0].ID
	if n := countObjects(t, srv.Dir, "vmvault-suite/appliance-1/packs"); n < 5 {
		t.Fatalf("only %d pack objects for 18 MiB of data in 1 MiB packs", n)
	}
	c.restoreEquals(p1, want1)
	c.checkReadData()

	// A lost catalog cache is rebuilt from the bucket alone.
	if err := os.RemoveAll(filepath.Join(dir, "cache")); err != nil {
		t.Fatal(err)
	}
	c.restoreEquals(p1, want1)

	// kill -9 in the middle of a backup: the committed point survives and
	// reads back; the repository checks clean.
	img2 := filepath.Join(dir, "disk2.img")
	writeImage(t, img2, 96<<20)
	before := countObjects(t, srv.Dir, "vmvault-suite/appliance-1/packs")
	cmd := c.cmd("image", "backup", "--vm", "db01", img2)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for countObjects(t, srv.Dir, "vmvault-suite/appliance-1/packs") < before+10 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("backup wrote no packs in 2 minutes: %s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	werr := cmd.Wait()
	if werr == nil || !strings.Contains(werr.Error(), "killed") {
		t.Fatalf("the backup finished before the kill (%v): the test must kill it mid-write", werr)
	}
	ps = c.points()
	if len(ps) != 1 || ps[0].ID != p1 {
		t.Fatalf("points after the kill: %v, want only %s", ps, p1)
	}
	c.restoreEquals(p1, want1)
	c.checkReadData()

	// Reclaim after deleting the point removes the packs (and the orphans
	// of the killed backup).
	t.Logf("reclaim after the kill: %s", c.run("repo", "reclaim"))
	c.run("repo", "delete", p1)
	c.run("repo", "reclaim")
	if n := countObjects(t, srv.Dir, "vmvault-suite/appliance-1/packs"); n != 0 {
		t.Fatalf("%d pack objects left after deleting every point and reclaiming", n)
	}
	c.checkReadData()
}
