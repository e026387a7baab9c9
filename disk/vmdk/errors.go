package vmdk

import "errors"

var (
	// ErrCorrupt marks a file whose structures are inconsistent or out of
	// bounds; the wrapping error names the field.
	ErrCorrupt = errors.New("vmdk: corrupt image")
	// ErrUnsupported marks a valid VMDK variant this package does not read
	// (delta/child disks, VMFSSPARSE/SESPARSE extents, raw device maps).
	ErrUnsupported = errors.New("vmdk: unsupported")
	// ErrNotVMDK is returned when a file is neither a sparse extent nor a
	// text descriptor.
	ErrNotVMDK = errors.New("vmdk: not a VMDK file")
	// ErrOrder is returned by StreamWriter when data is written behind what
	// was already written (the format is append-only).
	ErrOrder = errors.New("vmdk: stream writes must have increasing offsets")
	// ErrClosed is returned by StreamWriter after Close.
	ErrClosed = errors.New("vmdk: writer closed")
)
