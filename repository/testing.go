package repository

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestOption adjusts TestRepository.
type TestOption func(*testConfig)

type testConfig struct {
	dir      string
	password []byte
	init     InitOptions
	open     OpenOptions
}

// WithNoEncryption makes TestRepository create an unencrypted repository.
func WithNoEncryption() TestOption { return func(c *testConfig) { c.init.NoEncryption = true } }

// WithDir makes TestRepository use dir instead of a fresh t.TempDir().
func WithDir(dir string) TestOption { return func(c *testConfig) { c.dir = dir } }

// WithPackSize sets the target pack size.
func WithPackSize(n int) TestOption { return func(c *testConfig) { c.init.PackSize = n } }

// WithChunker sets the chunker configuration stored in the repository.
func WithChunker(cc ChunkerConfig) TestOption { return func(c *testConfig) { c.init.Chunker = cc } }

// WithPassword sets the passphrase (default TestPassword).
func WithPassword(p string) TestOption { return func(c *testConfig) { c.password = []byte(p) } }

// TestPassword is the passphrase TestRepository uses by default.
const TestPassword = "test-passphrase"

// TestKDF is a cheap Argon2id setting for tests (never use it for real data).
var TestKDF = KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

// TestChunker is a valid CDC configuration for tests.
var TestChunker = ChunkerConfig{Algorithm: "cdc", Polynomial: 0x3DA3358B4DC173, MinSize: 512 << 10, AvgSize: 1 << 20, MaxSize: 8 << 20}

// TestRepository creates and opens an encrypted repository (cheap KDF,
// NoFsync) in a temporary directory, closed at the end of the test.
func TestRepository(t testing.TB, opts ...TestOption) *Repository {
	t.Helper()
	c := testConfig{password: []byte(TestPassword), init: InitOptions{Chunker: TestChunker, KDF: TestKDF}, open: OpenOptions{NoFsync: true}}
	for _, o := range opts {
		o(&c)
	}
	if c.dir == "" {
		c.dir = t.TempDir()
	}
	ctx := context.Background()
	if err := Init(ctx, c.dir, c.password, c.init); err != nil {
		t.Fatalf("init test repository: %v", err)
	}
	r, err := Open(ctx, c.dir, c.password, c.open)
	if err != nil {
		t.Fatalf("open test repository: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close test repository: %v", err)
		}
	})
	return r
}

// TestRepositoryWithPoint creates an encrypted repository (cheap KDF) in
// dir holding one committed restore point of VM web01, closes it and
// returns the point (tests of the daemon and the command).
func TestRepositoryWithPoint(t testing.TB, dir, pass string) Point {
	t.Helper()
	ctx := context.Background()
	if err := Init(ctx, dir, []byte(pass), InitOptions{Chunker: TestChunker, KDF: TestKDF}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, dir, []byte(pass), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	data := bytes.Repeat([]byte("vmvault disk block "), 8192)
	id, _, _, err := s.PutChunk(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.PutDisk(ctx, int64(len(data)), []Extent{{Length: int64(len(data)), ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Commit(ctx, NewPoint{
		VM:   VMIdentity{Name: "web01", InstanceUUID: "4210a1b2-0000-0000-0000-000000000001"},
		Time: time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC), Consistency: "crash",
		Disks: []NewDisk{{Key: 2000, Label: "Hard disk 1", Capacity: int64(len(data)), Map: root}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// WithIDMAC initialises the repository with this blob id function.
func WithIDMAC(f string) TestOption { return func(c *testConfig) { c.init.IDMAC = f } }
