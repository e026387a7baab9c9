package web

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var (
	bSettings = []byte("settings")
	kSettings = []byte("settings")
)

// BoltSettings keeps Settings as JSON in a bucket "settings" of a bbolt
// database the caller owns (the daemon's state.db).
type BoltSettings struct{ db *bolt.DB }

// NewBoltSettings creates the bucket if needed.
func NewBoltSettings(db *bolt.DB) (*BoltSettings, error) {
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bSettings); return err }); err != nil {
		return nil, fmt.Errorf("settings store: %w", err)
	}
	return &BoltSettings{db: db}, nil
}

// Settings implements SettingsStore.
func (b *BoltSettings) Settings(ctx context.Context) (Settings, bool, error) {
	var s Settings
	var ok bool
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bSettings).Get(kSettings)
		if v == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &s)
	})
	if err != nil {
		return Settings{}, false, fmt.Errorf("read settings: %w", err)
	}
	return s, ok, nil
}

// PutSettings implements SettingsStore.
func (b *BoltSettings) PutSettings(ctx context.Context, s Settings) error {
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bSettings).Put(kSettings, v) })
}
