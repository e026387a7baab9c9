package state

import (
	"errors"
	"testing"

	"github.com/vmvault/vmvault/internal/state/schema"
)

// A Store opens its owner's buckets and refuses every other, whether it
// belongs to internal/state or to another owner.
func TestStoreRefusesForeignBuckets(t *testing.T) {
	d, path := openTemp(t)
	s, err := d.Store(schema.OwnerCopyJobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error {
		b, err := tx.Bucket(schema.BucketCopyJobs)
		if err != nil {
			return err
		}
		return b.Put([]byte("j1"), []byte{schema.FormatJSON, '{', '}'})
	}); err != nil {
		t.Fatalf("own bucket: %v", err)
	}
	for _, foreign := range [][]byte{schema.BucketApprovals, schema.BucketSettings, schema.BucketUsers, schema.BucketJobs, schema.BucketMeta, []byte("nope")} {
		err := s.Update(func(tx *Tx) error {
			b, err := tx.Bucket(foreign)
			if err != nil {
				return err
			}
			return b.Put([]byte("x"), []byte{schema.FormatJSON, '{', '}'})
		})
		if !errors.Is(err, ErrNotOwner) {
			t.Errorf("copy jobs' store opened bucket %s: %v", foreign, err)
		}
	}
	// Every owner but internal/state has a store reaching exactly its buckets.
	for _, b := range schema.Buckets {
		if b.By == schema.OwnerState {
			continue
		}
		s, err := d.Store(b.By)
		if err != nil {
			t.Fatalf("store of %s: %v", b.By, err)
		}
		if err := s.View(func(tx *Tx) error { _, err := tx.Bucket(b.Name); return err }); err != nil {
			t.Errorf("%s cannot open its bucket %s: %v", b.By, b.Name, err)
		}
	}
	for _, o := range []schema.Owner{schema.OwnerState, "service/nobody"} {
		if _, err := d.Store(o); !errors.Is(err, ErrNotOwner) {
			t.Errorf("store of %q: %v, want ErrNotOwner", o, err)
		}
	}
	// What the store wrote is there after a reopen, read the same way.
	d = reopen(t, d, path)
	s, _ = d.Store(schema.OwnerCopyJobs)
	var got []byte
	if err := s.View(func(tx *Tx) error {
		b, err := tx.Bucket(schema.BucketCopyJobs)
		if err != nil {
			return err
		}
		got = append(got, b.Get([]byte("j1"))...)
		return nil
	}); err != nil || string(got) != string([]byte{schema.FormatJSON, '{', '}'}) {
		t.Fatalf("after reopen: %q, %v", got, err)
	}
}
