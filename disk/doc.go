// Package disk holds the pure disk-format code, below every engine: a
// sub-package reads or writes bytes of a disk image and nothing else, so
// that a hostile image can be fuzzed and tested without a repository, a
// vCenter or a file system mounted.
//
//   - disk/vmdk: the VMDK descriptor, sparse-extent and streamOptimized
//     readers and writers (the bytes ESXi and qemu-img agree on).
//   - disk/imagefile: opens "a disk image" for the CLI's image backup, raw
//     (sparse-aware) or VMDK, as one io.ReaderAt with its allocated extents.
//
// Nothing here imports another vmvault package except internal/extent;
// internal/archtest (rule disk-pure) enforces it.
package disk
