package vmconfig

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// TestGoldenBackupV1 decodes the JSON backup.EncodeVMConfig wrote for a
// fixture (testdata/backup-v1.json) and re-encodes it byte for byte, so the
// two definitions cannot drift apart.
func TestGoldenBackupV1(t *testing.T) {
	b, err := os.ReadFile("testdata/backup-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(b)
	if err != nil {
		t.Fatalf("decode golden: %v", err)
	}
	if c.Name != "web01" || c.NumCPU != 4 || c.CoresPerSocket != 2 || c.MemoryMB != 2048 || c.Firmware != "efi" ||
		len(c.Controllers) != 2 || c.Controllers[1].Type != "sata" || len(c.Disks) != 2 || c.Disks[0].CapacityBytes != 1<<30 ||
		c.Disks[1].Index != -1 || c.Disks[1].Skipped == "" || len(c.NICs) != 1 || c.NICs[0].MAC != "00:50:56:aa:bb:cc" ||
		c.ExtraConfig["disk.EnableUUID"] != "TRUE" {
		t.Fatalf("golden decoded to %+v", c)
	}
	again, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("re-encoded JSON differs from the golden file:\n got %s\nwant %s", again, b)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"not json", `nope`},
		{"version 2", `{"version":2,"name":"x","disks":[]}`},
		{"version 0", `{"name":"x","disks":[]}`},
		{"no name", `{"version":1,"disks":[]}`},
		{"negative capacity", `{"version":1,"name":"x","disks":[{"capacity_bytes":-1}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode([]byte(tc.in)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode(%s) = %v, want ErrInvalid", tc.in, err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	if b, err := os.ReadFile("testdata/backup-v1.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"name":"x","disks":[{"capacity_bytes":-1}]}`))
	f.Add([]byte(`{"version":2,"name":"x"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		b2, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Decode(b2)
		if err != nil {
			t.Fatalf("re-encoded config does not decode: %v", err)
		}
		b3, _ := Encode(c2)
		if !bytes.Equal(b2, b3) {
			t.Fatal("encode is not stable")
		}
	})
}
