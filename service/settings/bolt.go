package settings

import (
	"context"
	"fmt"
	"slices"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/state/schema"
	"github.com/vmvault/vmvault/web/api"
)

// The bucket and key internal/state/schema declares; values carry its
// format byte (internal/state/FORMAT.md).
var (
	bSettings = schema.BucketSettings
	kSettings = schema.KeySettings
)

// Bolt keeps api.Settings as JSON in the bucket "settings" of the daemon's
// state.db, through this package's state.Store (which refuses every other
// bucket); it implements web.SettingsStore.
type Bolt struct {
	db   *state.Store
	seal *Sealer // nil: no secret can be saved
}

// NewBolt keeps the settings in db (state.Open created the bucket).
func NewBolt(db *state.DB, opts ...Option) (*Bolt, error) {
	st, err := db.Store(schema.OwnerSettings)
	if err != nil {
		return nil, fmt.Errorf("settings store: %w", err)
	}
	b := &Bolt{db: st}
	for _, o := range opts {
		o(b)
	}
	return b, nil
}

// Settings returns the saved settings; false when none were ever saved.
func (b *Bolt) Settings(ctx context.Context) (api.Settings, bool, error) {
	var s api.Settings
	var ok bool
	err := b.db.View(func(tx *state.Tx) error {
		bk, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		v := bk.Get(kSettings)
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
	if err := b.db.Update(func(tx *state.Tx) error {
		bk, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		return bk.Put(kSettings, v)
	}); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	return nil
}

func (b *Bolt) get(key string, v any) (bool, error) {
	var ok bool
	err := b.db.View(func(tx *state.Tx) error {
		bk, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		raw := bk.Get([]byte(key))
		if raw == nil {
			return nil
		}
		ok = true
		return schema.Decode(raw, v)
	})
	if err != nil {
		return false, fmt.Errorf("read %s settings: %w", key, err)
	}
	return ok, nil
}

func (b *Bolt) put(key string, v any) error {
	raw, err := schema.Encode(v)
	if err != nil {
		return fmt.Errorf("encode %s settings: %w", key, err)
	}
	if err := b.db.Update(func(tx *state.Tx) error {
		bk, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		return bk.Put([]byte(key), raw)
	}); err != nil {
		return fmt.Errorf("save %s settings: %w", key, err)
	}
	return nil
}

// DeleteSection forgets a saved section (vcenter, smtp or maintenance): the
// configuration file's wins again.
func (b *Bolt) DeleteSection(ctx context.Context, section string) error {
	switch section {
	case SectionVCenter, SectionSMTP, SectionMaintenance:
	default:
		return fmt.Errorf("settings section %q: %w", section, api.ErrNotFound)
	}
	if err := b.db.Update(func(tx *state.Tx) error {
		bk, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		return bk.Delete([]byte(section))
	}); err != nil {
		return fmt.Errorf("reset %s settings: %w", section, err)
	}
	return nil
}

// RemoveRepository forgets a repository added from the console (it is no
// longer opened at start) and returns what was recorded, for its
// passphrase file; a name not recorded is api.ErrNotFound.
func (b *Bolt) RemoveRepository(ctx context.Context, name string) (Repo, error) {
	var gone Repo
	err := b.db.Update(func(tx *state.Tx) error {
		bk, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		var list []Repo
		if raw := bk.Get([]byte(keyRepositories)); raw != nil {
			if err := schema.Decode(raw, &list); err != nil {
				return fmt.Errorf("read repositories settings: %w", err)
			}
		}
		i := slices.IndexFunc(list, func(r Repo) bool { return r.Name == name })
		if i < 0 {
			return fmt.Errorf("repository %q was not added from the console: %w", name, api.ErrNotFound)
		}
		gone = list[i]
		raw, err := schema.Encode(slices.Delete(list, i, i+1))
		if err != nil {
			return err
		}
		return bk.Put([]byte(keyRepositories), raw)
	})
	return gone, err
}

// AddRepository records a repository added from the console; a name
// already recorded is api.ErrConflict.
func (b *Bolt) AddRepository(ctx context.Context, r Repo) error {
	return b.db.Update(func(tx *state.Tx) error {
		bk, err := tx.Bucket(bSettings)
		if err != nil {
			return err
		}
		var list []Repo
		if raw := bk.Get([]byte(keyRepositories)); raw != nil {
			if err := schema.Decode(raw, &list); err != nil {
				return fmt.Errorf("read repositories settings: %w", err)
			}
		}
		for _, x := range list {
			if x.Name == r.Name {
				return fmt.Errorf("repository %q: %w", r.Name, api.ErrConflict)
			}
		}
		raw, err := schema.Encode(append(list, r))
		if err != nil {
			return err
		}
		return bk.Put([]byte(keyRepositories), raw)
	})
}
