package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/vmvault/vmvault/repository/storage"
	"github.com/vmvault/vmvault/repository/storage/storagetest"
)

// counter is a Limiter that lets everything pass and counts it.
type counter struct {
	mu    sync.Mutex
	bytes int64
	calls int
	fail  error
}

func (c *counter) WaitN(ctx context.Context, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes += int64(n)
	c.calls++
	return c.fail
}

func (c *counter) total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func TestLimitedConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		return storage.NewLimited(storage.NewLocal(t.TempDir(), false), &counter{}, &counter{})
	})
}

// Every byte uploaded and downloaded is charged to its own direction.
func TestLimitedCharges(t *testing.T) {
	ctx := context.Background()
	up, down := &counter{}, &counter{}
	s := storage.NewLimited(storage.NewLocal(t.TempDir(), false), up, down)
	big := bytes.Repeat([]byte("x"), 1<<20+17)

	if err := s.Put(ctx, "points/a", bytes.NewReader(big), int64(len(big)), storage.Steps{}); err != nil {
		t.Fatal(err)
	}
	if got := up.total(); got != int64(len(big)) {
		t.Fatalf("Put charged %d bytes up, want %d", got, len(big))
	}
	st, err := s.Create(ctx, "packs/00/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, storage.Steps{}); err != nil {
		t.Fatal(err)
	}
	if got := up.total(); got != 2*int64(len(big)) {
		t.Fatalf("staged write charged %d bytes up in all, want %d", got, 2*len(big))
	}
	if up.calls < 5 {
		t.Errorf("a 1 MiB write was charged in %d waits; want it paced in pieces", up.calls)
	}

	if _, err := s.GetRange(ctx, "points/a", 10, 100); err != nil {
		t.Fatal(err)
	}
	b, err := storage.ReadAll(ctx, s, "packs/00/b") // to the end: charged after
	if err != nil || len(b) != len(big) {
		t.Fatalf("ReadAll: %d bytes, %v", len(b), err)
	}
	o, err := s.Open(ctx, "packs/00/b")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	p := make([]byte, 4096)
	if _, err := o.ReadAt(p, 1000); err != nil {
		t.Fatal(err)
	}
	if got, want := down.total(), int64(100+len(big)+4096); got != want {
		t.Fatalf("downloads charged %d bytes, want %d", got, want)
	}
	if got := up.total(); got != 2*int64(len(big)) {
		t.Fatalf("reads charged uploads: %d", got)
	}

	// A limiter's error (a cancelled wait) fails the transfer.
	up.fail = context.Canceled
	err = s.Put(ctx, "points/c", bytes.NewReader(big), int64(len(big)), storage.Steps{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a failing limiter: %v", err)
	}
	if _, err := s.Stat(ctx, "points/c"); !storage.IsNotExist(err) {
		t.Fatalf("a failed limited Put left an object: %v", err)
	}
}

// As reaches the optional interfaces and the concrete backend through the
// wrapper; Limited itself hides them (it does not implement them).
func TestLimitedAs(t *testing.T) {
	local := storage.NewLocal(t.TempDir(), false)
	var s storage.Storage = storage.NewLimited(local, nil, nil)
	if _, ok := s.(storage.Exclusive); ok {
		t.Fatal("Limited itself implements Exclusive: its writes would bypass the limit unnoticed")
	}
	if l, ok := storage.As[*storage.Local](s); !ok || l != local {
		t.Fatal("As[*Local] did not unwrap")
	}
	if _, ok := storage.As[storage.Exclusive](s); !ok {
		t.Fatal("As[Exclusive] did not unwrap")
	}
	if _, ok := storage.As[storage.SpaceReporter](s); !ok {
		t.Fatal("As[SpaceReporter] did not unwrap")
	}
	if _, ok := storage.As[storage.CommitSender](s); ok {
		t.Fatal("a local directory claims to send at commit")
	}
	// Faulty does not unwrap: its faults must not be bypassed.
	if _, ok := storage.As[storage.Exclusive](storage.NewFaulty(local, nil)); ok {
		t.Fatal("As unwrapped Faulty")
	}
}

// PaceReader keeps a bytes.Reader's ReaderAt and Seeker (an S3 client
// sends parts in parallel and retries by seeking) and paces both paths.
func TestPaceReaderKeepsReaderAt(t *testing.T) {
	ctx := context.Background()
	c := &counter{}
	r := storage.PaceReader(ctx, bytes.NewReader(make([]byte, 1000)), c)
	ra, ok := r.(io.ReaderAt)
	if _, sk := r.(io.Seeker); !ok || !sk {
		t.Fatal("PaceReader dropped ReaderAt or Seeker")
	}
	if _, err := ra.ReadAt(make([]byte, 300), 100); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, r); err != nil || n != 1000 {
		t.Fatalf("copy: %d, %v", n, err)
	}
	if c.total() != 1300 {
		t.Fatalf("charged %d, want 1300", c.total())
	}
	if _, ok := storage.PaceReader(ctx, io.MultiReader(), c).(io.ReaderAt); ok {
		t.Fatal("PaceReader invented a ReaderAt")
	}
}
