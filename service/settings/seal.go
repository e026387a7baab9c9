package settings

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// KeyFileName is the sealing key's file in the state directory.
const KeyFileName = "settings.key"

const (
	keySize    = 32 // AES-256
	sealPrefix = "v1:"
)

// ErrNoKey is a secret to seal or open without a key.
var ErrNoKey = errors.New("no settings key")

// Sealer encrypts the secrets the console saves (the vCenter and SMTP
// passwords) with AES-256-GCM under a random key kept in a file of its
// own (mode 0600) beside state.db, never inside it: a copy of state.db
// alone, or a log, never shows a password. A sealed value is "v1:" and
// the base64 (standard, padded) of a 12-byte random nonce followed by the
// GCM ciphertext and tag. Losing the key file loses the saved passwords
// (they are entered again); the rest of the settings still read.
type Sealer struct{ aead cipher.AEAD }

// OpenKeyFile reads the key file at path, creating it (0600, 32 random
// bytes) when it does not exist. A file of the wrong size is an error, not
// replaced: it would make every sealed secret unreadable.
func OpenKeyFile(path string) (*Sealer, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, keySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("settings key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create settings key %s: %w", path, err)
		}
		_, werr := f.Write(key)
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			_ = os.Remove(path)
			return nil, fmt.Errorf("write settings key %s: %w", path, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("read settings key: %w", err)
	}
	if len(key) != keySize {
		return nil, fmt.Errorf("settings key %s: %d bytes, want %d", path, len(key), keySize)
	}
	return NewSealer(key)
}

// NewSealer returns a sealer over a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != keySize {
		return nil, fmt.Errorf("settings key: %d bytes, want %d", len(key), keySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: g}, nil
}

// Seal encrypts a secret; "" stays "".
func (s *Sealer) Seal(plain string) (string, error) {
	if plain == "" {
		return "", nil
	}
	if s == nil {
		return "", ErrNoKey
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	return sealPrefix + base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(plain), nil)), nil
}

// Open decrypts what Seal made; "" stays "".
func (s *Sealer) Open(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	if s == nil {
		return "", ErrNoKey
	}
	b64, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok {
		return "", errors.New("open sealed secret: unknown format")
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) < s.aead.NonceSize()+s.aead.Overhead() {
		return "", errors.New("open sealed secret: damaged")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, b[:n], b[n:], nil)
	if err != nil {
		return "", errors.New("open sealed secret: wrong key or damaged (was " + KeyFileName + " replaced?)")
	}
	return string(plain), nil
}
