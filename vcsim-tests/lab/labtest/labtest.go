// Package labtest is the one way the end-to-end suites (vcsim-tests/...)
// start their lab, log in to it and make a repository: a lab per test,
// closed at the end; a vsphere client pinned to the lab's certificate,
// with a fast retry policy; a test repository with chunks small enough that
// disks of a few MiB hold hundreds of them. Only tests import it.
package labtest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vsphere"
)

// StartTimeout bounds a lab's start.
const StartTimeout = 2 * time.Minute

// Start starts a lab for one test and closes it when the test ends.
func Start(t testing.TB, opts lab.Options) *lab.Lab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	l, err := lab.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

// Retry is the suites' retry policy: failures come fast in a lab.
var Retry = vsphere.RetryPolicy{Attempts: 3, Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}

// Config is a client configuration for the lab: its URL and credentials,
// its thumbprint pinned, applianceID, Retry; mod adjusts it.
func Config(l *lab.Lab, applianceID string, mod ...func(*vsphere.Config)) vsphere.Config {
	cfg := vsphere.Config{
		URL: l.URL().String(), Username: l.Username(), Password: l.Password(), Thumbprint: l.Thumbprint(),
		ApplianceID: applianceID, Retry: Retry,
	}
	for _, m := range mod {
		m(&cfg)
	}
	return cfg
}

// Connect logs a client in with cfg and logs it out when the test ends.
func Connect(t testing.TB, cfg vsphere.Config) *vsphere.Client {
	t.Helper()
	c, err := vsphere.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// Chunker has small chunks (16/64/256 KiB) so that disks of a few MiB hold
// hundreds of chunks.
var Chunker = repository.ChunkerConfig{Algorithm: "cdc", Polynomial: repository.TestChunker.Polynomial,
	MinSize: 16 << 10, AvgSize: 64 << 10, MaxSize: 256 << 10}

// Repo is a test repository (encrypted, cheap KDF, closed at the end) with
// Chunker; opts come after it and may override it.
func Repo(t testing.TB, opts ...repository.TestOption) *repository.Repository {
	t.Helper()
	return repository.TestRepository(t, append([]repository.TestOption{repository.WithChunker(Chunker)}, opts...)...)
}

// PointDisk reads disk idx of a restore point back through the repository,
// holes as zeros, to its full size.
func PointDisk(t testing.TB, r *repository.Repository, point string, idx int) []byte {
	t.Helper()
	ctx := context.Background()
	dr, err := r.OpenDisk(ctx, point, idx)
	if err != nil {
		t.Fatalf("open disk %d of %s: %v", idx, point, err)
	}
	defer dr.Close()
	var buf bytes.Buffer
	if _, err := dr.StreamTo(ctx, &buf, nil); err != nil {
		t.Fatalf("read disk %d of %s: %v", idx, point, err)
	}
	b := buf.Bytes()
	if int64(len(b)) < dr.Size() {
		b = append(b, make([]byte, dr.Size()-int64(len(b)))...)
	}
	return b
}

// SameBytes fails the test with the first differing offset.
func SameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	if bytes.Equal(got, want) {
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: first difference at offset %d (got %#x, want %#x)", what, i, got[i], want[i])
		}
	}
}
