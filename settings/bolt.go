package settings

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/state/schema"
	"github.com/vmvault/vmvault/web/api"
)

// The bucket and key internal/state/schema declares; values carry its
// format byte (internal/state/FORMAT.md).
var (
	bSettings = schema.BucketSettings
	kSettings = schema.KeySettings
)

// Bolt keeps api.Settings as JSON in a bucket "settings" of a bbolt
// database the caller owns (the daemon's state.db); it implements
// web.SettingsStore.
type Bolt struct{ db *bolt.DB }

// NewBolt creates the bucket if needed.
func NewBolt(db *bolt.DB) (*Bolt, error) {
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bSettings); return err }); err != nil {
		return nil, fmt.Errorf("settings store: %w", err)
	}
	return &Bolt{db: db}, nil
}

// Settings returns the saved settings; false when none were ever saved.
func (b *Bolt) Settings(ctx context.Context) (api.Settings, bool, error) {
	var s api.Settings
	var ok bool
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bSettings).Get(kSettings)
		if v == nil {
			return nil
		}
		ok = true
		return schema.Decode(v, &s)
	})
	if err != nil {
		return api.Settings{}, false, fmt.Errorf("read settings: %w", err)
	}
	return s, ok, nil
}

// PutSettings saves s, replacing what was saved.
func (b *Bolt) PutSettings(ctx context.Context, s api.Settings) error {
	v, err := schema.Encode(s)
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bSettings).Put(kSettings, v) }); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	return nil
}
