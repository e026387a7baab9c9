package vmdk

import (
	"fmt"
	"strings"
)

// FlatDescriptor returns the text descriptor of a monolithicFlat disk of
// capacity bytes (a multiple of SectorSize) whose one FLAT extent is the
// file flatName beside the descriptor, as ESXi writes one: the disk
// database gives the adapter type (default "lsilogic"), a virtual
// hardware version and a CHS geometry derived from the capacity. extra
// adds or overrides ddb keys ("ddb.uuid", "ddb.thinProvisioned").
//
// The format has no escapes, so a name or value holding a quote, a
// newline or a NUL is refused rather than written into a descriptor that
// would parse differently.
func FlatDescriptor(capacity int64, flatName, adapter string, cid uint32, extra map[string]string) ([]byte, error) {
	if capacity <= 0 || capacity%SectorSize != 0 {
		return nil, fmt.Errorf("flat descriptor: capacity %d is not a positive multiple of %d", capacity, SectorSize)
	}
	if capacity/SectorSize > maxCapacitySectors {
		return nil, fmt.Errorf("flat descriptor: capacity %d exceeds the format's limit", capacity)
	}
	if adapter == "" {
		adapter = "lsilogic"
	}
	bad := func(s string) bool { return s == "" || strings.ContainsAny(s, "\"\r\n\x00") }
	if bad(flatName) || strings.ContainsAny(flatName, "/\\") {
		return nil, fmt.Errorf("flat descriptor: extent file name %q is not a plain file name", flatName)
	}
	sectors := capacity / SectorSize
	ddb := map[string]string{
		"ddb.adapterType":        adapter,
		"ddb.virtualHWVersion":   "13",
		"ddb.geometry.heads":     "255",
		"ddb.geometry.sectors":   "63",
		"ddb.geometry.cylinders": fmt.Sprint(min(sectors/(255*63), 65535)),
	}
	if adapter == "ide" {
		ddb["ddb.geometry.heads"] = "16"
		ddb["ddb.geometry.cylinders"] = fmt.Sprint(min(sectors/(16*63), 16383))
	}
	for k, v := range extra {
		if bad(k) || strings.ContainsAny(k, "= \t") || strings.ContainsAny(v, "\"\r\n\x00") {
			return nil, fmt.Errorf("flat descriptor: ddb entry %q = %q cannot be written", k, v)
		}
		ddb[k] = v
	}
	d := &Descriptor{Version: 1, CID: cid, ParentCID: NoParentCID, CreateType: "monolithicFlat",
		Extents: []DescriptorExtent{{Access: "RW", Sectors: sectors, Type: "FLAT", Filename: flatName}},
		DDB:     ddb}
	return d.encode(), nil
}
