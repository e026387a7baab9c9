//go:build !linux

package vmdk

import "os"

// DataExtents reports the whole range: this platform is not known to offer
// SEEK_DATA/SEEK_HOLE, so holes cannot be detected without reading.
func DataExtents(f *os.File, start, length int64) ([]Extent, error) {
	if length <= 0 {
		return nil, nil
	}
	return []Extent{{0, length}}, nil
}
