package settings

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/state/schema"
	"github.com/vmvault/vmvault/web/api"
)

func openDB(t *testing.T, path string) *state.DB {
	t.Helper()
	db, err := state.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// rawView and rawUpdate reach the settings bucket itself, as this package's
// state.Store does.
func rawView(t *testing.T, db *state.DB, fn func(b *state.Bucket) error) error {
	t.Helper()
	st, err := db.Store(schema.OwnerSettings)
	if err != nil {
		t.Fatal(err)
	}
	return st.View(func(tx *state.Tx) error {
		b, err := tx.Bucket(schema.BucketSettings)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

func rawUpdate(t *testing.T, db *state.DB, fn func(b *state.Bucket) error) error {
	t.Helper()
	st, err := db.Store(schema.OwnerSettings)
	if err != nil {
		t.Fatal(err)
	}
	return st.Update(func(tx *state.Tx) error {
		b, err := tx.Bucket(schema.BucketSettings)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

// Settings survive a reopen, and a value written the way web wrote it
// before this package existed (raw JSON under settings/settings) reads.
func TestBoltSettings(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db := openDB(t, path)
	b, err := NewBolt(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Settings(ctx); ok || err != nil {
		t.Fatalf("fresh store: ok %v, %v", ok, err)
	}
	want := api.Settings{TimeZone: "Europe/Paris", EventRetentionDays: 30}
	if err := b.PutSettings(ctx, want); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openDB(t, path)
	defer db.Close()
	var raw string
	if err := rawView(t, db, func(b *state.Bucket) error {
		raw = string(b.Get([]byte("settings")))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if raw != "\x01"+`{"timeZone":"Europe/Paris","eventRetentionDays":30}` { // schema.FormatJSON, then JSON
		t.Fatalf("stored value %s", raw)
	}
	if err := rawUpdate(t, db, func(b *state.Bucket) error {
		return b.Put([]byte("settings"), []byte("\x01"+`{"timeZone":"Asia/Tokyo","eventRetentionDays":7}`))
	}); err != nil {
		t.Fatal(err)
	}
	b, err = NewBolt(db)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.Settings(ctx)
	if err != nil || !ok || got != (api.Settings{TimeZone: "Asia/Tokyo", EventRetentionDays: 7}) {
		t.Fatalf("settings %+v ok %v: %v", got, ok, err)
	}
}

// A damaged value is an error naming what failed, not zero settings.
func TestBoltSettingsCorrupt(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "state.db"))
	defer db.Close()
	b, err := NewBolt(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := rawUpdate(t, db, func(b *state.Bucket) error {
		return b.Put([]byte("settings"), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Settings(context.Background()); err == nil {
		t.Fatal("corrupt settings read without an error")
	}
}
