package lvm

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func seed(t testing.TB) string {
	b, err := os.ReadFile("testdata/vg.txt")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseAndMap(t *testing.T) {
	vg, err := Parse([]byte(seed(t)))
	if err != nil {
		t.Fatal(err)
	}
	if vg.Name != "vgt" || vg.Seqno != 3 || vg.ExtentSize != 4<<20 || len(vg.PVs) != 2 || len(vg.LVs) != 1 {
		t.Fatalf("parsed %+v", vg)
	}
	if vg.PVs["pv1"].UUID != "FGibgazQBGjiJj9ivrwzO84kfrYkokdH" || vg.PVs["pv1"].PEStart != 1<<20 {
		t.Fatalf("pv1 = %+v", vg.PVs["pv1"])
	}
	r, err := vg.Map(vg.LVs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []Range{{0, 40 << 20, "mRSnDqk3mdmuG9O6NewV9ct0HpQHvok1", 1 << 20}, {40 << 20, 40 << 20, "FGibgazQBGjiJj9ivrwzO84kfrYkokdH", 1 << 20}}
	if len(r) != 2 || r[0] != want[0] || r[1] != want[1] {
		t.Fatalf("Map = %+v", r)
	}
	if err := vg.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestMapRefuses(t *testing.T) {
	base := seed(t)
	tests := []struct {
		name, from, to string
		want           error
		says           string
	}{
		{"thin", `type = "striped"`, `type = "thin"`, ErrUnsupported, "thin"},
		{"raid1", `type = "striped"`, `type = "raid1"`, ErrUnsupported, "RAID"},
		{"snapshot", `type = "striped"`, `type = "snapshot"`, ErrUnsupported, "COW"},
		{"striped2", "\"pv0\", 0\n]", "\"pv0\", 0, \"pv1\", 5\n]", ErrUnsupported, "striped over 2"},
		{"overlap", "start_extent = 10", "start_extent = 5", ErrCorrupt, "overlap"},
		{"gap", "start_extent = 10", "start_extent = 12", ErrCorrupt, "gap"},
		{"past PV end", "\"pv1\", 0\n]", "\"pv1\", 9\n]", ErrCorrupt, "past the end"},
		{"unknown PV", "\"pv1\", 0\n]", "\"pv7\", 0\n]", ErrCorrupt, "unknown PV"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			txt := strings.Replace(base, tt.from, tt.to, 1)
			if txt == base {
				t.Fatal("replacement did not apply")
			}
			vg, err := Parse([]byte(txt))
			if err != nil {
				t.Fatal(err)
			}
			_, err = vg.Map(vg.LVs[0])
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Map = %v; want %v saying %q", err, tt.want, tt.says)
			}
		})
	}
}

func TestCheckOverlapBetweenLVs(t *testing.T) {
	txt := strings.Replace(seed(t), "logical_volumes {", `logical_volumes {
other {
status = ["VISIBLE"]
segment1 {
start_extent = 0
extent_count = 2
type = "striped"
stripes = ["pv1", 3]
}
}`, 1)
	vg, err := Parse([]byte(txt))
	if err != nil {
		t.Fatal(err)
	}
	if err := vg.Check(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check = %v", err)
	}
}

func TestParseBad(t *testing.T) {
	for _, s := range []string{"", "vg {", "vg { extent_size = 0 }", `vg { a = "x }`, "}", "vg { a = [1, 2 }", "a { b { c {" + strings.Repeat("d {", 20)} {
		if _, err := Parse([]byte(s)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Parse(%q) = %v", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(seed(f)))
	f.Add([]byte("vg { extent_size = 8 physical_volumes { pv0 { pe_count = 1 } } }"))
	f.Fuzz(func(t *testing.T, b []byte) {
		vg, err := Parse(b)
		if err != nil {
			return
		}
		vg.Check()
		for _, lv := range vg.LVs {
			vg.Map(lv)
		}
	})
}
