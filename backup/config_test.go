package backup

import (
	"testing"
)

func FuzzDecodeVMConfig(f *testing.F) {
	good, _ := EncodeVMConfig(VMConfig{Version: ConfigVersion, Name: "web", NumCPU: 2, MemoryMB: 512,
		Disks: []DiskConfig{{Key: 2000, CapacityBytes: 1 << 30}}, NICs: []NICConfig{{Type: "vmxnet3", Network: "VM Network"}}})
	f.Add(good)
	f.Add([]byte(`{"version":1,"name":"x","disks":[{"capacity_bytes":-1}]}`))
	f.Add([]byte(`{"version":2,"name":"x"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeVMConfig(b)
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes to the same thing.
		b2, err := EncodeVMConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeVMConfig(b2); err != nil {
			t.Fatalf("re-encoded config does not decode: %v", err)
		}
	})
}

func TestSelectExtraConfig(t *testing.T) {
	got := SelectExtraConfig(map[string]string{"disk.EnableUUID": "TRUE", "sched.swap.derivedName": "/vmfs/x", "svga.present": "TRUE"})
	if len(got) != 2 || got["disk.EnableUUID"] != "TRUE" {
		t.Errorf("got %v", got)
	}
	if SelectExtraConfig(nil) != nil {
		t.Error("empty input gives a map")
	}
}
