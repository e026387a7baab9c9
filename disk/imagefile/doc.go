// Package imagefile opens "a disk image" for backup: a raw file (sparse
// holes found with SEEK_DATA/SEEK_HOLE) or any VMDK the vmdk package reads,
// detected by magic number or descriptor text rather than by file name.
//
// It may import vmdk and nothing else of vmvault's.
package imagefile
