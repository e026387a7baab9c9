//go:build linux

package vmdk

import (
	"errors"
	"fmt"
	"os"

	"syscall"
)

// lseek whence values from <unistd.h> (Linux). golang.org/x/sys/unix has
// them, but it is only an indirect requirement in go.mod and importing it
// would need a go.mod edit this package does not own.
const (
	seekData = 3
	seekHole = 4
)

// DataExtents lists the ranges of f within [start, start+length) that may
// hold data, using lseek(SEEK_DATA/SEEK_HOLE) so holes of a sparse file are
// neither read nor reported. Offsets are relative to start. When the file
// system does not support the calls (EINVAL), the whole range is reported.
func DataExtents(f *os.File, start, length int64) ([]Extent, error) {
	if length <= 0 {
		return nil, nil
	}
	end := start + length
	fd := int(f.Fd())
	var out []Extent
	pos := start
	for pos < end {
		d, err := syscall.Seek(fd, pos, seekData)
		if errors.Is(err, syscall.ENXIO) {
			break // only a hole remains
		}
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
			return []Extent{{0, length}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("seek data %s at %d: %w", f.Name(), pos, err)
		}
		if d >= end {
			break
		}
		h, err := syscall.Seek(fd, d, seekHole)
		if err != nil {
			return nil, fmt.Errorf("seek hole %s at %d: %w", f.Name(), d, err)
		}
		h = min(h, end)
		out = append(out, Extent{d - start, h - d})
		pos = h
	}
	return out, nil
}
