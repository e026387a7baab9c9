package settings

import (
	"bytes"
	"testing"
)

// Open never panics on what a damaged state.db may hold, and every secret
// Seal makes opens to itself.
func FuzzSealerOpen(f *testing.F) {
	s, err := NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := s.Seal("a password")
	for _, seed := range []string{"", good, "v1:", "v1:AAAA", "v2:" + good[3:], good[:len(good)-1], "v1:" + string(bytes.Repeat([]byte("A"), 64))} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = s.Open(in)
		sealed, err := s.Seal(in)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Open(sealed); err != nil || got != in {
			t.Fatalf("Seal then Open of %q: %q, %v", in, got, err)
		}
	})
}
