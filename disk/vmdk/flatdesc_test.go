package vmdk

import (
	"strings"
	"testing"
)

func TestFlatDescriptorRoundTrip(t *testing.T) {
	b, err := FlatDescriptor(3<<30, "web01-flat.vmdk", "pvscsi", 0x1234abcd, map[string]string{"ddb.uuid": "60 00 C2 9a"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDescriptor(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if d.CreateType != "monolithicFlat" || d.CID != 0x1234abcd || d.HasParent() || d.Capacity() != 3<<30 {
		t.Fatalf("parsed %+v", d)
	}
	if len(d.Extents) != 1 || d.Extents[0].Filename != "web01-flat.vmdk" || d.Extents[0].Type != "FLAT" || d.Extents[0].Access != "RW" {
		t.Fatalf("extents %+v", d.Extents)
	}
	if !strings.Contains(string(b), "RW 6291456 FLAT \"web01-flat.vmdk\" 0\n") {
		t.Fatalf("FLAT line without its offset:\n%s", b)
	}
	if d.DDB["ddb.adapterType"] != "pvscsi" || d.DDB["ddb.uuid"] != "60 00 C2 9a" || d.DDB["ddb.geometry.cylinders"] != "391" {
		t.Fatalf("ddb %v", d.DDB)
	}
}

func TestFlatDescriptorRefuses(t *testing.T) {
	for name, f := range map[string]func() error{
		"unaligned": func() error { _, err := FlatDescriptor(1000, "a-flat.vmdk", "", 1, nil); return err },
		"zero":      func() error { _, err := FlatDescriptor(0, "a-flat.vmdk", "", 1, nil); return err },
		"quote":     func() error { _, err := FlatDescriptor(512, "a\"-flat.vmdk", "", 1, nil); return err },
		"slash":     func() error { _, err := FlatDescriptor(512, "../a-flat.vmdk", "", 1, nil); return err },
		"newline": func() error {
			_, err := FlatDescriptor(512, "a.vmdk", "", 1, map[string]string{"ddb.x": "1\nRW 9 FLAT \"/etc/passwd\""})
			return err
		},
	} {
		if f() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
