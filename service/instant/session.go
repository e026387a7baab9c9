package instant

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmvault/vmvault/disk/vmdk"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/instant/overlay"
	"github.com/vmvault/vmvault/vmconfig"
)

// ErrNotSessionDir: the directory holds files but no session.
var ErrNotSessionDir = errors.New("directory is neither empty nor a session's")

// ErrOtherPoint: the overlay directory holds a session of another point.
var ErrOtherPoint = errors.New("overlay directory belongs to another restore point")

// Options describe a session.
type Options struct {
	// Point is the restore point id or unique prefix.
	Point string
	// Dir is the session's directory (created; reused when it holds a
	// session of the same point: the export path, handles and overlay
	// survive a restart).
	Dir string
	// OverlayLimit caps the bytes written per disk (0: 1 GiB).
	OverlayLimit int64
	// ScratchLimit caps the bytes of the files clients create beside the
	// point's (0: DefaultScratchLimit).
	ScratchLimit int64
	// NoSync skips fsync (tests only).
	NoSync bool
}

// DefaultOverlayLimit is the per-disk cap when Options.OverlayLimit is 0.
const DefaultOverlayLimit = 1 << 30

// File is one file of an export.
type File struct {
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	Writable bool   `json:"writable"`
	Disk     int    `json:"disk"` // the point's disk index; -1 for the .vmx
}

// state is session.json.
type state struct {
	Version  int    `json:"version"`
	Point    string `json:"point"`
	Export   string `json:"export"`
	HandleID string `json:"handle_id"`
	Key      string `json:"key"`
}

// Session is one exported restore point.
type Session struct {
	Point  repository.Point
	Export string // the export path, e.g. /vmvault/AB12...
	Dir    string

	scratch *scratchDir

	hid   [16]byte
	key   []byte
	nodes []*node // nodes[0] is the root directory
	mod   time.Time
	clk   clock.Clock

	closeOnce sync.Once
	closeErr  error
}

type node struct {
	// mtime (Unix ns; 0: the point's time) moves on each write and on
	// SETATTR of the times, so that clients' attribute caches see changes.
	mtime   atomic.Int64
	idx     uint32
	name    string
	dir     bool
	size    int64
	content []byte // descriptors and the .vmx
	disk    *diskFile
	file    File
}

type diskFile struct {
	base *repository.DiskReader
	ov   *overlay.Store
	ra   *readahead
}

func (d *diskFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.ov.ReadAt(p, off, d.base)
	if d.ra != nil {
		d.ra.saw(off, n)
	}
	return n, err
}

// Open opens a session of a restore point of r.
func Open(ctx context.Context, r *repository.Repository, opts Options) (*Session, error) {
	if opts.Dir == "" {
		return nil, errors.New("instant: no session directory")
	}
	p, err := r.Point(ctx, opts.Point)
	if err != nil {
		return nil, err
	}
	if p.Partial {
		return nil, fmt.Errorf("restore point %s is partial: it cannot be exported", p.ID)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	// A directory of other files is never adopted: Remove deletes what
	// a session keeps there.
	if ents, err := os.ReadDir(opts.Dir); err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	} else if len(ents) > 0 {
		if _, err := os.Stat(filepath.Join(opts.Dir, "session.json")); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.Dir, ErrNotSessionDir)
		}
	}
	st, err := loadState(opts.Dir, p.ID)
	if err != nil {
		return nil, err
	}
	s := &Session{Point: p, Export: st.Export, Dir: opts.Dir, mod: p.Time, clk: clock.Real()}
	hb, err1 := hex.DecodeString(st.HandleID)
	kb, err2 := hex.DecodeString(st.Key)
	if err1 != nil || err2 != nil || len(hb) != 16 || len(kb) != 32 {
		return nil, fmt.Errorf("%s: bad handle id or key", filepath.Join(opts.Dir, "session.json"))
	}
	copy(s.hid[:], hb)
	s.key = kb
	if err := s.build(ctx, r, opts); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.scratch, err = openScratch(filepath.Join(opts.Dir, "scratch"), opts.ScratchLimit, func(n string) bool {
		return n == "" || s.lookup(n) != nil
	})
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func loadState(dir, point string) (state, error) {
	path := filepath.Join(dir, "session.json")
	b, err := os.ReadFile(path)
	if err == nil {
		var st state
		if err := json.Unmarshal(b, &st); err != nil || st.Version != 1 {
			return st, fmt.Errorf("%s: not a session file", path)
		}
		if st.Point != point {
			return st, fmt.Errorf("%s: %w (%s)", dir, ErrOtherPoint, st.Point)
		}
		return st, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return state{}, err
	}
	st := state{Version: 1, Point: point, Export: "/vmvault/" + randomName(), HandleID: hex.EncodeToString(random(16)), Key: hex.EncodeToString(random(32))}
	b, _ = json.MarshalIndent(st, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return st, err
	}
	if f, err := os.Open(tmp); err == nil {
		f.Sync()
		f.Close()
	}
	if err := os.Rename(tmp, path); err != nil {
		return st, err
	}
	return st, nil
}

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return b
}

// randomName is 128 random bits as lower-case base32: unguessable, and
// safe in a URL and an NFS path.
func randomName() string {
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(random(16)))
}

// fileBase is the export's name stem: the VM's name restricted to what
// every client and ESXi accept.
func fileBase(name string) string {
	var b strings.Builder
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.Trim(b.String(), ".")
	if s == "" {
		s = "vm"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

func (s *Session) build(ctx context.Context, r *repository.Repository, opts Options) error {
	var cfg *vmconfig.VMConfig
	if raw, err := r.LoadConfigBlob(ctx, s.Point); err != nil {
		return fmt.Errorf("load VM configuration: %w", err)
	} else if raw != nil {
		c, err := vmconfig.Decode(raw)
		if err != nil {
			return err
		}
		cfg = &c
	}
	limit := opts.OverlayLimit
	if limit == 0 {
		limit = DefaultOverlayLimit
	}
	s.nodes = []*node{{idx: 0, dir: true}}
	add := func(n *node) {
		n.idx = uint32(len(s.nodes))
		n.file.Name, n.file.Size = n.name, n.size
		s.nodes = append(s.nodes, n)
	}
	base := fileBase(s.Point.VM.Name)
	var vmdkNames []string
	for i := range s.Point.Disks {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s_%d", base, i)
		}
		dr, err := r.OpenDisk(ctx, s.Point.ID, i)
		if err != nil {
			return err
		}
		ov, err := overlay.Open(s.Dir, fmt.Sprintf("disk%d", i), dr.Size(), overlay.Options{Limit: limit, NoSync: opts.NoSync})
		if err != nil {
			dr.Close()
			return err
		}
		df := &diskFile{base: dr, ov: ov, ra: &readahead{base: dr, size: dr.Size(), window: readaheadWindow}}
		desc, err := vmdk.FlatDescriptor(dr.Size()/vmdk.SectorSize*vmdk.SectorSize, name+"-flat.vmdk", adapterFor(cfg, i),
			crc32.ChecksumIEEE([]byte(s.Point.ID+name)), diskDDB(cfg, i))
		if err != nil {
			// A disk smaller than a sector or one the format cannot hold:
			// export the flat file alone.
			desc = nil
		}
		if desc != nil {
			add(&node{name: name + ".vmdk", size: int64(len(desc)), content: desc, file: File{Disk: i}})
		}
		add(&node{name: name + "-flat.vmdk", size: dr.Size(), disk: df, file: File{Disk: i, Writable: true}})
		vmdkNames = append(vmdkNames, name+".vmdk")
	}
	if cfg != nil {
		vmx := VMX(*cfg, vmdkNames)
		add(&node{name: base + ".vmx", size: int64(len(vmx)), content: vmx, file: File{Disk: -1}})
	}
	return nil
}

// adapterFor is the descriptor's ddb.adapterType of disk i.
func adapterFor(cfg *vmconfig.VMConfig, i int) string {
	if cfg == nil {
		return "lsilogic"
	}
	for _, d := range cfg.Disks {
		if d.Index != i {
			continue
		}
		switch d.ControllerType {
		case "ide":
			return "ide"
		}
		for _, c := range cfg.Controllers {
			if c.Key == d.ControllerKey && c.Model == "buslogic" {
				return "buslogic"
			}
		}
	}
	return "lsilogic"
}

func diskDDB(cfg *vmconfig.VMConfig, i int) map[string]string {
	if cfg == nil {
		return nil
	}
	for _, d := range cfg.Disks {
		if d.Index == i && d.Thin {
			return map[string]string{"ddb.thinProvisioned": "1"}
		}
	}
	return nil
}

// Files lists the export's files.
func (s *Session) Files() []File {
	var out []File
	for _, n := range s.nodes[1:] {
		out = append(out, n.file)
	}
	return out
}

// ReadAt reads a file of the export as a client would (tests, checks).
func (s *Session) ReadAt(name string, p []byte, off int64) (int, error) {
	n := s.lookup(name)
	if n == nil || n.dir {
		return 0, os.ErrNotExist
	}
	return n.readAt(p, off)
}

func (s *Session) lookup(name string) *node {
	name = strings.TrimPrefix(name, "/")
	if name == "" || name == "." {
		return s.nodes[0]
	}
	for _, n := range s.nodes[1:] {
		if n.name == name {
			return n
		}
	}
	return nil
}

// Sync makes every write durable.
func (s *Session) Sync() error {
	var errs []error
	for _, n := range s.nodes {
		if n.disk != nil {
			errs = append(errs, n.disk.ov.Sync())
		}
	}
	return errors.Join(errs...)
}

// Overlays returns each disk's written bytes and limit.
func (s *Session) Overlays() (used, limit int64) {
	for _, n := range s.nodes {
		if n.disk != nil {
			used += n.disk.ov.Used()
			limit += n.disk.ov.Limit()
		}
	}
	return used, limit
}

func (s *Session) closeFiles() error {
	var errs []error
	for _, n := range s.nodes {
		if n.disk != nil {
			errs = append(errs, n.disk.ov.Close(), n.disk.base.Close())
		}
	}
	return errors.Join(errs...)
}

// Close closes the session; its directory stays (Remove deletes it).
func (s *Session) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.closeFiles() })
	return s.closeErr
}

// Remove closes the session and deletes its files, and its directory
// when nothing else is left in it: what clients wrote is gone.
func (s *Session) Remove() error {
	errs := []error{s.Close(), s.scratch.removeAll()}
	for i := range s.Point.Disks {
		errs = append(errs, overlay.Remove(s.Dir, fmt.Sprintf("disk%d", i)))
	}
	for _, f := range []string{"session.json", "session.json.tmp"} {
		if err := os.Remove(filepath.Join(s.Dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(s.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("session directory not removed: %w", err))
	}
	return errors.Join(errs...)
}
