package repository

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository/s3store"
	"github.com/vmvault/vmvault/repository/storage"
)

// OpenOptions tune an open repository.
type OpenOptions struct {
	NoFsync    bool // tests only; default fsyncs per the write-order contract
	CacheBytes int  // blob cache for readers; 0 = 64 MiB
	// CompressionLevel overrides the config's level for this process
	// ("fastest", "default", "better"; "" = the config's).
	CompressionLevel string
	// RetryLock is how long Open waits for a repository locked by another
	// process (0: fail at once with a LockedError naming the holder).
	RetryLock time.Duration
	// Holder names this process in the lock file ("daemon", "CLI (repo
	// check)"); "" = the program and its sub-command.
	Holder string
	// CacheDir holds the catalog (index.db) and the process lock of a
	// remote repository; "" = $VMVAULT_CACHE_DIR or the user's cache
	// directory, under vmvault/repos/<hash of the location>. Unused for a
	// local repository (its catalog lives in it).
	CacheDir string
	// Logger receives warnings (a catalog rebuilt after corruption, ...);
	// nil = slog.Default(). Warnings also returns them.
	Logger *slog.Logger
	// Clock decides when time locks and object locks expire (nil: the
	// wall clock).
	Clock clock.Clock
	// ReadOnly opens a repository that another appliance may be writing
	// into, to list and restore: no repository lock or lease is taken and
	// nothing is written to the repository (writes fail with ErrReadOnly,
	// nothing left by a crash is cleaned up). The catalog is a cache of its
	// own, in CacheDir or by default beside the owner's under
	// vmvault/repos/<hash of the location>-ro (for a local repository too),
	// brought up to date at Open, by Refresh, and when a point id is not
	// found. A second read-only Open with the same cache directory waits
	// for the first (RetryLock) or fails with ErrLocked.
	ReadOnly bool
	// Appliance names this writer in the points it commits into a
	// multi-writer repository (manifest "writer", FORMAT.md §12a); "" =
	// the host name.
	Appliance string
	// Upload and Download limit the bytes this process sends to and reads
	// from the repository's storage (a local directory or an object store;
	// internal/ratelimit's Limiter, shared with whoever else it limits).
	// nil: unlimited. The catalog cache (index.db) is never limited.
	Upload, Download storage.Limiter
}

// Repository is an open repository. It is safe for concurrent use. Close
// may run while readers (Check, Reclaim, Stats, disk readers, LoadBlob) are
// in flight: it waits for them, and every call that starts after Close
// began fails with ErrClosed.
type Repository struct {
	dir      string // local directory of index.db and locks/ (the repository itself when local)
	store    storage.Storage
	cfg      Config
	codec    *codec
	opts     OpenOptions
	lockFile *os.File
	lease    func() error // releases a remote repository's lease (nil when local)
	mw       *multiWriter // several writers (format 2.0; nil otherwise)
	db       *bolt.DB
	files    *fileCache
	log      *slog.Logger
	// reclaimMaxBlobs overrides the blobs one reclaim takes (tests; 0:
	// reclaimMaxBlobs).
	reclaimMaxBlobs int
	// reclaimBatch overrides catalogBatch (tests; 0: catalogBatch).
	reclaimBatch int

	warnMu   sync.Mutex
	warnings []string

	keyMu   sync.Mutex // guards the fields below (keys.go)
	cfile   configFile // the config as read or last written
	master  []byte     // the 64-byte master key (nil when unencrypted)
	usedKey string     // the key that opened the repository (keys.go)

	// salvageHints, set during Recatalog, returns the entries the previous
	// catalog knew for a pack (offsets and lengths for salvagePack).
	salvageHints func(packID) []packEntry

	mu        sync.Mutex // guards the fields below; never held across I/O except short catalog reads
	pending   map[ID]*pendingBlob
	condemned map[ID]struct{}
	sessions  map[*Session]struct{}
	sessDone  *sync.Cond // broadcast when a session ends
	gen       uint64     // bumped by each condemn step
	marking   bool
	markExtra map[ID]struct{}
	openPacks map[packID]*packWriter
	closed    bool
	holds     map[ID]time.Time         // time locks: point → latest hold (hold.go)
	inUse     map[ID]map[uint64]string // points held in use by this process (inuse.go)
	inUseSeq  uint64
	packLocks map[packID]time.Time // immutable repositories: a known lower bound of each pack's retention (lockextend.go)

	inflight sync.WaitGroup // puts in progress (Close waits for them)
	readers  sync.WaitGroup // read-side calls in progress (enter/leave; Close waits for them)

	poolMu sync.Mutex
	free   []*packWriter

	finq  chan *packWriter
	finWG sync.WaitGroup

	gcMu      sync.RWMutex // W: reclaim deleting packs; R: copying a condemned blob
	maintMu   sync.Mutex   // one Reclaim/Recatalog at a time
	refreshMu sync.Mutex   // one Refresh at a time (taken before maintMu)
}

// pendingBlob is a blob reserved by a session and not yet indexed.
type pendingBlob struct {
	ready  chan struct{} // closed once appended (pw set) or failed (err set)
	pw     *packWriter
	err    error
	rawLen uint32
	typ    BlobType
}

const lockFileName = "repo.lock"

// leaser is a backend with its own lock (an object store's lease object).
type leaser interface {
	AcquireLease(ctx context.Context, holder string, wait time.Duration) (func() error, error)
}

// Open opens the repository at location (a local directory or an s3: URL,
// see ParseLocation). See the package documentation for the recovery it
// performs.
func Open(ctx context.Context, location string, password []byte, opts OpenOptions) (*Repository, error) {
	loc, err := ParseLocation(location)
	if err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	var store storage.Storage
	var dir string
	if opts.ReadOnly {
		store, dir, err = openReadOnlyStore(ctx, loc, opts.CacheDir)
	} else {
		store, dir, err = openStore(ctx, loc, opts.CacheDir, opts.NoFsync, false)
	}
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", location, err)
	}
	if opts.Upload != nil || opts.Download != nil {
		store = storage.NewLimited(store, opts.Upload, opts.Download)
	}
	r, err := openWith(ctx, store, dir, password, opts)
	if err != nil {
		store.Close()
		return nil, err
	}
	return r, nil
}

func openWith(ctx context.Context, store storage.Storage, dir string, password []byte, opts OpenOptions) (*Repository, error) {
	b, err := storage.ReadAll(ctx, store, "config")
	if err != nil {
		if storage.IsNotExist(err) {
			return nil, fmt.Errorf("open repository %s: not a vmvault repository (no config): %w", dir, ErrNotFound)
		}
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	cf, err := decodeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	var encKey, idKey, master []byte
	var idMAC, usedKey string
	var keyWarns []string
	if e := cf.Encryption; e != nil {
		idMAC = e.IDMAC
		master, usedKey, keyWarns, err = openMaster(ctx, store, cf, password)
		if err != nil {
			for _, w := range keyWarns {
				logger(opts).Warn(w, "repository", dir)
			}
			return nil, fmt.Errorf("open repository %s: %w", dir, err)
		}
		encKey, idKey = master[:32], master[32:]
	}
	multi := cf.Writers == writersMulti && !opts.ReadOnly
	if l, ok := storage.As[*storage.Local](store); ok && multi && dir == l.Dir() {
		// Several processes write this directory: each keeps its catalog
		// in a cache of its own, as for a remote repository.
		d, err := cacheDir(opts.CacheDir, Location{Raw: l.Dir(), Local: l.Dir()})
		if err != nil {
			return nil, fmt.Errorf("open repository %s: %w", dir, err)
		}
		if opts.CacheDir == "" {
			d += "-w"
		}
		dir = d
	}
	if err := os.MkdirAll(filepath.Join(dir, "locks"), 0o700); err != nil {
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	lockPath := filepath.Join(dir, "locks", lockFileName)
	lf, err := acquireRepoLock(ctx, lockPath, opts.RetryLock, opts.Holder)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	var lease func() error
	if ls, ok := storage.As[leaser](store); ok && !opts.ReadOnly && !multi {
		// A remote repository is shared by every appliance that can reach
		// it: the local flock guards the catalog cache, the lease the
		// bucket.
		holder := opts.Holder
		if holder == "" {
			holder = defaultHolder()
		}
		release, err := ls.AcquireLease(ctx, holder, opts.RetryLock)
		if err != nil {
			releaseRepoLock(lf)
			if le := (*s3store.LockedError)(nil); errors.As(err, &le) {
				return nil, fmt.Errorf("open repository %s: %w: %w", store.Location(), ErrLocked, err)
			}
			return nil, fmt.Errorf("open repository %s: %w", store.Location(), err)
		}
		lease = release
	}
	unlock := func() {
		if lease != nil {
			lease()
		}
		releaseRepoLock(lf)
	}
	level := cf.Level
	if opts.CompressionLevel != "" {
		if !validLevel(opts.CompressionLevel) {
			unlock() // the process keeps no lock for a refused Open
			return nil, fmt.Errorf("open repository %s: unknown compression level %q", dir, opts.CompressionLevel)
		}
		level = opts.CompressionLevel
	}
	c, err := newCodec(encKey, idKey, idMAC, level)
	if err != nil {
		unlock()
		return nil, err
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 64 << 20
	}
	r := &Repository{
		dir: dir, store: store, cfg: cf.public(), codec: c, opts: opts, lockFile: lf, lease: lease, log: opts.Logger,
		files:     newFileCache(store, 64),
		pending:   map[ID]*pendingBlob{},
		condemned: map[ID]struct{}{},
		sessions:  map[*Session]struct{}{},
		openPacks: map[packID]*packWriter{},
		cfile:     cf, master: master, usedKey: usedKey,
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	for _, w := range keyWarns {
		r.warn(w)
	}
	r.sessDone = sync.NewCond(&r.mu)
	fail := func(err error) (*Repository, error) {
		if r.db != nil {
			r.db.Close()
		}
		c.close()
		unlock()
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	if !opts.ReadOnly && !multi { // the owner's staging and uploads in flight are not ours
		if err := r.removeTemp(); err != nil {
			return fail(err)
		}
	}
	if multi {
		// The lease first (nothing is written before it), and the log's
		// last entry before the catalog reconciles with the listings.
		if err := r.mwStart(ctx); err != nil {
			return fail(err)
		}
		prev := fail
		fail = func(err error) (*Repository, error) {
			r.mwStop()
			return prev(err)
		}
	}
	if err := r.loadCatalog(ctx); err != nil {
		return fail(err)
	}
	if multi {
		if err := r.mwSync(ctx); err != nil {
			return fail(err)
		}
	}
	if err := r.setupObjectLock(); err != nil {
		return fail(err)
	}
	if err := r.loadHolds(ctx); err != nil {
		return fail(err)
	}
	n := 2
	if r.storeDir() == "" {
		// A remote PUT waits on the network and the server, not on this
		// host's disk: more packs in flight keep the pipeline full.
		n = 6
	}
	r.finq = make(chan *packWriter, n)
	for range n {
		r.finWG.Add(1)
		go r.finalizer()
	}
	return r, nil
}

func logger(opts OpenOptions) *slog.Logger {
	if opts.Logger != nil {
		return opts.Logger
	}
	return slog.Default()
}

// removeTemp deletes temp files left by a crash (no session can be open:
// we hold the repository lock).
func (r *Repository) removeTemp() error {
	if err := r.store.Clean(context.Background()); err != nil {
		return fmt.Errorf("remove temp files: %w", err)
	}
	if r.dir != r.storeDir() { // the catalog's own directory (remote backends)
		if err := storage.NewLocal(r.dir, true).Clean(context.Background()); err != nil {
			return fmt.Errorf("remove temp files: %w", err)
		}
	}
	return nil
}

// Close flushes open packs and releases the repository. Sessions must have
// been committed or aborted.
func (r *Repository) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.inflight.Wait()
	r.readers.Wait() // nothing may decode with the codec Close is about to free
	r.maintMu.Lock() // let a running Reclaim/Recatalog finish
	defer r.maintMu.Unlock()
	r.mu.Lock()
	open := make([]*packWriter, 0, len(r.openPacks))
	for _, pw := range r.openPacks {
		open = append(open, pw)
	}
	r.mu.Unlock()
	var errs []error
	for _, pw := range open {
		r.sealPack(pw)
	}
	for _, pw := range open {
		<-pw.done
		if pw.err != nil {
			errs = append(errs, pw.err)
		}
	}
	close(r.finq)
	r.finWG.Wait()
	if r.mw != nil {
		if err := r.mwPublish(context.Background(), nil); err != nil {
			errs = append(errs, err)
		}
		if err := r.mwStop(); err != nil {
			errs = append(errs, err)
		}
	}
	r.files.closeAll()
	r.codec.close()
	if err := r.db.Close(); err != nil {
		errs = append(errs, err)
	}
	if r.lease != nil {
		if err := r.lease(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := releaseRepoLock(r.lockFile); err != nil {
		errs = append(errs, err)
	}
	if err := r.store.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// enter registers a read-side call that Close must wait for; after Close
// has begun it returns ErrClosed. Adds happen under r.mu while !closed, so
// none races with Close's Wait.
func (r *Repository) enter() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.readers.Add(1)
	return nil
}

func (r *Repository) leave() { r.readers.Done() }

// Config returns the repository configuration.
func (r *Repository) Config() Config { return r.cfg }

// Dir returns the local directory of the catalog: the repository directory
// for a local repository, its cache directory for a remote one.
func (r *Repository) Dir() string { return r.dir }

// lookup returns a blob's catalog entry.
func (r *Repository) lookup(id ID) (loc blobLoc, ok bool, err error) {
	err = r.db.View(func(tx *bolt.Tx) error {
		loc, ok = lookupTx(tx, id)
		return nil
	})
	return loc, ok, err
}

// LoadBlob returns a blob's verified plaintext.
func (r *Repository) LoadBlob(ctx context.Context, id ID) ([]byte, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.loadBlob(ctx, id, nil)
}

func (r *Repository) loadBlob(ctx context.Context, id ID, dst []byte) ([]byte, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		loc, ok, err := r.lookup(id)
		if err != nil {
			return nil, err
		}
		if !ok {
			// A blob written moments ago may still sit in an open pack.
			r.mu.Lock()
			pb := r.pending[id]
			r.mu.Unlock()
			if pb == nil {
				return nil, fmt.Errorf("blob %s: %w", id, ErrNotFound)
			}
			if err := r.waitPending(ctx, pb); err != nil {
				return nil, err
			}
			continue
		}
		buf := make([]byte, loc.StoredLen)
		if err := r.readPackAt(loc.Pack, buf, int64(loc.Offset)); err != nil {
			// Reclaim may have moved the blob and deleted the pack: retry the lookup.
			lastErr = &CorruptBlobError{Blob: id, Pack: loc.Pack.String(), Err: err}
			r.files.forget(loc.Pack)
			if r.opts.ReadOnly && storage.IsNotExist(err) && !refreshed(ctx) {
				// The owner's reclaim, which this catalog knows nothing of:
				// learn where the blob went (once; Refresh's own reads
				// carry the mark, so it never recurses).
				ctx = context.WithValue(ctx, refreshedKey{}, true)
				if rerr := r.refreshAfterMissingPack(ctx); rerr != nil {
					return nil, rerr
				}
			}
			continue
		}
		out, err := r.codec.decode(dst, loc.entry(id), buf)
		if err != nil {
			return nil, &CorruptBlobError{Blob: id, Pack: loc.Pack.String(), Err: err}
		}
		return out, nil
	}
	return nil, lastErr
}

// waitPending flushes the pack holding pb and waits until it is indexed.
func (r *Repository) waitPending(ctx context.Context, pb *pendingBlob) error {
	select {
	case <-pb.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if pb.err != nil {
		return pb.err
	}
	r.sealPack(pb.pw)
	select {
	case <-pb.pw.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return pb.pw.err
}

// listPackFiles returns the pack ids found under packs/.
func (r *Repository) listPackFiles() (map[packID]int64, error) {
	out := map[packID]int64{}
	err := r.store.List(context.Background(), "packs/", func(name string, size int64) error {
		parts := strings.Split(name, "/")
		if len(parts) != 3 || len(parts[1]) != 2 {
			return nil
		}
		id, err := parsePackID(parts[2])
		if err != nil || !strings.HasPrefix(parts[2], parts[1]) {
			return nil
		}
		out[id] = size
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func defaultWorkers() int {
	n := runtime.GOMAXPROCS(0)
	if n < 2 {
		n = 2
	}
	return n
}
