package extent

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// tagged has vsphere.Extent's shape (JSON tags): Normalize must take it.
type tagged struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    []Extent
		limit int64
		want  string
	}{
		{"nil", nil, 100, "[]"},
		{"only empty", []Extent{{5, 0}, {7, -3}}, 100, "[]"},
		{"sorted disjoint unchanged", []Extent{{0, 10}, {20, 5}}, 100, "[{0 10} {20 5}]"},
		{"unsorted", []Extent{{20, 5}, {0, 10}}, 100, "[{0 10} {20 5}]"},
		{"touching merge", []Extent{{0, 10}, {10, 5}}, 100, "[{0 15}]"},
		{"overlap merge", []Extent{{0, 10}, {5, 20}}, 100, "[{0 25}]"},
		{"contained", []Extent{{0, 50}, {10, 5}, {20, 5}}, 100, "[{0 50}]"},
		{"gap of one byte stays", []Extent{{0, 10}, {11, 5}}, 100, "[{0 10} {11 5}]"},
		{"same offset, shorter second", []Extent{{10, 20}, {10, 5}}, 100, "[{10 20}]"},
		{"clip end", []Extent{{90, 20}}, 100, "[{90 10}]"},
		{"wholly past the end", []Extent{{100, 5}, {200, 5}}, 100, "[]"},
		{"negative start clipped", []Extent{{-5, 10}}, 100, "[{0 5}]"},
		{"negative wholly", []Extent{{-50, 10}}, 100, "[]"},
		{"no limit", []Extent{{1 << 50, 10}}, NoLimit, "[{1125899906842624 10}]"},
		{"overflowing end", []Extent{{math.MaxInt64 - 5, 100}}, NoLimit, "[{9223372036854775802 5}]"},
		{"overflow clipped to limit", []Extent{{50, math.MaxInt64}}, 100, "[{50 50}]"},
		{"zero limit", []Extent{{0, 10}}, 0, "[]"},
		{"cbt sample", []Extent{{100, 50}, {0, 10}, {10, 5}, {120, 100}, {300, 0}, {990, 100}, {2000, 5}}, 1000,
			"[{0 15} {100 120} {990 10}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]Extent(nil), tc.in...)
			got := Normalize(in, tc.limit)
			if s := fmt.Sprint(got); s != tc.want && !(tc.want == "[]" && got == nil) {
				t.Errorf("Normalize(%v, %d) = %s, want %s", tc.in, tc.limit, s, tc.want)
			}
			if tc.want == "[]" && got != nil {
				t.Errorf("empty result %v is not nil", got)
			}
			if fmt.Sprint(in) != fmt.Sprint(tc.in) {
				t.Errorf("input modified: %v", in)
			}
		})
	}
}

func TestNormalizeTagged(t *testing.T) {
	got := Normalize([]tagged{{10, 5}, {0, 10}}, 100)
	if len(got) != 1 || got[0] != (tagged{0, 15}) {
		t.Errorf("got %v", got)
	}
}

// FuzzNormalize: for any input, the output is sorted, disjoint, not
// touching, inside [0, limit), and covers exactly the bytes of the input
// that lie in [0, limit) (checked on a small address space, byte by byte).
func FuzzNormalize(f *testing.F) {
	f.Add([]byte{0, 10, 10, 5, 20, 3}, uint8(200))
	f.Add([]byte{250, 20, 0, 255}, uint8(100))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, lim uint8) {
		// Pairs of signed bytes: offsets and lengths from -128..127 around
		// a 256-byte space, so negative, empty and past-the-end ranges occur.
		var in []Extent
		for i := 0; i+1 < len(raw); i += 2 {
			in = append(in, Extent{int64(int8(raw[i])) + 64, int64(int8(raw[i+1]))})
		}
		if len(raw) >= 10 {
			// Some huge values too, to reach the overflow clamp.
			in = append(in, Extent{int64(binary.LittleEndian.Uint64(raw[len(raw)-8:])), math.MaxInt64})
		}
		limit := int64(lim)
		out := Normalize(in, limit)
		for i, e := range out {
			if e.Length <= 0 || e.Offset < 0 || e.Offset+e.Length > limit {
				t.Fatalf("extent %d %v outside [0, %d) or empty", i, e, limit)
			}
			if i > 0 && e.Offset <= out[i-1].Offset+out[i-1].Length {
				t.Fatalf("extents %v and %v overlap or touch", out[i-1], e)
			}
		}
		var want, got [256]bool
		for _, e := range in {
			for b := int64(0); b < limit; b++ {
				if e.Length > 0 && b >= e.Offset && b-e.Offset < e.Length {
					want[b] = true
				}
			}
		}
		for _, e := range out {
			for b := e.Offset; b < e.Offset+e.Length; b++ {
				got[b] = true
			}
		}
		if want != got {
			t.Fatalf("Normalize(%v, %d) = %v covers other bytes", in, limit, out)
		}
	})
}
