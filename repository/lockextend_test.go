package repository

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/vmvault/vmvault/repository/s3store"
)

// TestObjectLockSurvivesDedup: on a real S3 server with Object Lock, a
// newer point that reuses older packs (here: the same disk again, every
// blob deduplicated) keeps them locked at least as long as its own commit
// record (audit 2, defect 3: the reused packs' lock ended with the old
// upload, while the newer point still claimed to be immutable). The old
// packs are made to look a day old by shortening their governance
// retention with the bypass header, as their owner could.
func TestObjectLockSurvivesDedup(t *testing.T) {
	ctx := context.Background()
	srv := s3store.StartTestServer(t)
	const bucket, prefix = "vmvault-dedup-lock", "repo"
	loc := srv.Location(bucket, prefix)
	init := InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 256 << 10, ObjectLock: &ObjectLock{Mode: "governance", Days: 1}, CreateBucket: true}
	if err := Init(ctx, loc, []byte(TestPassword), init); err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(srv.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), ""),
		Region: os.Getenv("AWS_REGION"),
	})
	if err != nil {
		t.Fatal(err)
	}
	open := func() *Repository {
		r, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open()
	disk := testDisk(49, 2<<20)
	backup(t, r, "vm", testTime, disk)
	var old []string
	for _, s := range packFiles(t, r) {
		id, _ := parsePackID(s)
		old = append(old, packName(id))
	}
	r.Close()
	if len(old) == 0 {
		t.Fatal("no packs")
	}
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	mode := minio.Governance
	for _, name := range old {
		if err := c.PutObjectRetention(ctx, bucket, prefix+"/"+name, minio.PutObjectRetentionOptions{Mode: &mode, RetainUntilDate: &soon, GovernanceBypass: true}); err != nil {
			t.Fatalf("shorten the retention of %s: %v", name, err)
		}
	}
	st := func(r *Repository) *s3store.Store { return r.store.(*s3store.Store) }
	// check names every pack that breaks the invariant (the first point's
	// record is still locked for a day, its packs for an hour).
	r = open()
	defer func() { r.Close() }()
	rep, err := r.Check(ctx, CheckOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	short := 0
	for _, p := range rep.Problems {
		if p.Kind == ProblemShortLock && strings.Contains(p.Message, "repo extend-locks") {
			short++
		}
	}
	if short != len(old) {
		t.Fatalf("check: %d short-lock problems for %d shortened packs: %+v", short, len(old), rep.Problems)
	}

	// The newer point: everything deduplicated against the old packs.
	p2 := backup(t, r, "vm", testTime.Add(time.Hour), disk)
	if now := packFiles(t, r); len(now) > len(old)+1 {
		t.Fatalf("the second backup wrote %d packs: not deduplicated", len(now)-len(old))
	}
	p2id, _ := ParseID(p2.ID)
	_, recUntil, err := st(r).LockInfo(ctx, recordName(p2id))
	if err != nil || recUntil.IsZero() {
		t.Fatalf("record retention %v, %v", recUntil, err)
	}
	for _, name := range old {
		_, u, err := st(r).LockInfo(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if u.Before(recUntil) {
			t.Errorf("%s is locked until %v, the point that reuses it until %v", name, u, recUntil)
		}
	}
	if rep, err := r.Check(ctx, CheckOptions{}, nil); err != nil || !rep.Clean() {
		t.Fatalf("check after the covered commit: %+v, %v", rep, err)
	}

	// extend-locks repairs what a commit did not see: shorten again, then
	// one pass brings every pack back over the points' locks, and a second
	// pass has nothing to do.
	for _, name := range old {
		if err := c.PutObjectRetention(ctx, bucket, prefix+"/"+name, minio.PutObjectRetentionOptions{Mode: &mode, RetainUntilDate: &soon, GovernanceBypass: true}); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	r = open()
	lr, err := r.ExtendLocks(ctx, nil)
	if err != nil || lr.Extended != len(old) || lr.Points != 2 {
		t.Fatalf("extend-locks: %+v, %v (want %d extended of 2 points)", lr, err, len(old))
	}
	if rep, err := r.Check(ctx, CheckOptions{}, nil); err != nil || !rep.Clean() {
		t.Fatalf("check after extend-locks: %+v, %v", rep, err)
	}
	if lr, err := r.ExtendLocks(ctx, nil); err != nil || lr.Extended != 0 {
		t.Fatalf("second extend-locks: %+v, %v", lr, err)
	}
}
