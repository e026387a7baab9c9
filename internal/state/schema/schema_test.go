package schema

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Every declared bucket is migrated from schema 1 (or was already in its
// schema 2 form), and names are unique: a bucket added without its
// migration fails here.
func TestMigrationCoversEveryBucket(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range Buckets {
		name := string(b.Name)
		if seen[name] {
			t.Errorf("bucket %s declared twice", name)
		}
		seen[name] = true
		if b.Owner == "" || b.Key == "" || b.Value == "" {
			t.Errorf("bucket %s: owner, key and value must be documented", name)
		}
		if name == string(BucketMeta) {
			if b.Format != FormatRaw {
				t.Errorf("meta must stay raw: it says how to read the rest")
			}
			continue
		}
		if b.Format == FormatRaw {
			t.Errorf("bucket %s has no format byte", name)
		}
		if b.Since > 1 {
			if _, ok := v1Values[name]; ok || v1Records[name] {
				t.Errorf("bucket %s is new in schema %d but has a v1 migration", name, b.Since)
			}
			continue
		}
		if _, ok := v1Values[name]; ok == v1Records[name] {
			t.Errorf("bucket %s: exactly one of v1Values and v1Records must cover it", name)
		}
	}
	for name := range v1Values {
		if !seen[name] {
			t.Errorf("v1Values has undeclared bucket %s", name)
		}
	}
	for name := range v1Records {
		if !seen[name] {
			t.Errorf("v1Records has undeclared bucket %s", name)
		}
	}
}

func TestCodecRoundTrip(t *testing.T) {
	type rec struct {
		A string `json:"a"`
		N int    `json:"n"`
	}
	b, err := Encode(rec{"x", 3})
	if err != nil || b[0] != FormatJSON {
		t.Fatalf("encode %q %v", b, err)
	}
	var r rec
	if err := Decode(b, &r); err != nil || r != (rec{"x", 3}) {
		t.Fatalf("decode %+v %v", r, err)
	}
	if p, err := DecodeBytes(EncodeBytes([]byte("id-1"))); err != nil || string(p) != "id-1" {
		t.Fatalf("bytes %q %v", p, err)
	}
	for _, tm := range []time.Time{{}, time.Date(2026, 12, 1, 7, 0, 0, 123, time.UTC), time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)} {
		got, err := DecodeTime(EncodeTime(tm))
		if err != nil || !got.Equal(tm) {
			t.Fatalf("time %v -> %v %v", tm, got, err)
		}
	}
	// Byte order is time order (event and run keys rely on it).
	a, c := EncodeTime(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)), EncodeTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if bytes.Compare(EncodeTime(time.Time{}), a) >= 0 || bytes.Compare(a, c) >= 0 {
		t.Fatal("time encoding is not in time order")
	}
	if err := Check(FormatEmpty, EncodeEmpty()); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, c := range []struct {
		f byte
		v []byte
	}{
		{FormatJSON, nil},
		{FormatJSON, []byte(`{"a":1}`)},             // raw, no format byte
		{FormatJSON, []byte{FormatBytes, '{', '}'}}, // another format
		{FormatJSON, []byte{FormatJSON, '{'}},       // bad JSON
		{FormatTime, []byte{FormatTime, 1, 2, 3}},
		{FormatEmpty, []byte{FormatEmpty, 0}},
		{FormatBytes, []byte{0x7f, 'x'}},
	} {
		if err := Check(c.f, c.v); !errors.Is(err, ErrFormat) {
			t.Errorf("Check(%s, %q) = %v", formatName(c.f), c.v, err)
		}
	}
	var v map[string]any
	if err := Decode([]byte(`{"a":1}`), &v); !errors.Is(err, ErrFormat) {
		t.Errorf("decode of a raw value: %v", err)
	}
	if _, err := DecodeTime(EncodeBytes([]byte("12345678"))); !errors.Is(err, ErrFormat) {
		t.Errorf("time from bytes: %v", err)
	}
}

// Value reads both what a switched writer stores and what a raw writer
// stored, for the buckets whose raw values never start with a format byte.
func TestValue(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\x01{\"timeZone\":\"UTC\"}", `{"timeZone":"UTC"}`},
		{`{"timeZone":"UTC"}`, `{"timeZone":"UTC"}`},
		{"\x022026-12-01T07:00:00Z", "2026-12-01T07:00:00Z"},
		{"2026-12-01T07:00:00Z", "2026-12-01T07:00:00Z"},
		{"", ""},
	} {
		if got := string(Value([]byte(c.in))); got != c.want {
			t.Errorf("Value(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// No stored bytes make a decoder panic; what decodes re-encodes to itself.
func FuzzDecode(f *testing.F) {
	for _, s := range [][]byte{nil, {FormatJSON}, {FormatJSON, '{', '}'}, {FormatTime, 0, 0, 0, 0, 0, 0, 0, 0}, {FormatTime, 0x80}, {FormatBytes}, {FormatEmpty}, []byte(`{"a":1}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if err := Decode(b, &v); err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("decode error is not ErrFormat: %v", err)
		}
		if tm, err := DecodeTime(b); err == nil {
			if !bytes.Equal(EncodeTime(tm), b) {
				t.Fatalf("time %v does not re-encode to %x", tm, b)
			}
		} else if !errors.Is(err, ErrFormat) {
			t.Fatal(err)
		}
		if p, err := DecodeBytes(b); err == nil && !bytes.Equal(EncodeBytes(p), b) {
			t.Fatalf("bytes %x do not re-encode", b)
		}
		for _, f := range []byte{FormatRaw, FormatJSON, FormatBytes, FormatTime, FormatEmpty} {
			if err := Check(f, b); err != nil && !errors.Is(err, ErrFormat) {
				t.Fatal(err)
			}
		}
		_ = Value(b)
	})
}

// The examples of internal/state/FORMAT.md.
func TestFormatExamples(t *testing.T) {
	if got, want := EncodeTime(time.Date(2026, 11, 30, 1, 5, 0, 0, time.UTC)), []byte{0x03, 0x98, 0xec, 0xad, 0x1e, 0xfb, 0xda, 0x58, 0x00}; !bytes.Equal(got, want) {
		t.Errorf("checkpoint example: % x, FORMAT.md says % x", got, want)
	}
	if got, want := EncodeBytes([]byte("2026-11-30T07:00:00Z")), append([]byte{0x02}, "2026-11-30T07:00:00Z"...); !bytes.Equal(got, want) {
		t.Errorf("notify example: %q", got)
	}
	if got := EncodeEmpty(); !bytes.Equal(got, []byte{0x04}) {
		t.Errorf("empty: % x", got)
	}
}

// schema stays a leaf: auth and task import it and must not reach policy
// (or anything else of vmvault) through it.
func TestImportsOnlyLeaves(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, "github.com/vmvault/vmvault/"); ok && rest != "internal/state/schema" && rest != "internal/failpoint" {
			t.Errorf("internal/state/schema depends on %s", rest)
		}
	}
}
