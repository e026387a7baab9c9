// Package filerestore is the file-level restore service of the daemon and
// the CLI: given a restore point id it opens the point's disks from the
// repository as guestfs.Disk values, lists their volumes, opens their file
// systems (kept open for a short time, a bounded number of points at once),
// serves paged directory listings, random access to files (HTTP Range),
// streamed zip and tar archives of a selection and the extraction of a
// selection to a local file, directory or archive (`appliance files get`),
// and keeps the file catalog of every point (service/filerestore/catalog) for searches
// across points. The daemon's API and the CLI's `files` commands go through
// the same Service.
//
// What it owns: the cache of open points, the archive writer (names always
// relative and cleaned, links stored as links, never followed), the
// extractor (writes confined to the output by os.Root, nothing left behind
// on failure) and the background indexer. What it does not: volume and file-system parsing
// (guestfs), the repository (repository), HTTP (web).
package filerestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
)

// Source finds restore points and their repositories; repos.Set
// implements it, [Single] wraps one repository (the CLI).
type Source interface {
	// Names lists the repositories, sorted.
	Names() []string
	// Repo returns an open repository by name.
	Repo(name string) (*repository.Repository, error)
	// Locate returns the repository holding a point (id or unique prefix).
	Locate(ctx context.Context, id string) (string, repository.Point, error)
}

// Single is a Source of one repository.
func Single(name string, r *repository.Repository) Source { return single{name, r} }

type single struct {
	name string
	r    *repository.Repository
}

func (s single) Names() []string { return []string{s.name} }
func (s single) Repo(name string) (*repository.Repository, error) {
	if name != s.name {
		return nil, fmt.Errorf("repository %q: %w", name, repository.ErrNotFound)
	}
	return s.r, nil
}
func (s single) Locate(ctx context.Context, id string) (string, repository.Point, error) {
	p, err := s.r.Point(ctx, id)
	return s.name, p, err
}

// Config configures a Service.
type Config struct {
	Source Source
	// CatalogDir holds one catalog file per repository (service/filerestore/catalog/FORMAT.md);
	// "" disables the catalog (Search answers ErrNoCatalog).
	CatalogDir string
	// TTL is how long an idle point stays open; default 2 minutes.
	TTL time.Duration
	// MaxOpen bounds the points kept open while idle; default 4. Each open
	// disk holds the repository's blob cache (repository.OpenOptions.CacheBytes).
	MaxOpen int
	// IndexInterval is how often the indexer looks for points without a
	// catalog and for catalogs whose point is gone; default 1 minute.
	IndexInterval time.Duration
	// IndexMaxEntries bounds the entries one point's catalog may hold
	// (all volumes together); default 20 million. IndexMaxTime bounds the
	// time one point may take to index; default 1 hour. A point over either
	// budget keeps what was indexed, is marked with the reason and is not
	// tried again, so that one hostile or huge guest never stalls the
	// catalog of every other point.
	IndexMaxEntries int64
	IndexMaxTime    time.Duration
	// Clock measures IndexMaxTime, the TTL of idle points (the janitor's
	// timer) and how long a located point is trusted; default the real
	// clock.
	Clock clock.Clock
	// Logf reports indexer problems; default: discarded.
	Logf func(format string, args ...any)
}

// ErrNoCatalog: the service runs without a catalog directory.
var ErrNoCatalog = errors.New("file catalog not configured")

// Service serves file-level restore. It is safe for concurrent use.
type Service struct {
	cfg Config

	mu     sync.Mutex
	points map[string]*openPoint // by full point id
	closed bool

	stopJanitor chan struct{}
	janitorDone chan struct{}

	idx indexer
}

// New starts a service (and its janitor, which closes idle points). Close
// it to release every open disk.
func New(cfg Config) (*Service, error) {
	if cfg.Source == nil {
		return nil, errors.New("filerestore: Source is required")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 2 * time.Minute
	}
	if cfg.MaxOpen <= 0 {
		cfg.MaxOpen = 4
	}
	if cfg.IndexInterval <= 0 {
		cfg.IndexInterval = time.Minute
	}
	if cfg.IndexMaxEntries <= 0 {
		cfg.IndexMaxEntries = 20_000_000
	}
	if cfg.IndexMaxTime <= 0 {
		cfg.IndexMaxTime = time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := &Service{cfg: cfg, points: map[string]*openPoint{}, stopJanitor: make(chan struct{}), janitorDone: make(chan struct{})}
	s.idx.init(s)
	go s.janitor()
	return s, nil
}

// Close closes every open point and catalog. Calls after it fail.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	pts := s.points
	s.points = map[string]*openPoint{}
	s.mu.Unlock()
	close(s.stopJanitor)
	<-s.janitorDone
	for _, p := range pts {
		p.close()
	}
	return s.idx.close()
}

func (s *Service) janitor() {
	defer close(s.janitorDone)
	every := max(s.cfg.TTL/4, 50*time.Millisecond)
	for {
		t := s.cfg.Clock.NewTimer(every)
		select {
		case <-s.stopJanitor:
			t.Stop()
			return
		case <-t.C():
			s.evict(false)
		}
	}
}

// evict closes idle points past the TTL, and the least recently used idle
// points beyond MaxOpen. Points in use are never closed.
func (s *Service) evict(overOnly bool) {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	var idle []*openPoint
	for _, p := range s.points {
		if p.refs == 0 {
			idle = append(idle, p)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUsed.Before(idle[j].lastUsed) })
	var gone []*openPoint
	n := len(s.points)
	for _, p := range idle {
		if n > s.cfg.MaxOpen || (!overOnly && now.Sub(p.lastUsed) > s.cfg.TTL) {
			delete(s.points, p.id)
			gone = append(gone, p)
			n--
		}
	}
	s.mu.Unlock()
	for _, p := range gone {
		p.close()
	}
}

// openPoint is one restore point's disks, volumes and open file systems.
type openPoint struct {
	id, repo string
	point    repository.Point

	// guarded by Service.mu
	refs     int
	lastUsed time.Time
	located  time.Time // when Locate last found the point

	initOnce sync.Once
	initErr  error
	readers  []*repository.DiskReader
	disks    []guestfs.Disk
	vols     []guestfs.Volume

	fsMu sync.Mutex
	fss  map[string]*openFS
}

type openFS struct {
	once   sync.Once
	err    error
	fs     guestfs.FS
	cancel context.CancelFunc

	lmu      sync.Mutex
	listings []listing // most recent last, at most maxListings
}

type listing struct {
	dir     string
	entries []guestfs.Entry
	skipped []guestfs.Skipped // names no path can name (guestfs.UnsafeName)
}

// maxListings bounds the directory listings kept per open volume for
// paging (a 100,000-entry directory is ~10 MB).
const maxListings = 4

func (p *openPoint) close() {
	p.fsMu.Lock()
	for _, o := range p.fss {
		if o.cancel != nil {
			o.cancel()
		}
		if o.fs != nil {
			o.fs.Close()
		}
	}
	p.fss = nil
	p.fsMu.Unlock()
	for _, r := range p.readers {
		r.Close()
	}
}

// acquire returns the open point (opening it if needed) with a reference
// the caller releases.
func (s *Service) acquire(ctx context.Context, id string) (*openPoint, func(), error) {
	// A point used a moment ago by its full id (the requests of one
	// download, a 10,000-path selection) is not looked up again: Locate
	// lists every point of every repository.
	s.mu.Lock()
	if p := s.points[id]; p != nil && !s.closed && s.cfg.Clock.Since(p.located) < locateFresh {
		p.refs++
		p.lastUsed = s.cfg.Clock.Now()
		s.mu.Unlock()
		return s.ready(ctx, p)
	}
	s.mu.Unlock()
	repoName, pt, err := s.cfg.Source.Locate(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errors.New("file restore service is closed")
	}
	p := s.points[pt.ID]
	if p == nil {
		p = &openPoint{id: pt.ID, repo: repoName, point: pt, fss: map[string]*openFS{}}
		s.points[pt.ID] = p
	}
	p.refs++
	p.lastUsed = s.cfg.Clock.Now()
	p.located = p.lastUsed
	s.mu.Unlock()
	return s.ready(ctx, p)
}

// locateFresh is how long a point found by Locate is trusted without
// looking again (a deleted point stops being served after at most this).
const locateFresh = 5 * time.Second

// ready opens p's disks on first use; p holds a reference the returned
// release drops.
func (s *Service) ready(ctx context.Context, p *openPoint) (*openPoint, func(), error) {
	release := func() {
		s.mu.Lock()
		p.refs--
		p.lastUsed = s.cfg.Clock.Now()
		s.mu.Unlock()
		s.evict(true)
	}
	p.initOnce.Do(func() { p.initErr = s.openDisks(ctx, p) })
	if p.initErr != nil {
		release()
		s.mu.Lock()
		if s.points[p.id] == p {
			delete(s.points, p.id) // the next request tries again
		}
		s.mu.Unlock()
		return nil, nil, p.initErr
	}
	return p, release, nil
}

func (s *Service) openDisks(ctx context.Context, p *openPoint) error {
	r, err := s.cfg.Source.Repo(p.repo)
	if err != nil {
		return err
	}
	disks, readers, err := OpenDisks(ctx, r, p.point)
	if err != nil {
		return err
	}
	p.disks, p.readers = disks, readers
	// The volumes are read with a context of their own: the point is
	// shared by requests, and one cancelled request must not poison it.
	vols, err := guestfs.Volumes(context.WithoutCancel(ctx), disks)
	if err != nil {
		for _, r := range readers {
			r.Close()
		}
		return fmt.Errorf("volumes of %s: %w", p.id, err)
	}
	p.vols = vols
	return nil
}

// OpenDisks opens every disk of a point as an guestfs.Disk; the caller closes
// the readers.
func OpenDisks(ctx context.Context, r *repository.Repository, p repository.Point) ([]guestfs.Disk, []*repository.DiskReader, error) {
	var disks []guestfs.Disk
	var readers []*repository.DiskReader
	for i, d := range p.Disks {
		dr, err := r.OpenDisk(ctx, p.ID, i)
		if err != nil {
			for _, o := range readers {
				o.Close()
			}
			return nil, nil, fmt.Errorf("open disk %d of %s: %w", i, p.ID, err)
		}
		readers = append(readers, dr)
		name := d.Label
		if name == "" {
			name = fmt.Sprintf("disk%d", i)
		}
		disks = append(disks, guestfs.Disk{Name: name, R: dr, Size: dr.Size()})
	}
	return disks, readers, nil
}

// fsOf returns the open FS of a volume of p.
func (p *openPoint) fsOf(volume string) (*openFS, error) {
	p.fsMu.Lock()
	if p.fss == nil {
		p.fsMu.Unlock()
		return nil, errors.New("restore point closed")
	}
	o := p.fss[volume]
	if o == nil {
		o = &openFS{}
		p.fss[volume] = o
	}
	p.fsMu.Unlock()
	o.once.Do(func() {
		// The FS lives as long as the cached point, not the request.
		ctx, cancel := context.WithCancel(context.Background())
		o.fs, o.err = guestfs.Open(ctx, p.disks, volume)
		if o.err != nil {
			cancel()
			return
		}
		o.cancel = cancel
	})
	if o.err != nil {
		if !errors.Is(o.err, guestfs.ErrNoVolume) && !errors.Is(o.err, guestfs.ErrNotBrowsable) {
			p.fsMu.Lock()
			if p.fss != nil && p.fss[volume] == o {
				delete(p.fss, volume) // a transient failure is retried
			}
			p.fsMu.Unlock()
		}
		return nil, o.err
	}
	return o, nil
}

// withFS runs fn on a volume's FS, holding the point open meanwhile.
func (s *Service) withFS(ctx context.Context, point, volume string, fn func(*openPoint, *openFS) error) error {
	p, release, err := s.acquire(ctx, point)
	if err != nil {
		return err
	}
	defer release()
	o, err := p.fsOf(volume)
	if err != nil {
		return err
	}
	return fn(p, o)
}

// Volumes lists a point's volumes.
func (s *Service) Volumes(ctx context.Context, point string) ([]guestfs.Volume, error) {
	p, release, err := s.acquire(ctx, point)
	if err != nil {
		return nil, err
	}
	defer release()
	return append([]guestfs.Volume{}, p.vols...), nil
}

// ReadDir returns entries [offset, offset+limit) of a directory sorted by
// name, how many there are, and the entries left out because no path can
// name them (every one, on every page: guestfs.UnsafeName). The whole
// listing is read once and kept with the open volume, so the next pages
// cost nothing.
func (s *Service) ReadDir(ctx context.Context, point, volume, dir string, offset, limit int) ([]guestfs.Entry, int, []guestfs.Skipped, error) {
	clean, err := guestfs.CleanPath(dir)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("path %q: %w", dir, err)
	}
	var page []guestfs.Entry
	var skipped []guestfs.Skipped
	total := 0
	err = s.withFS(ctx, point, volume, func(_ *openPoint, o *openFS) error {
		ents, sk, err := o.listing(ctx, clean)
		if err != nil {
			return err
		}
		skipped = append([]guestfs.Skipped{}, sk...)
		total = len(ents)
		lo := min(max(offset, 0), total)
		hi := total
		if limit > 0 {
			hi = min(lo+limit, total)
		}
		page = append([]guestfs.Entry{}, ents[lo:hi]...)
		return nil
	})
	return page, total, skipped, err
}

func (o *openFS) listing(ctx context.Context, dir string) ([]guestfs.Entry, []guestfs.Skipped, error) {
	o.lmu.Lock()
	for i, l := range o.listings {
		if l.dir == dir {
			o.listings = append(append(o.listings[:i:i], o.listings[i+1:]...), l)
			o.lmu.Unlock()
			return l.entries, l.skipped, nil
		}
	}
	o.lmu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	all, skipped, err := guestfs.ListSkipped(o.fs, dir)
	if err != nil {
		return nil, nil, err
	}
	ents, more := splitUnsafe(guestfs.SlashPath(dir), all)
	skipped = append(skipped, more...)
	o.lmu.Lock()
	if len(o.listings) >= maxListings {
		o.listings = o.listings[1:]
	}
	o.listings = append(o.listings, listing{dir, ents, skipped})
	o.lmu.Unlock()
	return ents, skipped, nil
}

// splitUnsafe takes out of a listing of dir the entries whose names no
// path can name (guestfs.UnsafeName): a listing shows them as skipped, not
// as entries a click or a download would then miss or mistake.
func splitUnsafe(dir string, all []guestfs.Entry) ([]guestfs.Entry, []guestfs.Skipped) {
	var skipped []guestfs.Skipped
	ents := all[:0:0]
	for _, e := range all {
		if why := guestfs.UnsafeName(e.Name); why != "" {
			skipped = append(skipped, guestfs.Skipped{Dir: dir, Name: e.Name, Reason: why})
			continue
		}
		ents = append(ents, e)
	}
	return ents, skipped
}

// Stat describes one path (following links, inside the volume).
func (s *Service) Stat(ctx context.Context, point, volume, name string) (guestfs.Entry, error) {
	clean, err := guestfs.CleanPath(name)
	if err != nil {
		return guestfs.Entry{}, fmt.Errorf("path %q: %w", name, err)
	}
	var e guestfs.Entry
	err = s.withFS(ctx, point, volume, func(_ *openPoint, o *openFS) error {
		fi, err := o.fs.Stat(clean)
		if err != nil {
			return err
		}
		e = entryOf(path.Base(clean), fi)
		if clean == "." {
			e.Name = "/"
		}
		return nil
	})
	return e, err
}

func entryOf(name string, fi fs.FileInfo) guestfs.Entry {
	e := guestfs.Entry{Name: name, Type: guestfs.TypeOf(fi.Mode()), Size: fi.Size(), Mtime: fi.ModTime().UTC(), Mode: fi.Mode()}
	if e.Type != "file" {
		e.Size = 0
	}
	return e
}

// OpenFile opens a regular file for random access. Closing the file
// releases the point, which stays open (for the TTL) meanwhile.
func (s *Service) OpenFile(ctx context.Context, point, volume, name string) (guestfs.File, error) {
	clean, err := guestfs.CleanPath(name)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", name, err)
	}
	p, release, err := s.acquire(ctx, point)
	if err != nil {
		return nil, err
	}
	o, err := p.fsOf(volume)
	if err != nil {
		release()
		return nil, err
	}
	f, err := o.fs.OpenFile(clean)
	if err != nil {
		release()
		return nil, err
	}
	// The bytes of a file go out as they are, holes as zeros: one that
	// claims more than its volume holds is refused, not streamed for hours
	// (archives as tar and restores to a directory keep its holes).
	if vs := o.fs.Volume().Size; vs > 0 && f.Size() > vs {
		f.Close()
		release()
		return nil, fmt.Errorf("/%s claims %d bytes on a volume of %d: %w; download it as tar (holes kept) or restore it to a directory", clean, f.Size(), vs, ErrTooSparse)
	}
	return &heldFile{File: f, release: release}, nil
}

type heldFile struct {
	guestfs.File
	once    sync.Once
	release func()
}

func (h *heldFile) Close() error {
	err := h.File.Close()
	h.once.Do(h.release)
	return err
}

// List lists a directory of a point's volume, sorted by name, with the
// entries left out because no path can name them; a path that is not a
// directory (after following links) is described on its own, as ls does:
// a link as a link, with its target.
func (s *Service) List(ctx context.Context, point, volume, name string) ([]guestfs.Entry, []guestfs.Skipped, error) {
	clean, err := guestfs.CleanPath(name)
	if err != nil {
		return nil, nil, fmt.Errorf("path %q: %w", name, err)
	}
	var out []guestfs.Entry
	var skipped []guestfs.Skipped
	err = s.withFS(ctx, point, volume, func(_ *openPoint, o *openFS) error {
		fi, err := o.fs.Stat(clean)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			ents, sk, err := o.listing(ctx, clean)
			out = append([]guestfs.Entry{}, ents...) // the cached listing is shared
			skipped = append([]guestfs.Skipped(nil), sk...)
			return err
		}
		li, err := o.fs.Lstat(clean)
		if err != nil {
			return err
		}
		e := guestfs.Entry{Name: li.Name(), Type: guestfs.TypeOf(li.Mode()), Size: li.Size(), Mtime: li.ModTime().UTC(), Mode: li.Mode()}
		if e.Type == "symlink" {
			e.Target, _ = o.fs.Readlink(clean)
		}
		out = []guestfs.Entry{e}
		return nil
	})
	return out, skipped, err
}

// Hold returns a volume's file system for a long use (a FUSE mount): the
// point stays open, whatever the TTL, until release is called. The FS is
// shared with the service's other users; the caller does not close it.
func (s *Service) Hold(ctx context.Context, point, volume string) (fsys guestfs.FS, release func(), err error) {
	p, release, err := s.acquire(ctx, point)
	if err != nil {
		return nil, nil, err
	}
	o, err := p.fsOf(volume)
	if err != nil {
		release()
		return nil, nil, err
	}
	return o.fs, release, nil
}

// Unheld is a volume HoldAll left out, and why.
type Unheld struct {
	Volume guestfs.Volume
	Reason string // the volume's Reason when it cannot be browsed, else the error opening it
}

// HoldAll holds every browsable volume of a point, as Hold does, for a
// mount of the whole point: it returns the file systems by volume id, the
// volumes left out in volume order, and one release for all of them.
func (s *Service) HoldAll(ctx context.Context, point string) (map[string]guestfs.FS, []Unheld, func(), error) {
	vols, err := s.Volumes(ctx, point)
	if err != nil {
		return nil, nil, nil, err
	}
	held := map[string]guestfs.FS{}
	var unheld []Unheld
	var releases []func()
	for _, v := range vols {
		if !v.Browsable {
			unheld = append(unheld, Unheld{Volume: v, Reason: v.Reason})
			continue
		}
		f, release, err := s.Hold(ctx, point, v.ID)
		if err != nil {
			unheld = append(unheld, Unheld{Volume: v, Reason: err.Error()})
			continue
		}
		releases = append(releases, release)
		held[v.ID] = f
	}
	return held, unheld, func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}, nil
}
