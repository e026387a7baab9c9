package repository

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goldenKeyConfigID is the repository id the golden key object is bound to.
const goldenKeyConfigID = "7d4ed232d7fbcf65354543a3d37cc4c2"

// TestGoldenKey pins the key object of FORMAT.md §4a byte by byte
// (testdata/golden/key.json: passphrase "golden", the golden master key,
// bound to goldenKeyConfigID) and the v1.4 config that holds a copy of it
// (config_v14.json, encryption.key_id).
func TestGoldenKey(t *testing.T) {
	path := filepath.Join("testdata", "golden", "key.json")
	cpath := filepath.Join("testdata", "golden", "config_v14.json")
	const keyID = "00112233445566778899aabbccddeeff"
	if *update {
		_, k, _, err := newKey([]byte("golden"), goldenMaster(), goldenKeyConfigID, TestKDF, "init", "vmvault-golden")
		if err != nil {
			t.Fatal(err)
		}
		k.Created = time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
		b, _ := encodeKey(k)
		os.WriteFile(path, b, 0o644)
		b, _ = os.ReadFile(filepath.Join("testdata", "golden", "config.json"))
		cf, err := decodeConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		cf.Version = FormatVersion{1, 4}
		cf.Level = DefaultCompressionLevel
		cf.Encryption.IDMAC = IDMACBLAKE3
		cf.Encryption.KDF, cf.Encryption.WrappedKey, cf.Encryption.KeyID = k.KDF, k.WrappedKey, keyID
		out, _ := jsonIndent(cf)
		os.WriteFile(cpath, out, 0o644)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := decodeKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if k.Label != "init" || k.Host != "vmvault-golden" || k.KDF.KDFParams != TestKDF || len(k.KDF.Salt) != 32 || len(k.WrappedKey) != 92 ||
		!k.Created.Equal(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("golden key decoded as %+v", k)
	}
	if again, _ := encodeKey(k); !bytes.Equal(again, b) {
		t.Fatalf("golden key re-encodes differently:\n%s", again)
	}
	m, err := unwrapKey(deriveKEK([]byte("golden"), k.KDF), k.WrappedKey, keyAD(goldenKeyConfigID))
	if err != nil || !bytes.Equal(m, goldenMaster()) {
		t.Fatalf("golden key does not unwrap to the golden master key: %v", err)
	}
	if _, err := unwrapKey(deriveKEK([]byte("wrong"), k.KDF), k.WrappedKey, keyAD(goldenKeyConfigID)); err != ErrWrongPassword {
		t.Fatalf("wrong passphrase: %v", err)
	}
	if _, err := unwrapKey(deriveKEK([]byte("golden"), k.KDF), k.WrappedKey, keyAD(strings.Repeat("0", 32))); err != ErrWrongPassword {
		t.Fatalf("key of another repository: %v", err)
	}
	// The leading bytes of the format (field order, indentation).
	if !bytes.HasPrefix(b, []byte("{\n  \"format\": \"vmvault key\",\n  \"version\": 1,\n  \"created\": \"2026-12-03T00:00:00Z\",\n  \"label\": \"init\",\n  \"host\": \"vmvault-golden\",\n  \"kdf\": {\n    \"name\": \"argon2id\",\n    \"time\": 1,\n    \"memory_kib\": 64,\n    \"threads\": 1,\n    \"salt\": \"")) {
		t.Fatalf("golden key layout:\n%s", b)
	}

	cb, err := os.ReadFile(cpath)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := decodeConfig(cb)
	if err != nil {
		t.Fatal(err)
	}
	if cf.Version != (FormatVersion{1, 4}) || cf.Encryption.KeyID != keyID || !sameKey(cf.Encryption.KDF, k.KDF, cf.Encryption.WrappedKey, k.WrappedKey) {
		t.Fatalf("golden v1.4 config decoded as %+v", cf.Encryption)
	}
	if again, _ := jsonIndent(cf); !bytes.Equal(again, cb) {
		t.Fatalf("golden v1.4 config re-encodes differently:\n%s", again)
	}
	// A repository holding them: the key object opens it when the config's
	// copy does not (here: the config's copy is the same key, so both do).
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "keys"), 0o700)
	os.WriteFile(filepath.Join(dir, "config"), cb, 0o600)
	os.WriteFile(filepath.Join(dir, "keys", keyID), b, 0o600)
	r, err := Open(t.Context(), dir, []byte("golden"), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.CurrentKey() != keyID {
		t.Fatalf("current key %q", r.CurrentKey())
	}
	r.Close()
	if _, err := Open(t.Context(), dir, []byte("nope"), OpenOptions{NoFsync: true}); !errors.Is(err, ErrWrongPassword) {
		t.Fatal(err)
	}
}

// FuzzKeyObject: the key object decoder never panics, and what it accepts
// has bounded Argon2id parameters and re-encodes to something it accepts.
func FuzzKeyObject(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "golden", "key.json")); err == nil {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"format":"vmvault key","version":1}`))
	f.Add([]byte(`{"format":"vmvault key","version":1,"kdf":{"name":"argon2id","time":1,"memory_kib":4194304,"threads":1,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="},"wrapped_key":""}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeKey(b)
		if err != nil {
			return
		}
		if k.KDF.MemoryKiB > maxKeyKDFMemory || k.KDF.Time > maxKeyKDFTime || k.KDF.Threads == 0 || len(k.WrappedKey) != 92 {
			t.Fatalf("accepted %+v", k.KDF)
		}
		again, err := encodeKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeKey(again); err != nil {
			t.Fatalf("re-encoded key refused: %v", err)
		}
	})
}
