package repository

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vmvault/vmvault/repository/storage"
)

// The appliance's configuration for disaster recovery (FORMAT.md §8b):
// the daemon saves its configuration (jobs, retention, users without
// secrets, settings) into every repository after each change, as an opaque
// blob sealed under the repository's key, so that a fresh appliance given
// only the repository's location and passphrase gets it back. Each save is
// a new object appconfig/<UTC nanoseconds, 20 digits>-<8 random bytes hex>
// (one atomic PUT: a crash leaves the previous save); the newest that
// verifies wins; older ones beyond the newest appConfigKeep are pruned.

var magicAppConfig = magic("vmvault appliance config v1")

const (
	appConfigPrefix = "appconfig/"
	appConfigKeep   = 3
	// MaxApplianceConfig bounds a saved appliance configuration.
	MaxApplianceConfig = 16 << 20
)

func appConfigAD(name string) []byte {
	return append(append([]byte(nil), magicAppConfig[:]...), name...)
}

func (c *codec) encodeAppConfig(name string, b []byte) []byte {
	out := append([]byte(nil), magicAppConfig[:]...)
	if c.encrypted {
		return append(out, c.sealMeta(b, appConfigAD(name))...)
	}
	out = append(out, b...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(b, crcTable))
}

func (c *codec) decodeAppConfig(name string, b []byte) ([]byte, error) {
	const what = "appliance configuration"
	if len(b) < 8 || !bytes.Equal(b[:8], magicAppConfig[:]) {
		return nil, formatErr(what, "bad magic")
	}
	b = b[8:]
	if c.encrypted {
		return c.openMeta(what, b, appConfigAD(name))
	}
	if len(b) < 4 || crc32.Checksum(b[:len(b)-4], crcTable) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, formatErr(what, "checksum mismatch")
	}
	return b[:len(b)-4], nil
}

// appConfigNames returns the saved configurations, newest first.
func (r *Repository) appConfigNames(ctx context.Context) ([]string, error) {
	var names []string
	err := r.store.List(ctx, appConfigPrefix, func(name string, _ int64) error {
		if _, ok := appConfigTime(name); ok {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list appliance configurations: %w", err)
	}
	slices.Sort(names)
	slices.Reverse(names)
	return names, nil
}

func appConfigTime(name string) (int64, bool) {
	base, ok := strings.CutPrefix(name, appConfigPrefix)
	if !ok {
		return 0, false
	}
	ts, rnd, ok := strings.Cut(base, "-")
	if !ok || len(ts) != 20 || len(rnd) != 16 || strings.Trim(ts, "0123456789") != "" {
		return 0, false
	}
	if _, err := hex.DecodeString(rnd); err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	return n, err == nil && n > 0
}

// SaveApplianceConfig stores b as the newest appliance configuration. It
// is durable when SaveApplianceConfig returns; a crash before leaves the
// previous one.
func (r *Repository) SaveApplianceConfig(ctx context.Context, b []byte) error {
	if err := r.writable("save appliance configuration"); err != nil {
		return err
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.leave()
	if len(b) > MaxApplianceConfig {
		return fmt.Errorf("save appliance configuration: %d bytes, at most %d", len(b), MaxApplianceConfig)
	}
	names, err := r.appConfigNames(ctx)
	if err != nil {
		return fmt.Errorf("save appliance configuration: %w", err)
	}
	// Newest wins by name: a clock that went back must not make this save
	// older than the last one.
	ts := r.now().UnixNano()
	if len(names) > 0 {
		if last, _ := appConfigTime(names[0]); ts <= last {
			ts = last + 1
		}
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	name := fmt.Sprintf("%s%020d-%s", appConfigPrefix, ts, hex.EncodeToString(rnd[:]))
	if err := storage.PutBytes(ctx, r.store, name, r.codec.encodeAppConfig(name, b),
		storage.Steps{Write: "appconfig.write", Fsync: "appconfig.fsync", Rename: "appconfig.rename", Dirsync: "appconfig.dirsync"}); err != nil {
		return fmt.Errorf("save appliance configuration: %w", err)
	}
	// Prune (best effort: an extra old save costs a few bytes).
	for i, n := range names {
		if i+1 >= appConfigKeep {
			_ = r.store.Delete(ctx, n)
		}
	}
	return nil
}

// LoadApplianceConfig returns the newest saved appliance configuration
// that verifies and when it was saved; ErrNotFound when there is none. A
// newer save that fails verification is skipped with a warning.
func (r *Repository) LoadApplianceConfig(ctx context.Context) ([]byte, time.Time, error) {
	if err := r.enter(); err != nil {
		return nil, time.Time{}, err
	}
	defer r.leave()
	names, err := r.appConfigNames(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, name := range names {
		raw, err := storage.ReadAll(ctx, r.store, name)
		if storage.IsNotExist(err) {
			continue // pruned meanwhile
		}
		if err == nil {
			var b []byte
			if b, err = r.codec.decodeAppConfig(name, raw); err == nil {
				ts, _ := appConfigTime(name)
				return b, time.Unix(0, ts).UTC(), nil
			}
		}
		r.warn(fmt.Sprintf("appliance configuration %s cannot be used (%v); trying an older one", r.objectPath(name), err))
	}
	return nil, time.Time{}, fmt.Errorf("appliance configuration: %w", ErrNotFound)
}
