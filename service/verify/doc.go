// Package verify proves, without booting anything, that a restore point's
// guest file systems can be read: it opens every volume of the point with
// the file-level restore readers (guestfs) and walks each file system
// whole, reading every directory, every entry's inode metadata and every
// symbolic link's target, and (with ReadData) every regular file's bytes,
// which also reads and verifies every repository blob those files use. A
// corrupt guest file system is found before anyone needs a file from it;
// it is issue 25's check that "needs no boot and runs everywhere".
//
// What it owns: the walk (iterative, so memory is one stack of pending
// directory paths and one read buffer, whatever the tree; a depth limit
// and a set of directory identities so that a hostile image's deep or
// looping tree is an error, not a stack overflow or a hang), the per
// volume result (counts, the first MaxErrors errors by path, a count of
// all) and the verdict. [Walk] takes a point's disks as guestfs.Disk
// values; [Service.VerifyPoint] opens them from a repository the way
// file-level restore does (filerestore.OpenDisks).
//
// The verdict: a point passes when no volume fails. A volume fails when
// its file system cannot be opened, or any directory, entry, link or
// (with ReadData) file data cannot be read, or the tree holds something a
// sound file system never does (a name no path can name, a directory
// entry whose type contradicts its inode, a directory reached twice).
// Volumes the readers cannot browse (encrypted, swap, unknown data, LVM
// physical volumes, whose logical volumes are walked instead) are listed
// with their reason and do not fail the point — except a disk whose
// partition table is damaged: that is damage found, not a kind of volume
// vmvault cannot read.
//
// What it does not own: volume and file-system parsing (guestfs), blob
// verification (repository), scheduling verification jobs or recording
// their results on points (callers), HTTP (web).
package verify
