// Package vmdk reads and writes VMware virtual disk (VMDK) images.
//
// It owns the on-disk VMDK formats vmvault meets: descriptor files with FLAT,
// VMFS, SPARSE and ZERO extents (monolithicFlat, vmfs, twoGbMaxExtentFlat,
// twoGbMaxExtentSparse), hosted sparse extents (monolithicSparse) and
// stream-optimized compressed extents (streamOptimized), both for random
// access (Open) and strictly sequential decoding (StreamReader, what an NFC
// export from ESXi yields). StreamWriter encodes streamOptimized, the format
// NFC import and "download disk as VMDK" need.
//
// Every size, count and offset read from a file is bounded before it is used,
// because images come from guests and remote hosts: hostile input yields an
// error naming the field, never a panic or an absurd allocation. Work is
// bounded by the files too: Open checks a flat extent's declared range
// against its file (a short file is an error, never zeros) and refuses
// extents that are a descriptor or share bytes with another extent, and it
// checks a sparse extent's whole map once (layout.go: grain tables disjoint
// from each other and the metadata, grains outside the metadata and fitting
// in the file), so what Allocated lists and a backup reads is proportional
// to the file's size, not to what a forged header claims.
//
// The package is pure: no network, no files except those Open is asked to
// read (and their extents, which must stay inside the descriptor's
// directory). It must never import any other vmvault package; disk/imagefile
// imports it, not the reverse.
package vmdk
