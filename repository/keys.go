package repository

// Several keys per repository (FORMAT.md §4a, v1.4): each key object
// keys/<id> holds one wrapped copy of the 64-byte master key under a KEK of
// its own (Argon2id of its own passphrase and salt); the config's
// encryption.wrapped_key is a copy of one of them (encryption.key_id names
// it) or, in a repository written before 1.4, a key of its own (the
// "config" key).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/repository/storage"
)

const (
	keysPrefix = "keys/"
	// MaxKeys bounds the key objects Open tries (each costs one Argon2id
	// derivation with its own parameters) and AddKey writes.
	MaxKeys = 64
	// ConfigKeyID names the key held only in the config of a repository
	// written before format 1.4 (no key object of its own).
	ConfigKeyID   = "config"
	keyFormatName = "vmvault key"
	maxKeyObject  = 64 << 10
	maxKeyLabel   = 256
	// Key object KDF limits: stricter than the config's, so that a hostile
	// key object costs Open at most 1 GiB and 10 passes, and so that any
	// key object can be copied into the config.
	maxKeyKDFTime    = 10
	maxKeyKDFMemory  = 1 << 20 // KiB = 1 GiB
	maxKeyKDFThreads = 16
)

var (
	// ErrLastKey: removing the key would leave the repository without one.
	ErrLastKey = errors.New("it is the repository's only key")
	// ErrKeyInUse: the key is the one whose passphrase opened the repository.
	ErrKeyInUse = errors.New("it is the key this passphrase opened the repository with")
	// ErrNotEncrypted: an unencrypted repository has no keys.
	ErrNotEncrypted = errors.New("repository is not encrypted")
)

var keySteps = storage.Steps{Write: "key.write", Fsync: "key.fsync", Rename: "key.rename", Dirsync: "key.dirsync"}

// keyFile is the JSON of keys/<id> (FORMAT.md §4a).
type keyFile struct {
	Format     string    `json:"format"`  // "vmvault key"
	Version    int       `json:"version"` // 1
	Created    time.Time `json:"created"`
	Label      string    `json:"label,omitempty"`
	Host       string    `json:"host,omitempty"`
	KDF        kdfFile   `json:"kdf"`
	WrappedKey []byte    `json:"wrapped_key"` // nonce(12) || AES-256-GCM(KEK, master, AD = magic key || config id)
}

func encodeKey(k keyFile) ([]byte, error) {
	b, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// checkKeyKDF validates a key object's (or a new key's) Argon2id parameters.
func checkKeyKDF(k kdfFile) error {
	if k.Name != "argon2id" {
		return fmt.Errorf("unsupported kdf %q (want argon2id)", k.Name)
	}
	switch {
	case k.Time == 0 || k.Time > maxKeyKDFTime:
		return fmt.Errorf("argon2id time %d out of range [1, %d]", k.Time, maxKeyKDFTime)
	case k.Threads == 0 || k.Threads > maxKeyKDFThreads:
		return fmt.Errorf("argon2id threads %d out of range [1, %d]", k.Threads, maxKeyKDFThreads)
	case k.MemoryKiB < 8*uint32(k.Threads) || k.MemoryKiB > maxKeyKDFMemory:
		return fmt.Errorf("argon2id memory %d KiB out of range [%d KiB, 1 GiB]", k.MemoryKiB, 8*uint32(k.Threads))
	case len(k.Salt) < 16 || len(k.Salt) > 64:
		return fmt.Errorf("salt of %d bytes (want 16 to 64)", len(k.Salt))
	}
	return nil
}

// decodeKey parses and validates a key object; it never derives anything.
func decodeKey(b []byte) (keyFile, error) {
	var k keyFile
	if len(b) > maxKeyObject {
		return k, fmt.Errorf("key object of %d bytes (at most %d)", len(b), maxKeyObject)
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("key object: %v", err)
	}
	if k.Format != keyFormatName {
		return k, fmt.Errorf("key object: format %q is not %q", k.Format, keyFormatName)
	}
	if k.Version != 1 {
		return k, fmt.Errorf("key object: unsupported version %d (this vmvault reads 1)", k.Version)
	}
	if err := checkKeyKDF(k.KDF); err != nil {
		return k, fmt.Errorf("key object: %v", err)
	}
	if len(k.WrappedKey) != gcmNonceSize+64+gcmTagSize {
		return k, fmt.Errorf("key object: wrapped key has %d bytes (want %d)", len(k.WrappedKey), gcmNonceSize+64+gcmTagSize)
	}
	if len(k.Label) > maxKeyLabel || !utf8.ValidString(k.Label) || len(k.Host) > maxKeyLabel || !utf8.ValidString(k.Host) {
		return k, errors.New("key object: label or host too long or not UTF-8")
	}
	return k, nil
}

// validKeyID: 16 random bytes in lowercase hex.
func validKeyID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func keyName(id string) string { return keysPrefix + id }

// listKeyIDs returns the ids of the key objects, sorted; names that are not
// key ids are reported in bad.
func listKeyIDs(ctx context.Context, store storage.Storage) (ids, bad []string, err error) {
	err = store.List(ctx, keysPrefix, func(name string, _ int64) error {
		id := strings.TrimPrefix(name, keysPrefix)
		if validKeyID(id) {
			ids = append(ids, id)
		} else {
			bad = append(bad, name)
		}
		return nil
	})
	sort.Strings(ids)
	return ids, bad, err
}

// readKey reads and decodes keys/<id>, refusing an oversized object before
// reading it.
func readKey(ctx context.Context, store storage.Storage, id string) (keyFile, error) {
	size, err := store.Stat(ctx, keyName(id))
	if err != nil {
		return keyFile{}, err
	}
	if size > maxKeyObject {
		return keyFile{}, fmt.Errorf("key object of %d bytes (at most %d)", size, maxKeyObject)
	}
	b, err := storage.ReadAll(ctx, store, keyName(id))
	if err != nil {
		return keyFile{}, err
	}
	return decodeKey(b)
}

func sameKey(a, b kdfFile, wa, wb []byte) bool {
	return a.KDFParams == b.KDFParams && bytes.Equal(a.Salt, b.Salt) && bytes.Equal(wa, wb)
}

// openMaster unwraps the master key with password: the config's copy
// first, then each key object in id order (at most MaxKeys, each one
// Argon2id derivation with that key's parameters). It returns the id of the
// key that opened it and warnings about key objects it skipped.
func openMaster(ctx context.Context, store storage.Storage, cf configFile, password []byte) (master []byte, used string, warns []string, err error) {
	e := cf.Encryption
	ad := keyAD(cf.ID)
	m, cerr := unwrapKey(deriveKEK(password, e.KDF), e.WrappedKey, ad)
	if cerr == nil {
		used = e.KeyID
		if used == "" {
			used = ConfigKeyID
		}
		return m, used, nil, nil
	}
	ids, bad, err := listKeyIDs(ctx, store)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list keys: %w", err)
	}
	for _, n := range bad {
		warns = append(warns, fmt.Sprintf("%s: not a key object name, ignored", n))
	}
	tried := 0
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, "", warns, err
		}
		k, err := readKey(ctx, store, id)
		if storage.IsNotExist(err) {
			continue // removed meanwhile (a read-only open while the owner changes keys)
		}
		if err != nil {
			warns = append(warns, fmt.Sprintf("%s: %v; skipped", keyName(id), err))
			continue
		}
		if id == e.KeyID && sameKey(k.KDF, e.KDF, k.WrappedKey, e.WrappedKey) {
			continue // the config's copy, already tried
		}
		if tried == MaxKeys {
			warns = append(warns, fmt.Sprintf("more than %d key objects: only the first %d were tried", MaxKeys, MaxKeys))
			break
		}
		tried++
		if m, err := unwrapKey(deriveKEK(password, k.KDF), k.WrappedKey, ad); err == nil {
			return m, id, warns, nil
		}
	}
	if tried == 0 {
		return nil, "", warns, cerr // ErrWrongPassword, or a damaged config key, and no key object to try
	}
	return nil, "", warns, fmt.Errorf("%w (tried the config key and %d key objects)", ErrWrongPassword, tried)
}

// newKey wraps master under a fresh salt and kdf.
func newKey(password, master []byte, repoID string, kdf KDFParams, label, host string) (string, keyFile, []byte, error) {
	if kdf == (KDFParams{}) {
		kdf = DefaultKDF
	}
	k := keyFile{Format: keyFormatName, Version: 1, Created: time.Now().UTC().Truncate(time.Second),
		Label: label, Host: host, KDF: kdfFile{Name: "argon2id", KDFParams: kdf, Salt: make([]byte, 32)}}
	if err := checkKeyKDF(k.KDF); err != nil {
		return "", k, nil, err
	}
	if len(label) > maxKeyLabel || !utf8.ValidString(label) {
		return "", k, nil, fmt.Errorf("label: at most %d bytes of UTF-8", maxKeyLabel)
	}
	if len(host) > maxKeyLabel {
		host = host[:maxKeyLabel]
		k.Host = host
	}
	var rid [16]byte
	if _, err := rand.Read(rid[:]); err != nil {
		return "", k, nil, err
	}
	if _, err := rand.Read(k.KDF.Salt); err != nil {
		return "", k, nil, err
	}
	kek := deriveKEK(password, k.KDF)
	w, err := wrapKey(kek, master, keyAD(repoID))
	if err != nil {
		return "", k, nil, err
	}
	k.WrappedKey = w
	return hex.EncodeToString(rid[:]), k, kek, nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// KeyOptions describe a new key.
type KeyOptions struct {
	Label string
	Host  string    // "" = this host's name
	KDF   KDFParams // zero = DefaultKDF (a fresh salt always)
}

// KeyInfo describes one key of an encrypted repository.
type KeyInfo struct {
	ID       string    `json:"id"` // 32 hex, or ConfigKeyID for a pre-1.4 config's own key
	Label    string    `json:"label,omitempty"`
	Host     string    `json:"host,omitempty"`
	Created  time.Time `json:"created"`
	KDF      KDFParams `json:"kdf"`
	InConfig bool      `json:"inConfig"` // the config's wrapped_key is this key (what readers before 1.4 use)
	Current  bool      `json:"current"`  // this process opened the repository with it
	Err      string    `json:"error,omitempty"`
}

// CurrentKey returns the id of the key that opened the repository ("" when
// unencrypted).
func (r *Repository) CurrentKey() string {
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	return r.usedKey
}

// Keys lists the repository's keys, oldest first; a key object that does
// not decode is listed with Err set.
func (r *Repository) Keys(ctx context.Context) ([]KeyInfo, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	keys, _, err := r.keysLocked(ctx)
	return keys, err
}

func (r *Repository) keysLocked(ctx context.Context) ([]KeyInfo, map[string]keyFile, error) {
	e := r.cfile.Encryption
	if e == nil {
		return nil, nil, ErrNotEncrypted
	}
	var out []KeyInfo
	if e.KeyID == "" {
		out = append(out, KeyInfo{ID: ConfigKeyID, Label: "(config)", Created: r.cfile.Created, KDF: e.KDF.KDFParams, InConfig: true})
	}
	ids, bad, err := listKeyIDs(ctx, r.store)
	if err != nil {
		return nil, nil, fmt.Errorf("list keys: %w", err)
	}
	files := map[string]keyFile{}
	for _, id := range ids {
		k, err := readKey(ctx, r.store, id)
		if storage.IsNotExist(err) {
			continue
		}
		ki := KeyInfo{ID: id, InConfig: id == e.KeyID}
		if err != nil {
			ki.Err = err.Error()
		} else {
			files[id] = k
			ki.Label, ki.Host, ki.Created, ki.KDF = k.Label, k.Host, k.Created, k.KDF.KDFParams
		}
		out = append(out, ki)
	}
	for _, n := range bad {
		out = append(out, KeyInfo{ID: strings.TrimPrefix(n, keysPrefix), Err: "not a key object name"})
	}
	if _, ok := files[e.KeyID]; e.KeyID != "" && !ok && !slices.Contains(ids, e.KeyID) {
		// The object the config copies is gone (deleted by hand): the
		// config's copy still works and is listed, so it can be replaced.
		out = append(out, KeyInfo{ID: e.KeyID, Label: "(only in the config: its key object is missing)", Created: r.cfile.Created, KDF: e.KDF.KDFParams, InConfig: true})
	}
	for i := range out {
		out[i].Current = out[i].ID == r.usedKey
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, files, nil
}

func (r *Repository) keyWritable(op string) error {
	if err := r.writable(op); err != nil {
		return err
	}
	if r.cfile.Encryption == nil {
		return fmt.Errorf("%s: %w: it has no keys", op, ErrNotEncrypted)
	}
	if (r.cfile.Version.Major != FormatMajor || r.cfile.Version.Minor > FormatMinor) && r.cfile.Version != MultiWriterVersion {
		return fmt.Errorf("%s: repository format %s is newer than this vmvault (%s): upgrade vmvault to change its keys",
			op, r.cfile.Version, FormatVersion{FormatMajor, FormatMinor})
	}
	return nil
}

// AddKey adds a key for password (fresh salt, opts.KDF or DefaultKDF). The
// key object is read back and unwrapped before AddKey returns.
func (r *Repository) AddKey(ctx context.Context, password []byte, opts KeyOptions) (KeyInfo, error) {
	if err := r.enter(); err != nil {
		return KeyInfo{}, err
	}
	defer r.leave()
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	return r.addKeyLocked(ctx, password, opts)
}

func (r *Repository) addKeyLocked(ctx context.Context, password []byte, opts KeyOptions) (KeyInfo, error) {
	if err := r.keyWritable("add key"); err != nil {
		return KeyInfo{}, err
	}
	if len(password) == 0 {
		return KeyInfo{}, errors.New("add key: the new passphrase is empty")
	}
	ids, _, err := listKeyIDs(ctx, r.store)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("add key: list keys: %w", err)
	}
	if len(ids) >= MaxKeys {
		return KeyInfo{}, fmt.Errorf("add key: the repository has %d key objects, the most Open tries; remove one first", len(ids))
	}
	host := opts.Host
	if host == "" {
		host = hostname()
	}
	id, k, kek, err := newKey(password, r.master, r.cfile.ID, opts.KDF, opts.Label, host)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("add key: %w", err)
	}
	b, err := encodeKey(k)
	if err != nil {
		return KeyInfo{}, err
	}
	if err := storage.PutBytes(ctx, r.store, keyName(id), b, keySteps); err != nil {
		return KeyInfo{}, fmt.Errorf("add key: %w", err)
	}
	// Read it back: a key is added only once it is known to open the
	// repository.
	got, err := readKey(ctx, r.store, id)
	if err == nil && !sameKey(got.KDF, k.KDF, got.WrappedKey, k.WrappedKey) {
		err = errors.New("read back different bytes")
	}
	if err == nil {
		var m []byte
		if m, err = unwrapKey(kek, got.WrappedKey, keyAD(r.cfile.ID)); err == nil && !bytes.Equal(m, r.master) {
			err = errors.New("unwraps to another master key")
		}
	}
	if err != nil {
		r.store.Delete(ctx, keyName(id))
		return KeyInfo{}, fmt.Errorf("add key: verify %s: %w", keyName(id), err)
	}
	return KeyInfo{ID: id, Label: k.Label, Host: k.Host, Created: k.Created, KDF: k.KDF.KDFParams}, nil
}

// resolveKey finds id (whole or a unique prefix, or ConfigKeyID) in keys.
func resolveKey(keys []KeyInfo, id string) (KeyInfo, error) {
	var found []KeyInfo
	for _, k := range keys {
		if k.ID == id {
			return k, nil
		}
		if id != "" && strings.HasPrefix(k.ID, id) {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return KeyInfo{}, fmt.Errorf("key %q: %w", id, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return KeyInfo{}, fmt.Errorf("key %q matches %d keys: give more of its id", id, len(found))
}

// RemoveKey removes a key. It refuses the last working key (ErrLastKey)
// and the key that opened the repository (ErrKeyInUse: open with another
// key's passphrase, or use ChangePassword). Removing the key the config
// holds first copies another key into the config (one atomic config
// write), then deletes the key object.
func (r *Repository) RemoveKey(ctx context.Context, id string) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.leave()
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	return r.removeKeyLocked(ctx, id, false)
}

func (r *Repository) removeKeyLocked(ctx context.Context, id string, allowCurrent bool) error {
	if err := r.keyWritable("remove key"); err != nil {
		return err
	}
	keys, files, err := r.keysLocked(ctx)
	if err != nil {
		return fmt.Errorf("remove key: %w", err)
	}
	target, err := resolveKey(keys, id)
	if err != nil {
		return fmt.Errorf("remove key: %w", err)
	}
	var repl *KeyInfo // the newest other working key object
	others := 0
	for i := range keys {
		k := keys[i]
		if k.ID == target.ID || k.Err != "" {
			continue
		}
		others++
		// The config takes the key in use if it can (it is known to
		// work), else the newest other key object.
		if k.ID != ConfigKeyID && (repl == nil || repl.ID != r.usedKey && (k.ID == r.usedKey || !k.Created.Before(repl.Created))) {
			repl = &keys[i]
		}
	}
	if target.Err == "" && others == 0 {
		return fmt.Errorf("remove key %s: %w: add another (repo key add) first", target.ID, ErrLastKey)
	}
	if target.ID == r.usedKey && !allowCurrent {
		return fmt.Errorf("remove key %s: %w; open the repository with another key's passphrase to remove it, or change it with repo passwd", target.ID, ErrKeyInUse)
	}
	if target.InConfig {
		if repl == nil {
			return fmt.Errorf("remove key %s: %w: the config needs a key object to hold instead", target.ID, ErrLastKey)
		}
		if err := r.setConfigKey(ctx, repl.ID, files[repl.ID]); err != nil {
			return fmt.Errorf("remove key %s: %w", target.ID, err)
		}
	}
	if target.ID != ConfigKeyID {
		if err := failpoint.Hit("key.delete"); err != nil {
			return fmt.Errorf("remove key %s: %w", target.ID, err)
		}
		if err := r.store.Delete(ctx, keyName(target.ID)); err != nil {
			return fmt.Errorf("remove key %s: %w", target.ID, err)
		}
		if err := r.store.SyncDeletes(ctx, keysPrefix); err != nil {
			return fmt.Errorf("remove key %s: %w", target.ID, err)
		}
	}
	return nil
}

// setConfigKey rewrites the config (one atomic put) with key object id's
// wrapped copy of the master key.
func (r *Repository) setConfigKey(ctx context.Context, id string, k keyFile) error {
	cf := r.cfile
	enc := *cf.Encryption
	enc.KDF, enc.WrappedKey, enc.KeyID = k.KDF, k.WrappedKey, id
	cf.Encryption = &enc
	b, err := jsonIndent(cf)
	if err != nil {
		return err
	}
	if err := storage.PutBytes(ctx, r.store, "config", b, configSteps); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	r.cfile = cf
	return nil
}

// ChangePassword replaces the key that opened the repository by a new one
// for password: a fresh salt and the current DefaultKDF (or opts.KDF), so
// it also rotates the key-encryption key. The new key is written and
// verified before the old one is removed: a crash in between leaves both.
// The master key (encryption and id keys) is not changed.
func (r *Repository) ChangePassword(ctx context.Context, password []byte, opts KeyOptions) (added KeyInfo, removed string, err error) {
	if err := r.enter(); err != nil {
		return KeyInfo{}, "", err
	}
	defer r.leave()
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	old := r.usedKey
	added, err = r.addKeyLocked(ctx, password, opts)
	if err != nil {
		return KeyInfo{}, "", fmt.Errorf("change passphrase: %w", err)
	}
	r.usedKey = added.ID
	if err := failpoint.Hit("key.passwd"); err != nil {
		return added, "", fmt.Errorf("change passphrase: new key %s added, old key %s still works (remove it with repo key remove): %w", added.ID, old, err)
	}
	if err := r.removeKeyLocked(ctx, old, true); err != nil {
		return added, "", fmt.Errorf("change passphrase: new key %s added, old key %s still works (remove it with repo key remove): %w", added.ID, old, err)
	}
	return added, old, nil
}
