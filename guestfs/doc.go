// Package guestfs (the guest's file systems, for file-level restore) finds the volumes on a restore point's
// disks and opens their file systems read-only, straight from the
// repository's disk readers: nothing is restored first, no helper VM is
// booted and no kernel mount is needed.
//
// # Design
//
// A restore point's disks come in as [Disk] values (an io.ReaderAt and a
// size). [Volumes] reads the partition tables (MBR with extended/logical
// partitions, GPT), the LVM2 metadata of any physical volumes (a VG may span
// PVs on several disks) and the first sectors of every partition, whole disk
// and logical volume, and returns one [Volume] per place a file system can
// live. Volumes that cannot be browsed (LUKS, BitLocker, swap, unknown data,
// thin pools, RAID LVs) are listed with Browsable false and a Reason: one odd
// volume never fails the whole point. [Open] opens one volume by its ID as
// an [FS].
//
// The ID of a volume is opaque to callers but stable for a restore point:
// it derives from where the volume is (disk index and partition number, or
// VG and LV name), never from the order in which it was found, so the same
// URL keeps naming the same volume.
//
// [FS] is a small path-based, read-only interface (an io/fs.FS with
// ReadDir, Stat, Lstat and Readlink). Each file-system reader — a library
// where a well-kept one passes real images, our own code where not — sits
// behind an internal backend interface that only ever sees clean,
// symlink-free paths: this package resolves symbolic links itself, inside
// the volume (an absolute target starts at the volume's root, ".." stops at
// the root, at most 40 links per lookup), so no reader can be tricked into
// leaving the volume and a link loop is an error, not a hang. Every backend
// call recovers panics into errors: the readers parse hostile input.
//
// Paths from users go through [CleanPath]: "/etc/../etc/hostname" is
// "etc/hostname", and ".." above the root is [ErrBadPath]. A missing file is
// [ErrNotExist] (which is fs.ErrNotExist, so errors.Is works with either).
//
// The context given to [Open] bounds the FS's life: once it is cancelled
// every further read fails with the context's error, so a cancelled request
// stops a long directory listing or download at its next disk read.
package guestfs
