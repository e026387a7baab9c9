package repository

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/s3store"
)

func initKeyRepo(t *testing.T, pass string) string {
	t.Helper()
	dir := t.TempDir()
	if err := Init(t.Context(), dir, []byte(pass), InitOptions{Chunker: TestChunker, KDF: TestKDF}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openKey(t *testing.T, dir, pass string) (*Repository, error) {
	t.Helper()
	r, err := Open(t.Context(), dir, []byte(pass), OpenOptions{NoFsync: true})
	if err == nil {
		t.Cleanup(func() { r.Close() })
	}
	return r, err
}

func mustOpenKey(t *testing.T, dir, pass string) *Repository {
	t.Helper()
	r, err := openKey(t, dir, pass)
	if err != nil {
		t.Fatalf("open with %q: %v", pass, err)
	}
	return r
}

func refused(t *testing.T, dir, pass string) {
	t.Helper()
	r, err := openKey(t, dir, pass)
	if err == nil {
		r.Close()
		t.Fatalf("passphrase %q opened the repository", pass)
	}
	if !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("passphrase %q: %v, want ErrWrongPassword", pass, err)
	}
}

func readConfigFile(t *testing.T, dir string) configFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := decodeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

// Init writes one key object and a copy of it in the config; a second key
// opens the repository, the key in use and the last key cannot be removed,
// a removed key no longer opens it.
func TestKeyAddListRemove(t *testing.T) {
	dir := initKeyRepo(t, "first")
	cf := readConfigFile(t, dir)
	if cf.Version != (FormatVersion{1, 4}) || cf.Encryption.KeyID == "" {
		t.Fatalf("config version %s key_id %q: want 1.4 with a key id", cf.Version, cf.Encryption.KeyID)
	}
	first := cf.Encryption.KeyID
	r := mustOpenKey(t, dir, "first")
	if r.CurrentKey() != first {
		t.Fatalf("current key %q, want %q", r.CurrentKey(), first)
	}
	added, err := r.AddKey(t.Context(), []byte("second"), KeyOptions{Label: "laptop", KDF: TestKDF})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := r.Keys(t.Context())
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %+v %v", keys, err)
	}
	byID := map[string]KeyInfo{}
	for _, k := range keys {
		byID[k.ID] = k
	}
	if k := byID[first]; !k.InConfig || !k.Current || k.Label != "init" {
		t.Fatalf("keys %+v", keys)
	}
	if k := byID[added.ID]; k.Label != "laptop" || k.InConfig || k.Current || k.KDF != TestKDF {
		t.Fatalf("keys %+v", keys)
	}
	if err := r.RemoveKey(t.Context(), first[:6]); !errors.Is(err, ErrKeyInUse) || !strings.Contains(err.Error(), "another key's passphrase") {
		t.Fatalf("removing the key in use: %v", err)
	}
	r.Close()

	r2 := mustOpenKey(t, dir, "second")
	if r2.CurrentKey() != added.ID {
		t.Fatalf("current key %q, want %q", r2.CurrentKey(), added.ID)
	}
	refusedWhileOpen := func(pass string) { // the lock is per process: open read-only
		_, err := Open(t.Context(), dir, []byte(pass), OpenOptions{ReadOnly: true, CacheDir: t.TempDir()})
		if !errors.Is(err, ErrWrongPassword) {
			t.Fatalf("passphrase %q: %v, want ErrWrongPassword", pass, err)
		}
	}
	refusedWhileOpen("third")
	// Removing the key the config holds moves the other one into it.
	if err := r2.RemoveKey(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	if cf := readConfigFile(t, dir); cf.Encryption.KeyID != added.ID {
		t.Fatalf("config key %q, want %q", cf.Encryption.KeyID, added.ID)
	}
	if err := r2.RemoveKey(t.Context(), added.ID); !errors.Is(err, ErrLastKey) {
		t.Fatalf("removing the last key: %v", err)
	}
	if err := r2.RemoveKey(t.Context(), "ffff"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing an unknown key: %v", err)
	}
	r2.Close()
	refused(t, dir, "first")
	mustOpenKey(t, dir, "second").Close()
}

// ChangePassword: the new passphrase opens, the old one and a wrong one do
// not; the new key has a fresh salt and the default KDF parameters (the KEK
// is rotated); the master key is unchanged (the data still reads).
func TestKeyPasswd(t *testing.T) {
	dir := initKeyRepo(t, "old")
	r := mustOpenKey(t, dir, "old")
	p := backup(t, r, "web", testTime, goldenImage())
	oldCF := readConfigFile(t, dir)
	added, removed, err := r.ChangePassword(t.Context(), []byte("new"), KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if removed != oldCF.Encryption.KeyID || r.CurrentKey() != added.ID || added.KDF != DefaultKDF {
		t.Fatalf("added %+v removed %q current %q", added, removed, r.CurrentKey())
	}
	r.Close()
	cf := readConfigFile(t, dir)
	if cf.Encryption.KeyID != added.ID || bytes.Equal(cf.Encryption.KDF.Salt, oldCF.Encryption.KDF.Salt) || cf.Encryption.KDF.KDFParams != DefaultKDF {
		t.Fatalf("config encryption %+v", cf.Encryption)
	}
	if _, err := os.Stat(filepath.Join(dir, "keys", removed)); !os.IsNotExist(err) {
		t.Fatalf("old key object: %v", err)
	}
	refused(t, dir, "old")
	refused(t, dir, "wrong")
	r = mustOpenKey(t, dir, "new")
	verifyPoint(t, r, p.ID, goldenImage())
}

// A repository written before 1.4 (its key only in the config) gains key
// objects; passwd replaces the config's own key.
func TestKeyLegacyConfigKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "repo-v1.2"))); err != nil {
		t.Fatal(err)
	}
	r := mustOpenKey(t, dir, "golden")
	if r.CurrentKey() != ConfigKeyID {
		t.Fatalf("current key %q", r.CurrentKey())
	}
	keys, err := r.Keys(t.Context())
	if err != nil || len(keys) != 1 || keys[0].ID != ConfigKeyID || !keys[0].Current {
		t.Fatalf("keys %+v %v", keys, err)
	}
	if err := r.RemoveKey(t.Context(), ConfigKeyID); !errors.Is(err, ErrLastKey) {
		t.Fatalf("removing the only key: %v", err)
	}
	added, removed, err := r.ChangePassword(t.Context(), []byte("new"), KeyOptions{KDF: TestKDF})
	if err != nil || removed != ConfigKeyID {
		t.Fatal(removed, err)
	}
	r.Close()
	cf := readConfigFile(t, dir)
	if cf.Version != (FormatVersion{1, 2}) || cf.Encryption.KeyID != added.ID {
		t.Fatalf("config version %s key %q", cf.Version, cf.Encryption.KeyID)
	}
	refused(t, dir, "golden")
	r = mustOpenKey(t, dir, "new")
	pts, err := r.List(t.Context())
	if err != nil || len(pts) != 2 {
		t.Fatalf("points %v %v", pts, err)
	}
}

// Hostile key objects are skipped with a warning when Open tries them, are
// listed with their error, and never panic; a good key after them still
// opens the repository.
func TestKeyHostileObjects(t *testing.T) {
	dir := initKeyRepo(t, "first")
	r := mustOpenKey(t, dir, "first")
	added, err := r.AddKey(t.Context(), []byte("second"), KeyOptions{KDF: TestKDF})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	good, err := os.ReadFile(filepath.Join(dir, "keys", added.ID))
	if err != nil {
		t.Fatal(err)
	}
	huge := func(field string, v any) []byte {
		var k map[string]any
		json.Unmarshal(good, &k)
		k["kdf"].(map[string]any)[field] = v
		b, _ := json.Marshal(k)
		return b
	}
	hostile := map[string][]byte{
		"00000000000000000000000000000001": good[:len(good)/2],               // truncated
		"00000000000000000000000000000002": []byte("{not json"),              // bad JSON
		"00000000000000000000000000000003": huge("memory_kib", 4<<20),        // 4 GiB
		"00000000000000000000000000000004": huge("time", 1000),               // 1000 passes
		"00000000000000000000000000000005": huge("threads", 0),               // no lane
		"00000000000000000000000000000006": huge("name", "scrypt"),           // unknown kdf
		"00000000000000000000000000000007": bytes.Repeat([]byte(" "), 1<<20), // oversized
		"00000000000000000000000000000008": []byte(`{"format":"vmvault key","version":2}`),
		"not-a-key-id":                     good,
	}
	for id, b := range hostile {
		if err := os.WriteFile(filepath.Join(dir, "keys", id), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	refused(t, dir, "third")
	r = mustOpenKey(t, dir, "second") // its object sorts after the hostile ones
	warns := strings.Join(r.Warnings(), "\n")
	for _, want := range []string{"00000000000000000000000000000001", "memory 4194304 KiB out of range", "time 1000 out of range", "threads 0", "scrypt", "1048576 bytes", "version 2", "not-a-key-id"} {
		if !strings.Contains(warns, want) {
			t.Errorf("warnings do not say %q:\n%s", want, warns)
		}
	}
	keys, err := r.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	damaged := 0
	for _, k := range keys {
		if k.Err != "" {
			damaged++
		}
	}
	if damaged != len(hostile) {
		t.Fatalf("%d damaged keys listed, want %d: %+v", damaged, len(hostile), keys)
	}
	// Damaged keys do not count as working: the first key is not the last,
	// the second (in use) cannot go; a damaged one can be removed.
	if err := r.RemoveKey(t.Context(), "00000000000000000000000000000003"); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveKey(t.Context(), "first"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a key id that is no key: %v", err)
	}
}

// TestKeyPasswdCrash kills a child process at every step of ChangePassword
// (failpoints on the key and config puts, between the add and the remove,
// before the delete): afterwards at least one of the two passphrases opens
// the repository, and exactly the old one before the new key is durable.
func TestKeyPasswdCrash(t *testing.T) {
	if os.Getenv("VMVAULT_KEY_CHILD") != "" {
		r, err := Open(t.Context(), os.Getenv("VMVAULT_KEY_CHILD"), []byte("old"), OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.ChangePassword(t.Context(), []byte("new"), KeyOptions{KDF: TestKDF})
		os.Exit(3) // the failpoint did not fire
	}
	for _, tc := range []struct {
		step     string
		old, new bool // which passphrases open afterwards
	}{
		{"key.write", true, false},
		{"key.fsync", true, false},
		{"key.rename", true, false},
		{"key.dirsync", true, true},
		{"key.passwd", true, true},
		{"config.write", true, true},
		{"config.rename", true, true},
		{"config.dirsync", true, true}, // the config holds the new key, the old object is still there
		{"key.delete", true, true},
	} {
		t.Run(tc.step, func(t *testing.T) {
			dir := initKeyRepo(t, "old")
			cmd := exec.Command(os.Args[0], "-test.run=^TestKeyPasswdCrash$")
			cmd.Env = append(os.Environ(), "VMVAULT_KEY_CHILD="+dir, "VMVAULT_FAILPOINTS="+tc.step+"=kill")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != -1 {
				t.Fatalf("child was not killed: %v\n%s", err, out)
			}
			for _, c := range []struct {
				pass string
				want bool
			}{{"old", tc.old}, {"new", tc.new}} {
				r, err := openKey(t, dir, c.pass)
				if (err == nil) != c.want {
					t.Fatalf("after a crash at %s: open with %q: %v, want success %v", tc.step, c.pass, err, c.want)
				}
				if err == nil {
					r.Close()
				}
			}
			// The interrupted change can be finished with the new
			// passphrase, or done again with the old one.
			if tc.new {
				r := mustOpenKey(t, dir, "new")
				keys, err := r.Keys(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					if !k.Current {
						if err := r.RemoveKey(t.Context(), k.ID); err != nil {
							t.Fatal(err)
						}
					}
				}
				r.Close()
				refused(t, dir, "old")
				mustOpenKey(t, dir, "new").Close()
			}
		})
	}
}

// Open with many keys: the wrong passphrase tries at most MaxKeys key
// objects; the time is logged (FORMAT.md §4a quotes it).
func TestKeyOpenManyKeys(t *testing.T) {
	dir := initKeyRepo(t, "k0")
	r := mustOpenKey(t, dir, "k0")
	for i := 1; i < MaxKeys; i++ {
		if _, err := r.AddKey(t.Context(), []byte("k"+string(rune('A'+i))), KeyOptions{KDF: TestKDF}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.AddKey(t.Context(), []byte("one too many"), KeyOptions{KDF: TestKDF}); err == nil || !strings.Contains(err.Error(), "remove one first") {
		t.Fatalf("key %d: %v", MaxKeys+1, err)
	}
	r.Close()
	start := time.Now()
	_, err := Open(t.Context(), dir, []byte("nope"), OpenOptions{ReadOnly: true, CacheDir: t.TempDir()})
	if !errors.Is(err, ErrWrongPassword) || !strings.Contains(err.Error(), "63 key objects") {
		t.Fatalf("wrong passphrase with %d keys: %v", MaxKeys, err)
	}
	t.Logf("wrong passphrase with %d keys (test KDF): %s", MaxKeys, time.Since(start))
}

// Keys on S3: key objects go through the storage seam; add, passwd and
// remove work against versitygw, a fresh cache opens with the new
// passphrase, the old one is refused.
func TestKeysS3(t *testing.T) {
	ctx := t.Context()
	srv := s3store.StartTestServer(t)
	loc := srv.Location("vmvault-keys", "site-a")
	if err := Init(ctx, loc, []byte("old"), InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 256 << 10, CreateBucket: true}); err != nil {
		t.Fatal(err)
	}
	open := func(pass string) (*Repository, error) {
		return Open(ctx, loc, []byte(pass), OpenOptions{CacheDir: t.TempDir()})
	}
	r, err := open("old")
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.AddKey(ctx, []byte("second"), KeyOptions{KDF: TestKDF, Label: "dr site"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.ChangePassword(ctx, []byte("new"), KeyOptions{KDF: TestKDF}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := open("old"); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("old passphrase after passwd on S3: %v", err)
	}
	r, err = open("second")
	if err != nil {
		t.Fatal(err)
	}
	if r.CurrentKey() != second.ID {
		t.Fatalf("current key %q, want %q", r.CurrentKey(), second.ID)
	}
	keys, err := r.Keys(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %+v %v", keys, err)
	}
	for _, k := range keys {
		if !k.Current {
			if err := r.RemoveKey(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.Close()
	if _, err := open("new"); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("removed key on S3: %v", err)
	}
	r, err = open("second")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

// The key object the config copies was deleted by hand: its passphrase
// still opens the repository through the config, the key is listed as
// config-only, and passwd replaces it.
func TestKeyConfigObjectMissing(t *testing.T) {
	dir := initKeyRepo(t, "old")
	id := readConfigFile(t, dir).Encryption.KeyID
	if err := os.Remove(filepath.Join(dir, "keys", id)); err != nil {
		t.Fatal(err)
	}
	r := mustOpenKey(t, dir, "old")
	keys, err := r.Keys(t.Context())
	if err != nil || len(keys) != 1 || keys[0].ID != id || !keys[0].InConfig || !keys[0].Current {
		t.Fatalf("keys %+v %v", keys, err)
	}
	if err := r.RemoveKey(t.Context(), id); !errors.Is(err, ErrLastKey) {
		t.Fatalf("removing the only key: %v", err)
	}
	if _, _, err := r.ChangePassword(t.Context(), []byte("new"), KeyOptions{KDF: TestKDF}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	refused(t, dir, "old")
	mustOpenKey(t, dir, "new").Close()
}
