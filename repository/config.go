package repository

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/vmvault/vmvault/repository/storage"
)

// ChunkerConfig is stored in the config; the repository only validates it,
// the caller's chunker uses it.
type ChunkerConfig struct {
	Algorithm  string `json:"algorithm"` // "cdc" | "fixed"
	Polynomial uint64 `json:"polynomial"`
	MinSize    int    `json:"min_size"`
	AvgSize    int    `json:"avg_size"`
	MaxSize    int    `json:"max_size"`
}

// Validate checks that the sizes are sane.
func (c ChunkerConfig) Validate() error {
	switch c.Algorithm {
	case "cdc":
		if c.Polynomial == 0 {
			return errors.New("chunker: cdc needs a polynomial")
		}
		if c.MinSize <= 0 || c.MinSize > c.AvgSize || c.AvgSize > c.MaxSize || c.MaxSize > MaxBlobSize {
			return fmt.Errorf("chunker: need 0 < min %d <= avg %d <= max %d <= %d", c.MinSize, c.AvgSize, c.MaxSize, MaxBlobSize)
		}
	case "fixed":
		if c.AvgSize <= 0 || c.AvgSize > MaxBlobSize || c.MinSize < 0 || c.MaxSize < 0 || c.MaxSize > MaxBlobSize {
			return fmt.Errorf("chunker: fixed size %d must be in (0, %d]", c.AvgSize, MaxBlobSize)
		}
	default:
		return fmt.Errorf("chunker: unknown algorithm %q (want cdc or fixed)", c.Algorithm)
	}
	return nil
}

// KDFParams are Argon2id parameters; the zero value means the defaults.
type KDFParams struct {
	Time      uint32 `json:"time"`
	MemoryKiB uint32 `json:"memory_kib"`
	Threads   uint8  `json:"threads"`
}

// DefaultKDF is used when InitOptions.KDF is zero: 32 MiB, two passes, two
// lanes, above OWASP's Argon2id minimums (19 MiB with t=2). Every command
// that opens the repository pays it; 32 MiB x 2 passes costs the same
// compute as 64 MiB x 1 but half the fresh pages, which on virtual machines
// are the larger cost (0.12 s against 0.35 s measured here).
var DefaultKDF = KDFParams{Time: 2, MemoryKiB: 32 << 10, Threads: 2}

// DefaultPackSize is the target pack size when InitOptions.PackSize is 0.
const DefaultPackSize = 32 << 20

// InitOptions configure a new repository.
type InitOptions struct {
	NoEncryption bool // encryption is ON unless this is set explicitly
	Chunker      ChunkerConfig
	KDF          KDFParams
	PackSize     int // 0 = DefaultPackSize
	// CompressionLevel is the zstd level writers use: "fastest", "default"
	// or "better" ("" = DefaultCompressionLevel). Readers do not need it.
	CompressionLevel string
	// ObjectLock makes an immutable repository (S3 with Object Lock only):
	// packs, commit records and time locks are written with this retention,
	// and nothing is deleted before it expires (objectlock.go).
	ObjectLock *ObjectLock
	// IDMAC is the keyed function of an encrypted repository's blob ids:
	// IDMACBLAKE3 or IDMACHMACSHA256 ("" = DefaultIDMAC). Unencrypted
	// repositories always use SHA-256.
	IDMAC string
	// KeyLabel labels the first key ("" = "init").
	KeyLabel string
	// CreateBucket lets Init create a missing S3 bucket (with Object Lock
	// when ObjectLock is set); without it a missing bucket is an error, so
	// a mistyped name creates nothing (see openInitStore).
	CreateBucket bool
	// MultiWriter makes a repository several appliances write at once
	// (format 2.0, FORMAT.md §12a); without it Init writes 1.4.
	MultiWriter bool
}

// Blob id functions of an encrypted repository (config encryption.id_mac).
const (
	IDMACHMACSHA256 = "hmac-sha256"  // format 1.0-1.2
	IDMACBLAKE3     = "blake3-keyed" // format 1.3
)

// DefaultIDMAC: every blob is hashed on write and its id recomputed on
// every read, and on a restore that hash was the largest cost (47 % of the
// CPU of a dense random disk's restore with HMAC-SHA-256). BLAKE3 in keyed
// mode (github.com/zeebo/blake3) runs at 4.0-4.25 GB/s per core here on
// 64 KiB-1 MiB blobs against 2.1 for SHA-256 on the SHA-NI instructions,
// 1.8 against 1.9 on 4 KiB ones (BenchmarkBlobID, docs/PERFORMANCE.md §2),
// with the same 256-bit strength as a MAC; Kopia's ids are keyed BLAKE2 or
// BLAKE3 hashes too.
const DefaultIDMAC = IDMACBLAKE3

// DefaultCompressionLevel is the level of the blobs above smallBlob (smaller
// ones are compressed at "fastest" whatever the level; zstd stores
// incompressible blocks raw at 4-7 GB/s at any level, so dense random data
// costs nothing to try). Measured on 2026-12-01 against restic 0.18 (zstd
// "default") with docs/PERFORMANCE.md's disk classes: on a 4 GiB ext4 of
// /usr/lib/x86_64-linux-gnu (753 MiB allocated) "default" stores 227.3 MB
// (restic 228.7) for 3.9 CPU-seconds, "better" 222.0 MB for 6.6; on the
// text image 118.2 MB (restic 119.5) for 1.1 CPU-s, "better" 115.1 MB for
// 1.8. "better" buys 1.5-3 % of stored bytes for 1.7x the CPU, which loses
// the 2x-restic wall-clock target whenever the two cores are shared
// (issue 15); "default" stays within 1 % of restic's stored bytes.
const DefaultCompressionLevel = "default"

func validLevel(l string) bool { return l == "fastest" || l == "default" || l == "better" }

// FormatVersion is the repository format version (major.minor).
type FormatVersion struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
}

func (v FormatVersion) String() string { return fmt.Sprintf("v%d.%d", v.Major, v.Minor) }

// Config describes an open repository.
type Config struct {
	ID          string        `json:"id"`
	Version     FormatVersion `json:"version"`
	Created     time.Time     `json:"created"`
	Chunker     ChunkerConfig `json:"chunker"`
	Encrypted   bool          `json:"encrypted"`
	PackSize    int           `json:"pack_size"`
	Compression string        `json:"compression"`
	// CompressionLevel is the zstd level writers use.
	CompressionLevel string `json:"compression_level"`
	// ObjectLock is the retention of an immutable repository (nil: none).
	ObjectLock *ObjectLock `json:"object_lock,omitempty"`
	// IDMAC is the keyed blob id function of an encrypted repository
	// ("" when unencrypted: SHA-256).
	IDMAC string `json:"id_mac,omitempty"`
	// MultiWriter: format 2.0, several writers at once (FORMAT.md §12a).
	MultiWriter bool `json:"multi_writer,omitempty"`
}

// configFile is the JSON stored in <dir>/config (FORMAT.md "Config").
type configFile struct {
	Format      string          `json:"format"`
	Version     FormatVersion   `json:"version"`
	ID          string          `json:"id"`
	Created     time.Time       `json:"created"`
	Chunker     ChunkerConfig   `json:"chunker"`
	PackSize    int             `json:"pack_size"`
	Compression string          `json:"compression"`
	Level       string          `json:"compression_level,omitempty"`
	Encryption  *encryptionFile `json:"encryption,omitempty"`
	ObjectLock  *ObjectLock     `json:"object_lock,omitempty"` // v1.2
	Writers     string          `json:"writers,omitempty"`     // v2.0: "multi" (§12a)
}

type encryptionFile struct {
	Cipher     string  `json:"cipher"` // "aes-256-gcm"
	IDMAC      string  `json:"id_mac"` // IDMACHMACSHA256 or IDMACBLAKE3 (v1.3)
	KDF        kdfFile `json:"kdf"`
	WrappedKey []byte  `json:"wrapped_key"` // nonce(12) || AES-256-GCM(kek, 64-byte master key)
	// KeyID names the key object (keys/<id>, v1.4) whose kdf and
	// wrapped_key these are; "" = a key of the config's own (before 1.4).
	KeyID string `json:"key_id,omitempty"`
}

type kdfFile struct {
	Name string `json:"name"` // "argon2id"
	KDFParams
	Salt []byte `json:"salt"`
}

const formatName = "vmvault repository"

func keyAD(repoID string) []byte { return append(append([]byte(nil), magicKey[:]...), repoID...) }

func deriveKEK(password []byte, k kdfFile) []byte {
	return argon2.IDKey(password, k.Salt, k.Time, k.MemoryKiB, k.Threads, 32)
}

// Init creates a repository at location (a local directory, which must be
// absent or empty, or an s3: URL whose bucket/prefix holds no config; see
// ParseLocation).
func Init(ctx context.Context, location string, password []byte, opts InitOptions) error {
	loc, err := ParseLocation(location)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	dir := location
	var store storage.Storage
	if err := validateInit(dir, password, opts); err != nil {
		return err
	}
	if loc.S3 == nil {
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			if _, err := os.Stat(filepath.Join(dir, "config")); err == nil {
				return fmt.Errorf("init %s: %w: a repository exists there already (open it with the other repo commands)", dir, ErrNotEmpty)
			}
			return fmt.Errorf("init %s: %w", dir, ErrNotEmpty)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("init %s: %w", dir, err)
		}
		for _, d := range []string{dir, filepath.Join(dir, "packs"), filepath.Join(dir, "points"), filepath.Join(dir, "locks")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return fmt.Errorf("init: %w", err)
			}
		}
	}
	if opts.ObjectLock != nil && loc.S3 == nil {
		return fmt.Errorf("init %s: an immutable repository needs an s3: location whose bucket has Object Lock (a local directory cannot refuse a delete)", location)
	}
	store, err = openInitStore(ctx, loc, opts)
	if err != nil {
		return fmt.Errorf("init %s: %w", location, err)
	}
	defer store.Close()
	if loc.S3 != nil {
		empty := true
		if err := store.List(ctx, "", func(string, int64) error { empty = false; return errStopList }); err != nil && err != errStopList {
			return fmt.Errorf("init %s: %w", location, err)
		}
		if !empty {
			return fmt.Errorf("init %s: %w", location, ErrNotEmpty)
		}
	}
	return initStore(ctx, store, dir, password, opts)
}

var errStopList = errors.New("stop listing")

func validateInit(dir string, password []byte, opts InitOptions) error {
	if err := opts.Chunker.Validate(); err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	if opts.PackSize == 0 {
		opts.PackSize = DefaultPackSize
	}
	if opts.PackSize < 1<<10 || opts.PackSize > 1<<30 {
		return fmt.Errorf("init %s: pack size %d out of range [1 KiB, 1 GiB]", dir, opts.PackSize)
	}
	if !opts.NoEncryption && len(password) == 0 {
		return fmt.Errorf("init %s: an encrypted repository needs a passphrase", dir)
	}
	if opts.ObjectLock != nil {
		if err := opts.ObjectLock.validate(); err != nil {
			return fmt.Errorf("init %s: %w", dir, err)
		}
	}
	if opts.IDMAC != "" && !ValidIDMAC(opts.IDMAC) {
		return fmt.Errorf("init %s: unknown id function %q (want %s or %s)", dir, opts.IDMAC, IDMACBLAKE3, IDMACHMACSHA256)
	}
	return nil
}

func initStore(ctx context.Context, store storage.Storage, dir string, password []byte, opts InitOptions) error {
	if opts.PackSize == 0 {
		opts.PackSize = DefaultPackSize
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var rid [16]byte
	if _, err := rand.Read(rid[:]); err != nil {
		return fmt.Errorf("init: random: %w", err)
	}
	cf := configFile{
		Format:      formatName,
		Version:     FormatVersion{FormatMajor, FormatMinor},
		ID:          hex.EncodeToString(rid[:]),
		Created:     time.Now().UTC().Truncate(time.Second),
		Chunker:     opts.Chunker,
		PackSize:    opts.PackSize,
		Compression: "zstd",
		Level:       opts.CompressionLevel,
		ObjectLock:  opts.ObjectLock,
	}
	if cf.Level == "" {
		cf.Level = DefaultCompressionLevel
	}
	if opts.MultiWriter {
		cf.Version, cf.Writers = MultiWriterVersion, writersMulti
	}
	if !validLevel(cf.Level) {
		return fmt.Errorf("init %s: unknown compression level %q (want fastest, default or better)", dir, cf.Level)
	}
	if !opts.NoEncryption {
		kdf := opts.KDF
		if kdf == (KDFParams{}) {
			kdf = DefaultKDF
		}
		if kdf.Time == 0 || kdf.Threads == 0 || kdf.MemoryKiB < 8*uint32(kdf.Threads) {
			return fmt.Errorf("init: bad argon2id parameters %+v", kdf)
		}
		master := make([]byte, 64)
		if _, err := rand.Read(master); err != nil {
			return err
		}
		// v1.4: the first key is a key object (keys/<id>, §4a) and the
		// config holds a copy of it for readers before 1.4.
		label := opts.KeyLabel
		if label == "" {
			label = "init"
		}
		kid, k, _, err := newKey(password, master, cf.ID, kdf, label, hostname())
		if err != nil {
			return fmt.Errorf("init %s: %w", dir, err)
		}
		kb, err := encodeKey(k)
		if err != nil {
			return err
		}
		if err := storage.PutBytes(ctx, store, keyName(kid), kb, keySteps); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		idMAC := opts.IDMAC // validateInit checked it
		if idMAC == "" {
			idMAC = DefaultIDMAC
		}
		cf.Encryption = &encryptionFile{Cipher: "aes-256-gcm", IDMAC: idMAC, KDF: k.KDF, WrappedKey: k.WrappedKey, KeyID: kid}
	}
	b, err := json.MarshalIndent(cf, "", "  ")
	if err != nil {
		return err
	}
	// config is written last: a directory without config is not a repository.
	if err := storage.PutBytes(ctx, store, "config", append(b, '\n'), configSteps); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	return nil
}

func wrapKey(kek, master, ad []byte) ([]byte, error) {
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcmNonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return g.Seal(nonce, nonce, master, ad), nil
}

func unwrapKey(kek, wrapped, ad []byte) ([]byte, error) {
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if len(wrapped) != gcmNonceSize+64+gcmTagSize {
		return nil, formatErr("config", "wrapped key has %d bytes", len(wrapped))
	}
	m, err := g.Open(nil, wrapped[:gcmNonceSize], wrapped[gcmNonceSize:], ad)
	if err != nil {
		return nil, ErrWrongPassword
	}
	return m, nil
}

// decodeConfig parses and validates config bytes; a newer major version is
// refused before anything else is interpreted.
func decodeConfig(b []byte) (configFile, error) {
	var cf configFile
	var head struct {
		Format  string        `json:"format"`
		Version FormatVersion `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return cf, formatErr("config", "%v", err)
	}
	if head.Format != formatName {
		return cf, formatErr("config", "format %q is not %q", head.Format, formatName)
	}
	if head.Version.Major > MaxFormatMajor {
		return cf, fmt.Errorf("%w: repository format %s is newer than this vmvault supports (%s); upgrade vmvault",
			ErrNewerFormat, head.Version, MultiWriterVersion)
	}
	if head.Version.Major < 1 {
		return cf, formatErr("config", "unsupported version %s", head.Version)
	}
	if err := json.Unmarshal(b, &cf); err != nil {
		return cf, formatErr("config", "%v", err)
	}
	if len(cf.ID) != 32 {
		return cf, formatErr("config", "bad repository id %q", cf.ID)
	}
	if _, err := hex.DecodeString(cf.ID); err != nil {
		return cf, formatErr("config", "bad repository id %q", cf.ID)
	}
	if err := cf.Chunker.Validate(); err != nil {
		return cf, formatErr("config", "%v", err)
	}
	if cf.PackSize < 1<<10 || cf.PackSize > 1<<30 {
		return cf, formatErr("config", "pack size %d out of range", cf.PackSize)
	}
	if cf.Compression != "zstd" {
		return cf, formatErr("config", "unknown compression %q", cf.Compression)
	}
	if err := checkWriters(cf); err != nil {
		return cf, err
	}
	if cf.Level == "" {
		cf.Level = "fastest"
	}
	if !validLevel(cf.Level) {
		return cf, formatErr("config", "unknown compression level %q", cf.Level)
	}
	if cf.ObjectLock != nil {
		if err := cf.ObjectLock.validate(); err != nil {
			return cf, formatErr("config", "%v", err)
		}
	}
	if e := cf.Encryption; e != nil {
		if e.Cipher != "aes-256-gcm" || !ValidIDMAC(e.IDMAC) || e.KDF.Name != "argon2id" {
			return cf, formatErr("config", "unsupported encryption %s/%s/%s", e.Cipher, e.IDMAC, e.KDF.Name)
		}
		if e.KDF.Time == 0 || e.KDF.Time > 100 || e.KDF.Threads == 0 || e.KDF.MemoryKiB < 8*uint32(e.KDF.Threads) ||
			e.KDF.MemoryKiB > 4<<20 || len(e.KDF.Salt) < 16 {
			return cf, formatErr("config", "bad argon2id parameters")
		}
		if e.KeyID != "" && !validKeyID(e.KeyID) {
			return cf, formatErr("config", "bad key id %q", e.KeyID)
		}
	}
	return cf, nil
}

// ValidIDMAC reports whether s names a blob id function this version knows.
func ValidIDMAC(s string) bool { return s == IDMACHMACSHA256 || s == IDMACBLAKE3 }

func (cf configFile) public() Config {
	var idMAC string
	if cf.Encryption != nil {
		idMAC = cf.Encryption.IDMAC
	}
	return Config{MultiWriter: cf.Writers == writersMulti, IDMAC: idMAC, ID: cf.ID, Version: cf.Version, Created: cf.Created, Chunker: cf.Chunker,
		Encrypted: cf.Encryption != nil, PackSize: cf.PackSize, Compression: cf.Compression, CompressionLevel: cf.Level, ObjectLock: cf.ObjectLock}
}

func jsonIndent(cf configFile) ([]byte, error) {
	b, err := json.MarshalIndent(cf, "", "  ")
	return append(b, '\n'), err
}

// MaxFormatMajor is the newest major version this vmvault reads: 2, the
// multi-writer format (FORMAT.md §12a). Init writes FormatMajor.FormatMinor
// (1.4) unless InitOptions.MultiWriter.
const MaxFormatMajor = 2

// MultiWriterVersion is the version of a multi-writer repository.
var MultiWriterVersion = FormatVersion{2, 0}

const writersMulti = "multi"

// checkWriters validates the config's writers field against its version.
func checkWriters(cf configFile) error {
	switch {
	case cf.Version.Major >= 2 && cf.Writers != writersMulti:
		return formatErr("config", "version %s needs \"writers\":\"multi\", got %q", cf.Version, cf.Writers)
	case cf.Version.Major < 2 && cf.Writers != "":
		return formatErr("config", "version %s has a writers field (%q); several writers need 2.0", cf.Version, cf.Writers)
	}
	return nil
}
