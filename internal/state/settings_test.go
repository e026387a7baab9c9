package state

import (
	"context"
	"fmt"

	"github.com/vmvault/vmvault/internal/state/schema"
)

// The settings bucket is service/settings' (schema.OwnerSettings); the
// tests of this package read and write its document the same way, through
// that owner's Store.

func (d *DB) GetSettings(ctx context.Context, v any) (bool, error) {
	st, err := d.Store(schema.OwnerSettings)
	if err != nil {
		return false, err
	}
	found := false
	err = st.View(func(tx *Tx) error {
		b, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		raw := b.Get(kSettings)
		if raw == nil {
			return nil
		}
		found = true
		return decode(raw, v)
	})
	if err != nil {
		return false, fmt.Errorf("read settings: %w", err)
	}
	return found, nil
}

func (d *DB) PutSettings(ctx context.Context, v any) error {
	raw, err := encode(v)
	if err != nil {
		return fmt.Errorf("store settings: %w", err)
	}
	st, err := d.Store(schema.OwnerSettings)
	if err != nil {
		return err
	}
	return st.Update(func(tx *Tx) error {
		b, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		return b.Put(kSettings, raw)
	})
}
