package s3suite

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/repository/s3store"
)

// TestS3CopyImmutable runs the CLI end to end: a local repository is
// copied offsite into an immutable S3 repository (versitygw with Object
// Lock), a copy killed before its commit record resumes without resending,
// the copy restores byte-identical, a second copy sends nothing,
// and deleting a point of the immutable repository is refused with the
// date its lock ends.
func TestS3CopyImmutable(t *testing.T) {
	srv := s3store.StartTestServer(t)
	bin := buildAppliance(t)
	dir := t.TempDir()
	cache := "VMVAULT_CACHE_DIR=" + filepath.Join(dir, "cache")
	local := &cli{t: t, bin: bin, repo: filepath.Join(dir, "local"), env: []string{"VMVAULT_PASSWORD=local pass", cache}}
	offsite := &cli{t: t, bin: bin, repo: srv.Location("vmvault-offsite", "site-a"), env: []string{"VMVAULT_PASSWORD=offsite pass", cache}}
	local.run("repo", "init", "--pack-size", "1048576", "--kdf-memory", "8192", "--kdf-time", "1")
	offsite.run("repo", "init", "--create-bucket", "--pack-size", "1048576", "--kdf-memory", "8192", "--kdf-time", "1", "--immutable", "2", "--lock-mode", "governance")
	img := filepath.Join(dir, "disk.img")
	want := writeImage(t, img, 8<<20)
	local.run("image", "backup", "--vm", "web01", img)

	copyJSON := func(extraEnv ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(bin, "repo", "copy", "--from", local.repo, "--to", offsite.repo, "--json")
		cmd.Env = append(append(os.Environ(), "VMVAULT_PASSWORD=local pass", "VMVAULT_TO_PASSWORD=offsite pass", cache), extraEnv...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("repo copy: %v\n%s", err, errb.String())
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("repo copy --json: %v\n%s", err, out.String())
		}
		return m
	}
	// kill -9 after the point's packs reached the bucket, before its commit
	// record: nothing is committed, the bucket checks clean, and the next
	// copy sends none of those blobs again.
	kill := exec.Command(bin, "repo", "copy", "--from", local.repo, "--to", offsite.repo)
	kill.Env = append(os.Environ(), "VMVAULT_PASSWORD=local pass", "VMVAULT_TO_PASSWORD=offsite pass", cache, "VMVAULT_FAILPOINTS=copy.commit=kill@1")
	if err := kill.Run(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the copy was not killed: %v", err)
	}
	if ps := offsite.points(); len(ps) != 0 {
		t.Fatalf("a killed copy committed %v", ps)
	}
	offsite.checkReadData()
	res := copyJSON()
	if res["pointsCopied"].(float64) != 1 || res["blobsSent"].(float64) != 0 || res["blobsRead"].(float64) == 0 {
		t.Fatalf("copy after the kill: %v (want the point, no blob sent again)", res)
	}
	if res = copyJSON(); res["pointsSkipped"].(float64) != 1 || res["bytesSent"].(float64) != 0 {
		t.Fatalf("second copy: %v", res)
	}
	ps := offsite.points()
	if len(ps) != 1 {
		t.Fatalf("offsite points %v", ps)
	}
	offsite.restoreEquals(ps[0].ID, want)
	offsite.checkReadData()

	var errb bytes.Buffer
	cmd := offsite.cmd("repo", "delete", ps[0].ID)
	cmd.Stderr = &errb
	if err := cmd.Run(); err == nil || !strings.Contains(errb.String(), "locked until") || !strings.Contains(errb.String(), "object lock governance") {
		t.Fatalf("delete of a locked point: %v, %s", err, errb.String())
	}
	if got := offsite.points(); len(got) != 1 {
		t.Fatalf("the refused delete removed the point: %v", got)
	}
}
