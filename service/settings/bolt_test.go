package settings

import (
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/web/api"
)

func openDB(t *testing.T, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
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
	if err := db.View(func(tx *bolt.Tx) error {
		raw = string(tx.Bucket([]byte("settings")).Get([]byte("settings")))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if raw != "\x01"+`{"timeZone":"Europe/Paris","eventRetentionDays":30}` { // schema.FormatJSON, then JSON
		t.Fatalf("stored value %s", raw)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("settings")).Put([]byte("settings"), []byte("\x01"+`{"timeZone":"Asia/Tokyo","eventRetentionDays":7}`))
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
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("settings")).Put([]byte("settings"), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Settings(context.Background()); err == nil {
		t.Fatal("corrupt settings read without an error")
	}
}
