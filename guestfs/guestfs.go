package guestfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/vmvault/vmvault/guestfs/internal/fsutil"
)

// Disk is one disk of a restore point.
type Disk struct {
	Name string // shown to users, e.g. the disk's label in the point
	R    io.ReaderAt
	Size int64
}

// File-system kinds of a [Volume].
const (
	KindExt2      = "ext2"
	KindExt3      = "ext3"
	KindExt4      = "ext4"
	KindXFS       = "xfs"
	KindNTFS      = "ntfs"
	KindVFAT      = "vfat"
	KindExFAT     = "exfat"
	KindBtrfs     = "btrfs"
	KindSwap      = "swap"
	KindLVM2PV    = "lvm2-pv"
	KindLUKS      = "luks"
	KindBitLocker = "bitlocker"
	KindUnknown   = "unknown"
)

// Volume is one place a file system can live: a whole disk, a partition or
// an LVM logical volume.
type Volume struct {
	ID        string `json:"id"`        // opaque, stable for the restore point
	Disk      string `json:"disk"`      // name of the disk it is on ("" for an LV spanning disks)
	DiskIndex int    `json:"diskIndex"` // index into the disks given to Volumes (-1 for an LV)
	Partition *int   `json:"partition"` // partition number (1-based, as Linux numbers them), or nil
	FS        string `json:"fs"`        // one of the Kind constants
	Label     string `json:"label"`
	LV        string `json:"lv"`     // "vg/lv" for a logical volume, else ""
	Offset    int64  `json:"offset"` // byte offset on its disk (0 for an LV)
	Size      int64  `json:"size"`
	Browsable bool   `json:"browsable"`
	Reason    string `json:"reason,omitempty"` // why it cannot be browsed
}

// FS is a read-only file system of one volume. Names are io/fs paths
// ("." is the root, "etc/hostname"); give user input to [CleanPath] first.
// Open, Stat and ReadDir follow symbolic links (inside the volume);
// Lstat and Readlink do not.
type FS interface {
	fs.ReadDirFS
	fs.StatFS
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	// OpenFile opens a regular file for random access (HTTP Range requests).
	OpenFile(name string) (File, error)
	// Volume is the volume this FS was opened on.
	Volume() Volume
	Close() error
}

// File is an open regular file.
type File interface {
	fs.File
	io.ReaderAt
	Size() int64
}

// Sentinel errors callers branch on.
var (
	// ErrBadPath: the path leaves the volume (".." above the root) or holds a NUL byte.
	ErrBadPath = errors.New("path outside the volume")
	// ErrNotExist: no such file or directory (the same value as fs.ErrNotExist).
	ErrNotExist = fs.ErrNotExist
	// ErrNoVolume: the restore point has no volume with that ID.
	ErrNoVolume = errors.New("no such volume")
	// ErrNotBrowsable: the volume exists but holds nothing this package can read
	// (encrypted, unknown, swap, unsupported LVM layout); the error says why.
	ErrNotBrowsable = errors.New("volume cannot be browsed")
	// ErrNotDir: a directory was expected.
	ErrNotDir = errors.New("not a directory")
	// ErrIsDir: a regular file was expected.
	ErrIsDir = errors.New("is a directory")
	// ErrNotRegular: the file is not a regular file (device, fifo, socket).
	ErrNotRegular = errors.New("not a regular file")
	// ErrLinkLoop: too many symbolic links in a lookup.
	ErrLinkLoop = errors.New("too many levels of symbolic links")
	// ErrCorrupt: the file system's structures are damaged or hostile.
	ErrCorrupt = errors.New("damaged file system")
)

// CleanPath turns a user's path ("/etc/../etc/hostname", "etc/", "", "/")
// into an io/fs path ("etc/hostname", "."). It resolves "." and ".."
// lexically and refuses a ".." that would climb above the root, and NUL
// bytes, with ErrBadPath. Backslashes are ordinary name characters.
func CleanPath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", ErrBadPath
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return "", ErrBadPath
			}
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return strings.Join(parts, "/"), nil
}

// Skipped is a directory entry that listings, downloads and restores leave
// out, and why: its name cannot be a path component (see UnsafeName).
type Skipped struct {
	Dir    string `json:"dir"`  // the directory holding it, "/etc"
	Name   string `json:"name"` // the name as the volume holds it
	Reason string `json:"reason"`
}

// UnsafeName says why a name read from a volume cannot be one path
// component ("" when it can): empty, "." or "..", or holding "/" or a NUL
// byte, which no sane file system stores but a hostile image can. Such an
// entry cannot be named by a path (a "/" would make "a/b" another file's
// path), so it is skipped, and reported, wherever names become paths.
func UnsafeName(n string) string {
	switch {
	case n == "":
		return "empty name"
	case n == "." || n == "..":
		return fmt.Sprintf("the name %q would climb out of its directory", n)
	case strings.IndexByte(n, '/') >= 0:
		return `the name holds "/": no path can name it`
	case strings.IndexByte(n, 0) >= 0:
		return "the name holds a NUL byte: no path can name it"
	}
	return ""
}

// Entry is one directory entry as the CLI and the API show it.
type Entry struct {
	Name   string      `json:"name"`
	Type   string      `json:"type"` // file | dir | symlink | other
	Size   int64       `json:"size"`
	Mtime  time.Time   `json:"mtime"`
	Mode   fs.FileMode `json:"mode"`             // permission bits and type, as io/fs has them
	Target string      `json:"target,omitempty"` // for symlinks
}

// MarshalJSON writes mode as Unix permission bits in octal ("0644",
// "4755"), which is what administrators read; the type is in "type".
func (e Entry) MarshalJSON() ([]byte, error) {
	type plain Entry
	return json.Marshal(struct {
		plain
		Mode string `json:"mode"`
	}{plain(e), UnixMode(e.Mode)})
}

// UnmarshalJSON reads what MarshalJSON writes (for Go clients and tests).
func (e *Entry) UnmarshalJSON(b []byte) error {
	type plain Entry
	var v struct {
		plain
		Mode string `json:"mode"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = Entry(v.plain)
	var u uint32
	if _, err := fmt.Sscanf(v.Mode, "%o", &u); err != nil && v.Mode != "" {
		return fmt.Errorf("mode %q: %w", v.Mode, err)
	}
	m := fs.FileMode(u & 0o777)
	if u&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if u&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if u&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch e.Type {
	case "dir":
		m |= fs.ModeDir
	case "symlink":
		m |= fs.ModeSymlink
	case "other":
		m |= fs.ModeIrregular
	}
	e.Mode = m
	return nil
}

// UnixPerm is the permission, setuid, setgid and sticky bits of m as Unix
// mode bits (07777), as chmod, tar headers and FUSE attributes take them.
func UnixPerm(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// UnixMode formats UnixPerm(m) in octal, as chmod takes it.
func UnixMode(m fs.FileMode) string {
	return fmt.Sprintf("%04o", UnixPerm(m))
}

// Sparse is implemented by the files FS returns: DataExtents gives the
// byte ranges [offset, length] that hold data, so a copy can leave the
// holes unwritten; ok is false when the reader does not know.
type Sparse interface {
	DataExtents() (ranges [][2]int64, ok bool)
}

// TypeOf names the entry type of a file mode: file, dir, symlink or other.
func TypeOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// Volumes finds every volume on the disks. An unreadable partition table or
// LVM metadata makes a volume unbrowsable with a reason; only a failure to
// read the disks at all (or ctx) is an error.
func Volumes(ctx context.Context, disks []Disk) ([]Volume, error) {
	return findVolumes(ctx, disks)
}

// Open opens the file system of the volume with the given ID. ctx bounds the
// life of the returned FS (see the package doc). It fails with ErrNoVolume
// when no such volume exists and with ErrNotBrowsable when it cannot be read.
func Open(ctx context.Context, disks []Disk, volumeID string) (FS, error) {
	return openVolume(ctx, disks, volumeID)
}

// List reads the directory at name (following symlinks) and returns its
// entries sorted by name, symlink targets included.
func List(fsys FS, name string) ([]Entry, error) {
	return listDir(fsys, name)
}

// FileID returns the identity of a file inside its volume, from a FileInfo
// this package's FS returned (inode number, MFT record, first cluster).
// Two paths with one identity are one directory reached twice: a hard link
// to a directory, or a loop in a hostile image. ok is false for a FileInfo
// from elsewhere.
func FileID(fi fs.FileInfo) (id uint64, ok bool) {
	v, ok := fi.Sys().(fsutil.ID)
	return uint64(v), ok
}
