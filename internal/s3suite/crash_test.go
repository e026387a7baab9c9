package s3suite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/vmvault/vmvault/repository/s3store"
)

// s3Core is a plain S3 client on the test server, to look at the bucket
// the way any S3 tool would (multipart uploads in progress).
func s3Core(t *testing.T, srv *s3store.TestServer) *minio.Core {
	t.Helper()
	c, err := minio.NewCore(srv.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), ""),
		Region: os.Getenv("AWS_REGION"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// uploads lists the keys of the multipart uploads in progress under prefix.
func uploads(t *testing.T, c *minio.Core, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	keyMarker, idMarker := "", ""
	for {
		res, err := c.ListMultipartUploads(context.Background(), bucket, prefix, keyMarker, idMarker, "", 1000)
		if err != nil {
			t.Fatalf("list multipart uploads of %s/%s: %v", bucket, prefix, err)
		}
		for _, u := range res.Uploads {
			keys = append(keys, u.Key)
		}
		if !res.IsTruncated {
			return keys
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
}

// TestS3KilledMultipartUploadAbortedByReclaim: a backup whose pack is
// larger than a multipart part (72 MiB packs, 64 MiB parts) is killed -9
// while that pack's multipart upload is in progress. The upload is still
// open on the server after the kill (an incomplete upload is no object:
// it stays until someone aborts it, taking space); the next `repo
// reclaim` aborts it and removes the staged copy of the pack, leaves an
// upload of another repository nested under a longer prefix alone, and
// the committed point restores byte-identical with check --read-data
// clean.
func TestS3KilledMultipartUploadAbortedByReclaim(t *testing.T) {
	srv := s3store.StartTestServer(t)
	bin := buildAppliance(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	const bucket, prefix = "vmvault-multipart", "appliance-1"
	c := &cli{t: t, bin: bin, repo: srv.Location(bucket, prefix), env: []string{
		"VMVAULT_PASSWORD=correct horse",
		"VMVAULT_CACHE_DIR=" + cache,
	}}
	c.run("repo", "init", "--create-bucket", "--pack-size", "75497472", "--kdf-memory", "8192", "--kdf-time", "1")
	img1 := filepath.Join(dir, "disk1.img")
	want1 := writeImage(t, img1, 4<<20)
	c.run("image", "backup", "--vm", "web01", img1)
	ps := c.points()
	if len(ps) != 1 {
		t.Fatalf("%d points after one backup", len(ps))
	}
	p1 := ps[0].ID

	core := s3Core(t, srv)
	ours := prefix + "/packs/"
	// Another repository under a longer prefix of the same bucket, with an
	// upload of its own in flight: not ours to abort.
	nested := prefix + "/nested/packs/ab/ab00000000000000000000000000000000000000000000000000000000000000"
	if _, err := core.NewMultipartUpload(context.Background(), bucket, nested, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("start the other repository's upload: %v", err)
	}

	img2 := filepath.Join(dir, "disk2.img")
	writeImage(t, img2, 112<<20) // 84 MiB of random data: one full 72 MiB pack
	stage := filepath.Join(cache, "repos", "*", "stage", "stage-*.tmp")
	// The kill must land inside the upload, a window of a few hundred
	// milliseconds seen by polling: a backup that slipped through it is run
	// again, and the test fails if none was caught.
	var inFlight []string
	for attempt := 1; attempt <= 3 && len(inFlight) == 0; attempt++ {
		// One worker: one pack open at a time, so the first reaches 72 MiB.
		cmd := c.cmd("image", "backup", "--vm", "db01", "--workers", "1", img2)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		deadline := time.Now().Add(3 * time.Minute)
		var werr error
	poll:
		for {
			select {
			case werr = <-done:
				break poll
			default:
			}
			if len(uploads(t, core, bucket, ours)) > 0 {
				cmd.Process.Kill()
				werr = <-done
				break poll
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				<-done
				t.Fatalf("the backup started no multipart upload in 3 minutes: %s", errb.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if werr == nil || !strings.Contains(werr.Error(), "killed") {
			t.Logf("attempt %d: the backup ended before the kill (%v %s)", attempt, werr, errb.String())
			if werr == nil { // it committed: back to one point
				for _, p := range c.points() {
					if p.ID != p1 {
						c.run("repo", "delete", p.ID)
					}
				}
			}
			continue
		}
		inFlight = uploads(t, core, bucket, ours)
		t.Logf("attempt %d: killed with %d multipart upload(s) in progress: %v", attempt, len(inFlight), inFlight)
	}
	if len(inFlight) == 0 {
		t.Fatalf("no kill landed inside a multipart upload in 3 attempts: the test proves nothing")
	}
	if m, _ := filepath.Glob(stage); len(m) == 0 {
		t.Fatalf("the killed upload left no staged pack in %s (the test expects one to be cleaned)", stage)
	}
	if ps := c.points(); len(ps) != 1 || ps[0].ID != p1 {
		t.Fatalf("points after the kill: %v, want only %s", ps, p1)
	}

	t.Logf("reclaim: %s", strings.TrimSpace(c.run("repo", "reclaim")))
	if left := uploads(t, core, bucket, ours); len(left) != 0 {
		t.Fatalf("reclaim left %d multipart upload(s) of the killed backup: %v", len(left), left)
	}
	if m, _ := filepath.Glob(stage); len(m) != 0 {
		t.Fatalf("reclaim left the staged packs %v", m)
	}
	if other := uploads(t, core, bucket, prefix+"/nested/"); len(other) != 1 || other[0] != nested {
		t.Fatalf("the other repository's upload: %v, want it left alone (%s)", other, nested)
	}
	c.restoreEquals(p1, want1)
	c.checkReadData()
	// And the repository takes the big backup whole afterwards.
	c.run("image", "backup", "--vm", "db01", img2)
	if ps := c.points(); len(ps) != 2 {
		t.Fatalf("%d points after the next backup, want 2", len(ps))
	}
	if left := uploads(t, core, bucket, ours); len(left) != 0 {
		t.Fatalf("a finished backup left multipart uploads %v", left)
	}
}
