package repository

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/blake3"
)

// TestIDFunctions: the config names the blob id function, every id the
// repository writes is that function of the plaintext under the id key, and
// a repository keeps its function across reopening (1.2 repositories go on
// writing HMAC-SHA-256 ids, so their new blobs still deduplicate against the
// old ones).
func TestIDFunctions(t *testing.T) {
	for _, tc := range []struct {
		name, opt, want string
	}{
		{"default", "", IDMACBLAKE3},
		{"blake3", IDMACBLAKE3, IDMACBLAKE3},
		{"hmac-sha256", IDMACHMACSHA256, IDMACHMACSHA256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := TestRepository(t, WithDir(dir), WithIDMAC(tc.opt))
			b, err := os.ReadFile(filepath.Join(dir, "config"))
			if err != nil {
				t.Fatal(err)
			}
			var cf configFile
			if err := json.Unmarshal(b, &cf); err != nil {
				t.Fatal(err)
			}
			if cf.Encryption == nil || cf.Encryption.IDMAC != tc.want || cf.Version != (FormatVersion{FormatMajor, FormatMinor}) {
				t.Fatalf("config: version %s, encryption %+v; want %d.%d and id_mac %s", cf.Version, cf.Encryption, FormatMajor, FormatMinor, tc.want)
			}
			if got := r.Config().IDMAC; got != tc.want {
				t.Fatalf("Config().IDMAC = %q, want %q", got, tc.want)
			}
			data := testDisk(7, 3<<20)
			id := r.codec.id(data)
			if want := referenceID(t, tc.want, r.codec.idKey, data); id != want {
				t.Fatalf("id %x, want %x (%s)", id, want, tc.want)
			}
			img := testDisk(8, 5<<20)
			p := backup(t, r, "vm1", testTime, img)
			verifyPoint(t, r, p.ID, img)
			requireClean(t, r)
			before := uniqueBytes(t, r)
			r.Close()

			r2, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Close()
			if r2.Config().IDMAC != tc.want {
				t.Fatalf("reopened: IDMAC %q", r2.Config().IDMAC)
			}
			backup(t, r2, "vm1", testTime.Add(1), img)
			// Only the new point's map and manifest are new bytes.
			if grew := uniqueBytes(t, r2) - before; grew > 4<<10 {
				t.Fatalf("second backup of the same disk added %d unique bytes; its data did not deduplicate", grew)
			}
			verifyPoint(t, r2, p.ID, img)
		})
	}
}

func uniqueBytes(t *testing.T, r *Repository) int64 {
	t.Helper()
	st, err := r.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.UniqueBytes
}

func referenceID(t *testing.T, f string, key, data []byte) ID {
	t.Helper()
	var id ID
	switch f {
	case IDMACBLAKE3:
		h, err := blake3.NewKeyed(key)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(data)
		h.Sum(id[:0])
	case IDMACHMACSHA256:
		h := hmac.New(sha256.New, key)
		h.Write(data)
		h.Sum(id[:0])
	default:
		t.Fatalf("no reference for %q", f)
	}
	return id
}

func TestConfigIDFunctionRefused(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"", "sha256", "BLAKE3-KEYED", "blake3"} {
		bad := strings.Replace(string(b), `"id_mac": "hmac-sha256"`, `"id_mac": "`+f+`"`, 1)
		if bad == string(b) {
			t.Fatal("golden config has no id_mac to replace")
		}
		if _, err := decodeConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "unsupported encryption") {
			t.Errorf("id_mac %q: %v, want unsupported encryption", f, err)
		}
	}
	if err := Init(context.Background(), t.TempDir(), []byte("pw"), InitOptions{Chunker: TestChunker, KDF: TestKDF, IDMAC: "md5"}); err == nil ||
		!strings.Contains(err.Error(), `unknown id function "md5"`) {
		t.Fatalf("Init with id function md5: %v", err)
	}
}
