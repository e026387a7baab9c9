// Package storagetest is the conformance suite every storage.Storage
// backend runs (Local in package storage, S3 in package s3store): the
// contract the repository's crash-safety rests on.
package storagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/repository/storage"
)

// Run runs the suite against fresh, empty stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) storage.Storage) {
	ctx := context.Background()
	t.Run("PutGetStat", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Stat(ctx, "config"); !storage.IsNotExist(err) {
			t.Fatalf("Stat of a missing object: %v, want ErrNotExist", err)
		}
		if _, err := storage.ReadAll(ctx, s, "points/x"); !storage.IsNotExist(err) {
			t.Fatalf("read of a missing object: %v, want ErrNotExist", err)
		}
		if _, err := s.Open(ctx, "packs/00/x"); !storage.IsNotExist(err) {
			t.Fatalf("Open of a missing object: %v, want ErrNotExist", err)
		}
		if err := storage.PutBytes(ctx, s, "points/abc", []byte("one"), storage.Steps{}); err != nil {
			t.Fatal(err)
		}
		// A Put replaces the whole object (a record's lock flag changes so).
		if err := storage.PutBytes(ctx, s, "points/abc", []byte("second"), storage.Steps{}); err != nil {
			t.Fatal(err)
		}
		b, err := storage.ReadAll(ctx, s, "points/abc")
		if err != nil || string(b) != "second" {
			t.Fatalf("read back %q, %v", b, err)
		}
		if n, err := s.Stat(ctx, "points/abc"); err != nil || n != 6 {
			t.Fatalf("Stat = %d, %v", n, err)
		}
		if b, err := s.GetRange(ctx, "points/abc", 2, 3); err != nil || string(b) != "con" {
			t.Fatalf("GetRange = %q, %v", b, err)
		}
		if _, err := s.GetRange(ctx, "points/abc", 4, 10); err == nil {
			t.Fatal("GetRange past the end succeeded")
		}
	})
	t.Run("StagedInvisibleUntilCommit", func(t *testing.T) {
		s := newStore(t)
		data := make([]byte, 3<<20+17)
		rand.Read(data)
		w, err := s.Create(ctx, "packs/ab/abcd")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data[:1000]); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, "packs/ab/abcd"); !storage.IsNotExist(err) {
			t.Fatalf("a staged object is visible before Commit: %v", err)
		}
		if names := list(t, s, ""); len(names) != 0 {
			t.Fatalf("List shows staging leftovers: %v", names)
		}
		w.Write(data[1000:])
		if err := w.Commit(ctx, storage.Steps{}); err != nil {
			t.Fatal(err)
		}
		o, err := s.Open(ctx, "packs/ab/abcd")
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if o.Size() != int64(len(data)) {
			t.Fatalf("size %d, want %d", o.Size(), len(data))
		}
		got, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back differs: %v", err)
		}
		// An aborted object never appears, and Clean leaves committed ones.
		w, _ = s.Create(ctx, "packs/cd/cdef")
		w.Write([]byte("partial"))
		w.Abort()
		w, _ = s.Create(ctx, "packs/ef/ef01")
		w.Write([]byte("crash: neither committed nor aborted"))
		if err := s.Clean(ctx); err != nil {
			t.Fatal(err)
		}
		if names := list(t, s, ""); len(names) != 1 || names[0] != "packs/ab/abcd" {
			t.Fatalf("after Abort and Clean: %v, want only packs/ab/abcd", names)
		}
	})
	t.Run("ListPrefixDelete", func(t *testing.T) {
		s := newStore(t)
		for _, n := range []string{"config", "points/p1", "points/p2", "packs/aa/aa1", "packs/bb/bb2"} {
			if err := storage.PutBytes(ctx, s, n, []byte(n), storage.Steps{}); err != nil {
				t.Fatal(err)
			}
		}
		if got := strings.Join(list(t, s, "points/"), ","); got != "points/p1,points/p2" {
			t.Fatalf("List(points/) = %s", got)
		}
		if got := strings.Join(list(t, s, "packs/"), ","); got != "packs/aa/aa1,packs/bb/bb2" {
			t.Fatalf("List(packs/) = %s", got)
		}
		if got := len(list(t, s, "")); got != 5 {
			t.Fatalf("List() = %d objects, want 5", got)
		}
		stop := errors.New("stop")
		if err := s.List(ctx, "", func(string, int64) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("List does not return fn's error: %v", err)
		}
		if err := s.Delete(ctx, "points/p1"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "points/p1"); err != nil {
			t.Fatalf("Delete of a missing object: %v", err)
		}
		if err := s.SyncDeletes(ctx, "points/"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(list(t, s, "points/"), ","); got != "points/p2" {
			t.Fatalf("after Delete: %s", got)
		}
	})
}

func list(t *testing.T, s storage.Storage, prefix string) []string {
	t.Helper()
	var out []string
	if err := s.List(context.Background(), prefix, func(n string, _ int64) error { out = append(out, n); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}
