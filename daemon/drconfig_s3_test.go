package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/repository/s3store"
)

// Offsite on S3 (versitygw on loopback): daemon A copies a local point into
// an S3 repository with a copy job and saves its configuration there too.
// The whole site is lost (state, local repository, the S3 catalog cache):
// daemon B, given the bucket, its passphrase and a new empty local
// repository under the old name, imports the configuration from the bucket
// and lists the copied point (catalog rebuilt from the bucket), which reads
// back byte for byte.
func TestServeS3OffsiteDisasterRecovery(t *testing.T) {
	ctx := context.Background()
	srv := s3store.StartTestServer(t)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	t.Setenv("VMVAULT_CACHE_DIR", cacheDir)
	dirA := t.TempDir()
	mainDir := filepath.Join(dirA, "repo")
	src := repository.TestRepositoryWithPoint(t, mainDir, "repo-pass")
	loc := srv.Location("vmvault-dr", "appliance-1")
	if err := repository.Init(ctx, loc, []byte("s3-pass"), repository.InitOptions{Chunker: repository.TestChunker, KDF: repository.TestKDF, CreateBucket: true}); err != nil {
		t.Fatal(err)
	}
	cfgA := fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: %s
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
  - {name: offsite, path: %q, passphrase_env: S3_PASS}
`, filepath.Join(dirA, "state"), mainDir, loc)
	vars := map[string]string{"MAIN_PASS": "repo-pass", "S3_PASS": "s3-pass", "VMVAULT_ADMIN_PASSWORD": "admin-secret-s3"}
	a := startDaemon(t, dirA, cfgA, vars, Options{ConfigSaveDebounce: 50 * time.Millisecond})
	api, csrf := cookieLogin(t, a.addr, "admin-secret-s3")
	copyJob := map[string]any{"id": "offsite", "name": "Offsite S3", "source": "main", "target": "offsite",
		"window": map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"01:00-02:00"}}}, "retention": map[string]any{"last": 7}, "enabled": true}
	if code, body := api.call("POST", "/api/v1/copy-jobs", copyJob, csrf); code != 201 {
		t.Fatalf("copy job: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/copy-jobs/offsite/run", nil, csrf); code != 202 {
		t.Fatalf("run: %d %s", code, body)
	}
	waitFor(t, 60*time.Second, "copy to S3", func() (bool, string) {
		_, body := api.call("GET", "/api/v1/copy-jobs/offsite/runs", nil, nil)
		var runs []struct {
			State        string
			PointsCopied int
		}
		_ = json.Unmarshal(body, &runs)
		if len(runs) == 1 && runs[0].State != "running" {
			if runs[0].State != "succeeded" || runs[0].PointsCopied != 1 {
				t.Fatalf("copy run: %s", body)
			}
			return true, ""
		}
		return false, string(body)
	})
	waitFor(t, 20*time.Second, "configuration saved", func() (bool, string) {
		log := a.stderr.String()
		return strings.Contains(log, "appliance configuration saved") && strings.Contains(log, "repositories=2 jobs=0 copy_jobs=1"), log
	})
	a.stop(t, ShutdownGrace+10*time.Second)
	for _, p := range []string{filepath.Join(dirA, "state"), mainDir, cacheDir} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}

	dirB := t.TempDir()
	newMain := filepath.Join(dirB, "repo")
	if err := repository.Init(ctx, newMain, []byte("new-pass"), repository.InitOptions{Chunker: repository.TestChunker, KDF: repository.TestKDF}); err != nil {
		t.Fatal(err)
	}
	cfgB := fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: %s
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
  - {name: offsite, path: %q, passphrase_env: S3_PASS}
`, filepath.Join(dirB, "state"), newMain, loc)
	vars["MAIN_PASS"] = "new-pass"
	b := startDaemon(t, dirB, cfgB, vars, Options{Import: &ImportConfig{Repository: "offsite"}})
	if out := b.stdout.String(); !strings.Contains(out, "0 jobs, 1 copy jobs") {
		t.Fatalf("import: %s", out)
	}
	apiB, _ := cookieLogin(t, b.addr, "admin-secret-s3")
	if code, body := apiB.call("GET", "/api/v1/copy-jobs/offsite", nil, nil); code != 200 || !strings.Contains(string(body), `"Offsite S3"`) {
		t.Fatalf("imported copy job: %d %s", code, body)
	}
	_, body := apiB.call("GET", "/api/v1/restore-points", nil, nil)
	var pts []struct {
		ID         string
		Repository string
		VM         struct{ Name string }
	}
	if err := json.Unmarshal(body, &pts); err != nil || len(pts) != 1 || pts[0].Repository != "offsite" || pts[0].VM.Name != src.VM.Name {
		t.Fatalf("B's restore points: %s", body)
	}
	b.stop(t, ShutdownGrace+10*time.Second)

	r, err := repository.Open(ctx, loc, []byte("s3-pass"), repository.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := r.OpenDisk(ctx, pts[0].ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(d, 0, d.Size()))
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Repeat([]byte("vmvault disk block "), 8192); !bytes.Equal(got, want) {
		t.Fatal("the copy in the bucket does not read back as the original")
	}
}
