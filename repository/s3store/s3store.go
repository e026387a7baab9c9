// Package s3store is the repository's S3 backend (any S3 service: AWS,
// MinIO, Ceph RGW, SeaweedFS, versitygw): a storage.Storage over one
// bucket and an optional prefix, with github.com/minio/minio-go/v7.
//
// How FORMAT.md's guarantees hold on S3:
//   - atomic-or-nothing: an S3 PUT (single or multipart) becomes visible
//     only when complete, so a crash leaves nothing or the whole object;
//   - a pack is staged in a local file (or in memory, within
//     Options.MemoryBudget) and uploaded by Commit, which returns
//     only after the server acknowledged it: the repository writes a commit
//     record only after every pack it needs was committed;
//   - nothing is overwritten in place: packs carry random names and are
//     written with If-None-Match: * (a name that exists is refused);
//   - checksums: every upload carries a CRC32C of its bytes, which the
//     server verifies before it stores them
//     (TestUploadChecksumVerifiedByServer): a staged pack up to PartSize
//     in the x-amz-checksum-crc32c header (computed while it is staged,
//     so the body is a plain UNSIGNED-PAYLOAD), a multipart upload or an
//     object of Put per part in a trailer (UNSIGNED-PAYLOAD-TRAILER). The
//     payload is not signed chunk by chunk, which saved two SHA-256 passes
//     over every byte, ours and the server's; the header rather than a
//     trailer spares the server the aws-chunked decoding
//     (docs/PERFORMANCE.md §11);
//   - large objects (over PartSize) go multipart; an interrupted upload is
//     aborted by Clean (run at open under the repository lock);
//   - retries: minio-go retries failed requests with exponential backoff
//     and jitter (MaxRetries);
//   - locks: a lease object locks/lease with an expiry, written with
//     If-None-Match: * and renewed while held (lease.go).
//
// Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and
// AWS_REGION); they are never part of a location or a message.
package s3store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/repository/storage"
)

// Target is the bucket part of an s3: location.
type Target struct {
	Endpoint string // host[:port]
	Secure   bool   // https
	Bucket   string
	Prefix   string // "" or "a/b" (no leading or trailing slash)
}

// URL is the location form s3:http(s)://HOST[:PORT]/BUCKET[/PREFIX].
func (t Target) URL() string {
	scheme := "http"
	if t.Secure {
		scheme = "https"
	}
	u := "s3:" + scheme + "://" + t.Endpoint + "/" + t.Bucket
	if t.Prefix != "" {
		u += "/" + t.Prefix
	}
	return u
}

// ParseTarget parses what follows "s3:" in a location.
func ParseTarget(rest string) (Target, error) {
	var t Target
	switch {
	case strings.HasPrefix(rest, "https://"):
		t.Secure, rest = true, strings.TrimPrefix(rest, "https://")
	case strings.HasPrefix(rest, "http://"):
		rest = strings.TrimPrefix(rest, "http://")
	default:
		return t, errors.New("want s3:http://HOST[:PORT]/BUCKET[/PREFIX] or s3:https://…")
	}
	host, path, _ := strings.Cut(rest, "/")
	if host == "" || strings.ContainsAny(host, "@?#") {
		return t, errors.New("missing or invalid host (credentials belong in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, not in the location)")
	}
	t.Endpoint = host
	path = strings.Trim(path, "/")
	bucket, prefix, _ := strings.Cut(path, "/")
	if !validBucket(bucket) {
		return t, fmt.Errorf("bucket name %q: want 3-63 lowercase letters, digits, dots or hyphens", bucket)
	}
	t.Bucket = bucket
	if prefix != "" {
		for _, seg := range strings.Split(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return t, fmt.Errorf("prefix %q: no empty, . or .. segments", prefix)
			}
		}
	}
	t.Prefix = prefix
	return t, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Options tune a Store.
type Options struct {
	// StageDir holds packs being written before their upload (local disk).
	StageDir string
	// PartSize is the multipart part size; objects larger go multipart
	// (0 = 64 MiB: a default 32 MiB pack is one PUT, not four requests).
	PartSize uint64
	// CreateBucket makes the bucket when it is missing (Init).
	CreateBucket bool
	// MaxRetries per request (0 = 5).
	MaxRetries int
	// Transport overrides the HTTP transport (tests).
	Transport http.RoundTripper
	// MemoryBudget bounds the bytes of uploads staged in memory at once;
	// an upload past it spills to a file in StageDir (0: always a file).
	// Off by default: measured (docs/PERFORMANCE.md §11), staging 128 MiB
	// in memory cost the backup 0.4 CPU-seconds more per 256 MiB than a
	// file in the page cache (a larger heap: the codec's allocations touch
	// fresh pages) and 80 MiB more peak RSS. For hosts whose staging
	// directory is slow and memory plentiful.
	MemoryBudget int64
	// ObjectLocking: a bucket CreateBucket makes has Object Lock enabled,
	// and an existing bucket must have it (objectlock.go).
	ObjectLocking bool
}

// Store is a storage.Storage on S3.
type Store struct {
	t        Target
	c        *minio.Client
	stage    string
	mem      *budget
	partSize uint64
	lockMode minio.RetentionMode // set by SetRetention (objectlock.go)
	lockFor  time.Duration
	// packExtra lengthens the retention of packs (SetRetention).
	packExtra time.Duration
}

var _ storage.Storage = (*Store)(nil)

// New connects to the target with the credentials of the environment.
func New(ctx context.Context, t Target, o Options) (*Store, error) {
	ak, sk := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if ak == "" || sk == "" {
		return nil, fmt.Errorf("%s: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", t.URL())
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 5
	}
	if o.PartSize == 0 {
		o.PartSize = 64 << 20
	}
	c, err := minio.New(t.Endpoint, &minio.Options{
		Creds:      credentials.NewStaticV4(ak, sk, ""),
		Secure:     t.Secure,
		Region:     region,
		MaxRetries: o.MaxRetries,
		Transport:  o.Transport,
		// Lets a PUT carry its checksum (CRC32C) in a trailer instead of
		// signing the payload chunk by chunk (see put).
		TrailingHeaders: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.URL(), err)
	}
	ok, err := c.BucketExists(ctx, t.Bucket)
	if err != nil {
		return nil, fmt.Errorf("%s: bucket %s: %w", t.URL(), t.Bucket, err)
	}
	if !ok {
		if !o.CreateBucket {
			return nil, fmt.Errorf("%s: bucket %s does not exist: %w", t.URL(), t.Bucket, storage.ErrNotExist)
		}
		if err := c.MakeBucket(ctx, t.Bucket, minio.MakeBucketOptions{Region: region, ObjectLocking: o.ObjectLocking}); err != nil {
			return nil, fmt.Errorf("%s: create bucket %s: %w", t.URL(), t.Bucket, err)
		}
	}
	if o.ObjectLocking {
		if err := (&Store{t: t, c: c}).checkObjectLock(ctx); err != nil {
			return nil, err
		}
	}
	if o.StageDir == "" {
		o.StageDir = os.TempDir()
	}
	if err := os.MkdirAll(o.StageDir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: stage dir: %w", t.URL(), err)
	}
	return &Store{t: t, c: c, stage: o.StageDir, mem: &budget{left: max(o.MemoryBudget, 0)}, partSize: o.PartSize}, nil
}

func (s *Store) Location() string { return s.t.URL() }

func (s *Store) Close() error { return nil }

func (s *Store) key(name string) string {
	if s.t.Prefix == "" {
		return name
	}
	return s.t.Prefix + "/" + name
}

func hit(step string) error {
	if step == "" {
		return nil
	}
	return failpoint.Hit(step)
}

// mapErr turns S3's "no such key" into storage.ErrNotExist.
func (s *Store) mapErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) && (er.Code == "NoSuchKey" || er.StatusCode == http.StatusNotFound) {
		return fmt.Errorf("%s %s/%s: %w", op, s.t.URL(), name, storage.ErrNotExist)
	}
	return fmt.Errorf("%s %s/%s: %w", op, s.t.URL(), name, err)
}

// ErrExists is returned when a write that must not overwrite finds the
// name taken.
var ErrExists = storage.ErrExists

func isPreconditionFailed(err error) bool {
	var er minio.ErrorResponse
	return errors.As(err, &er) && (er.StatusCode == http.StatusPreconditionFailed || er.Code == "PreconditionFailed")
}

// put uploads r. crc, when not nil, is the CRC32C of the whole object
// (computed while staging it): a single PUT then carries it in the
// x-amz-checksum-crc32c header, the body goes as it is, and the server
// verifies it. Otherwise (or when the object goes multipart) minio-go
// computes a CRC32C as it sends and appends it in a trailer (per part).
func (s *Store) put(ctx context.Context, name string, r io.Reader, size int64, exclusive bool, crc *uint32) error {
	opts := minio.PutObjectOptions{
		// Without DisableContentSha256 minio-go signs the payload over
		// http in 64 KiB chunks (two SHA-256 passes over every byte here
		// and in the server): the largest CPU cost of an S3 backup on a
		// shared host (docs/PERFORMANCE.md §11). The data's own integrity
		// is the AEAD of every blob, verified on every read; the checksum
		// guards the transfer.
		DisableContentSha256: true,
		PartSize:             s.partSize,
		ContentType:          "application/octet-stream",
	}
	if crc != nil && size <= int64(s.partSize) {
		// A header, not a trailer: a trailer makes the body aws-chunked,
		// which the server must decode (versitygw: some 4 000 socket
		// reads per 128 MiB instead of a few hundred, and about twice its
		// CPU per byte: BenchmarkUploadChecksum, §11).
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], *crc)
		opts.UserMetadata = map[string]string{checksumHeader: base64.StdEncoding.EncodeToString(b[:])}
	} else {
		opts.Checksum = minio.ChecksumFullObjectCRC32C
	}
	if exclusive {
		opts.SetMatchETagExcept("*")
	}
	s.retention(&opts, name)
	_, err := s.c.PutObject(ctx, s.t.Bucket, s.key(name), r, size, opts)
	if exclusive && isPreconditionFailed(err) {
		return fmt.Errorf("put %s/%s: %w", s.t.URL(), name, ErrExists)
	}
	return s.mapErr("put", name, err)
}

// PutExclusive creates name with If-None-Match: * (FORMAT.md §12a): of
// several writers exactly one succeeds; the others get ErrExists.
func (s *Store) PutExclusive(ctx context.Context, name string, b []byte) error {
	return s.put(ctx, name, bytes.NewReader(b), int64(len(b)), true, nil)
}

// Put uploads r; the object appears whole or not at all. Records and the
// config may replace an object (S3 PUT replaces atomically).
func (s *Store) Put(ctx context.Context, name string, r io.Reader, size int64, steps storage.Steps) error {
	if err := hit(steps.Write); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := hit(steps.Fsync); err != nil {
		return fmt.Errorf("upload %s: %w", name, err)
	}
	if err := hit(steps.Rename); err != nil {
		return fmt.Errorf("upload %s: %w", name, err)
	}
	if err := s.put(ctx, name, r, size, false, nil); err != nil {
		return err
	}
	if err := hit(steps.Dirsync); err != nil {
		return fmt.Errorf("after upload of %s: %w", name, err)
	}
	return nil
}

type staged struct {
	s        *Store
	name     string
	mem      memStage
	reserved int64    // budget held by mem
	f        *os.File // once spilled (or when no budget): the rest goes here
	n        int64
	crc      uint32 // CRC32C of the n bytes written (sent with the upload)
	err      error  // a failed spill: every later Write and Commit fails
}

// checksumHeader carries a single PUT's CRC32C (base64 of its 4 bytes,
// big-endian), which the server verifies against the body.
const checksumHeader = "x-amz-checksum-crc32c"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Create stages the object in memory within the store's budget
// (Options.MemoryBudget, none by default), in a local file past it; Commit
// uploads it.
func (s *Store) Create(ctx context.Context, name string) (storage.Staged, error) {
	return &staged{s: s, name: name}, nil
}

// SendsAtCommit implements storage.CommitSender: a staged object's bytes
// cross the network at Commit.
func (s *Store) SendsAtCommit() bool { return true }

func (st *staged) Write(p []byte) (int, error) {
	if st.err != nil {
		return 0, st.err
	}
	if st.f == nil {
		// Reserve whole blocks: what memStage really holds.
		need := (st.mem.n+int64(len(p))+stageBlock-1)/stageBlock*stageBlock - st.reserved
		if need <= 0 || st.s.mem.take(need) {
			if need > 0 {
				st.reserved += need
			}
			st.mem.write(p)
			st.n += int64(len(p))
			st.crc = crc32.Update(st.crc, castagnoli, p)
			return len(p), nil
		}
		f, err := os.CreateTemp(st.s.stage, "stage-*"+".tmp")
		if err != nil {
			st.err = fmt.Errorf("stage %s: %w", st.name, err)
			return 0, st.err
		}
		st.f = f
		if err := st.mem.spill(f); err != nil {
			st.err = err
			return 0, err
		}
		st.releaseMem()
	}
	n, err := st.f.Write(p)
	st.n += int64(n)
	st.crc = crc32.Update(st.crc, castagnoli, p[:n])
	return n, err
}

func (st *staged) releaseMem() {
	st.mem.free()
	st.s.mem.give(st.reserved)
	st.reserved = 0
}

func (st *staged) Abort() {
	st.releaseMem()
	if st.f != nil {
		st.f.Close()
		os.Remove(st.f.Name())
		st.f = nil
	}
}

func (st *staged) Commit(ctx context.Context, steps storage.Steps) error {
	defer st.Abort()
	if st.err != nil {
		return st.err
	}
	if err := hit(steps.Fsync); err != nil {
		return fmt.Errorf("upload %s: %w", st.name, err)
	}
	var body io.Reader = io.NewSectionReader(&st.mem, 0, st.n)
	if st.f != nil {
		if _, err := st.f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		body = st.f
	}
	if err := hit(steps.Rename); err != nil {
		return fmt.Errorf("upload %s: %w", st.name, err)
	}
	// A bandwidth limit (storage.Limited) paces the upload itself, not
	// the staging.
	body = storage.PaceReader(ctx, body, storage.BodyPacer(ctx))
	// Packs are never overwritten: their names are random, and a name
	// taken means something is wrong.
	crc := st.crc
	if err := st.s.put(ctx, st.name, body, st.n, strings.HasPrefix(st.name, "packs/"), &crc); err != nil {
		return err
	}
	if err := hit(steps.Dirsync); err != nil {
		return fmt.Errorf("after upload of %s: %w", st.name, err)
	}
	return nil
}

type object struct {
	s    *Store
	name string
	size int64
}

func (o *object) Size() int64  { return o.size }
func (o *object) Close() error { return nil }

func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off >= o.size {
		return 0, io.EOF
	}
	want := int64(len(p))
	short := false
	if off+want > o.size {
		want, short = o.size-off, true
	}
	// Straight into p: no buffer per read, no second copy (restore reads
	// every byte of a disk through here).
	n, err := o.s.readRange(context.Background(), o.name, off, p[:want])
	if err != nil {
		return n, err
	}
	if short {
		return n, io.EOF
	}
	return n, nil
}

// Open stats the object; reads are ranged GETs.
func (s *Store) Open(ctx context.Context, name string) (storage.Object, error) {
	size, err := s.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	return &object{s: s, name: name, size: size}, nil
}

// GetRange reads length bytes from off (length < 0: to the end).
func (s *Store) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	if length == 0 {
		return []byte{}, nil
	}
	if length > 0 {
		b := make([]byte, length)
		if _, err := s.readRange(ctx, name, off, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	var opts minio.GetObjectOptions
	if off > 0 {
		if err := opts.SetRange(off, 0); err != nil {
			return nil, err
		}
	}
	obj, err := s.c.GetObject(ctx, s.t.Bucket, s.key(name), opts)
	if err != nil {
		return nil, s.mapErr("get", name, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, s.mapErr("get", name, err)
	}
	return b, nil
}

// readRange fills p from off with one ranged GET.
func (s *Store) readRange(ctx context.Context, name string, off int64, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
		return 0, err
	}
	obj, err := s.c.GetObject(ctx, s.t.Bucket, s.key(name), opts)
	if err != nil {
		return 0, s.mapErr("get", name, err)
	}
	defer obj.Close()
	n, err := io.ReadFull(obj, p)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return n, s.mapErr("get", name, err)
	}
	return n, nil
}

func (s *Store) Stat(ctx context.Context, name string) (int64, error) {
	info, err := s.c.StatObject(ctx, s.t.Bucket, s.key(name), minio.StatObjectOptions{})
	if err != nil {
		return 0, s.mapErr("stat", name, err)
	}
	return info.Size, nil
}

func (s *Store) List(ctx context.Context, prefix string, fn func(name string, size int64) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine when fn ends early
	base := ""
	if s.t.Prefix != "" {
		base = s.t.Prefix + "/"
	}
	for info := range s.c.ListObjects(ctx, s.t.Bucket, minio.ListObjectsOptions{Prefix: base + prefix, Recursive: true}) {
		if info.Err != nil {
			return s.mapErr("list", prefix, info.Err)
		}
		if err := fn(strings.TrimPrefix(info.Key, base), info.Size); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (s *Store) Delete(ctx context.Context, name string) error {
	err := s.c.RemoveObject(ctx, s.t.Bucket, s.key(name), minio.RemoveObjectOptions{})
	if err = s.mapErr("delete", name, err); err != nil && !storage.IsNotExist(err) {
		return err
	}
	return nil
}

// SyncDeletes: an acknowledged DELETE is durable.
func (s *Store) SyncDeletes(ctx context.Context, prefix string) error { return nil }

// Clean aborts the multipart pack uploads a crash left in this repository
// (never those of another repository under a longer prefix) and removes
// local staging files (the caller holds the repository lock).
func (s *Store) Clean(ctx context.Context) error {
	base := ""
	if s.t.Prefix != "" {
		base = s.t.Prefix + "/"
	}
	for u := range s.c.ListIncompleteUploads(ctx, s.t.Bucket, base+"packs/", true) {
		if u.Err != nil {
			// Not every S3 server lists uploads; staging leftovers are
			// invisible either way (an incomplete upload is no object).
			break
		}
		// Only packs go multipart, and only packs/XX/NAME is ours: another
		// repository may live under a longer prefix in the same bucket
		// (PREFIX/packs/…), with its own uploads in flight.
		if parts := strings.Split(strings.TrimPrefix(u.Key, base), "/"); len(parts) != 3 || parts[0] != "packs" {
			continue
		}
		if err := s.c.RemoveIncompleteUpload(ctx, s.t.Bucket, u.Key); err != nil {
			return s.mapErr("abort upload", u.Key, err)
		}
	}
	m, _ := filepath.Glob(filepath.Join(s.stage, "stage-*.tmp"))
	for _, f := range m {
		os.Remove(f)
	}
	return nil
}
