package repository

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/repository/storage"
)

// Several writers into one repository (FORMAT.md §12a, format 2.0): one
// lease per writer (writers/<id>) listing its sessions, an index log of
// new and deleted packs (index/<seq>) that every writer catches up on, a
// reclaim lock and the condemned set of a reclaim in progress.

// Multi-writer timing (FORMAT.md §12a). Variables so tests can shorten them.
var (
	// WriterLeaseTTL is how long a writer lease lives without renewal.
	WriterLeaseTTL = 2 * time.Minute
	// SkewMargin is the clock difference between appliances the protocol
	// tolerates.
	SkewMargin = 30 * time.Second
	// catchUpEvery bounds how often a session catches up on the index log
	// while it stores blobs.
	catchUpEvery = 500 * time.Millisecond
	// barrierPoll is how often the reclaim barrier re-reads the leases.
	barrierPoll = 100 * time.Millisecond
)

// ErrLeaseLost: a writer's lease was not renewed in time; it must not
// commit (another appliance may consider it dead).
var ErrLeaseLost = errors.New("writer lease lost")

// ErrReclaimRunning: another writer holds the reclaim lock.
var ErrReclaimRunning = errors.New("a reclaim is running on another writer")

const (
	writersPrefix = "writers/"
	indexPrefix   = "index/"
	reclaimLock   = "locks/reclaim"
	condemnedName = "reclaim/condemned"
	maxMWObject   = 1 << 20
)

// PointWriter names the writer of a restore point (manifest "writer", v2.0).
type PointWriter struct {
	ID        string `json:"id"`
	Appliance string `json:"appliance"`
}

// writerLease is writers/<id>.
type writerLease struct {
	Writer    string         `json:"writer"`
	Appliance string         `json:"appliance"`
	Host      string         `json:"host"`
	PID       int            `json:"pid"`
	Started   time.Time      `json:"started"`
	Renewed   time.Time      `json:"renewed"`
	Expires   time.Time      `json:"expires"`
	Sessions  []leaseSession `json:"sessions"`
}

type leaseSession struct {
	ID      string    `json:"id"`
	Started time.Time `json:"started"`
}

// indexEntry is index/<seq>.
type indexEntry struct {
	Writer  string      `json:"writer"`
	Packs   []indexPack `json:"packs,omitempty"`
	Deleted []string    `json:"deleted,omitempty"`
	// Reindex names packs holding the copy a reclaim kept of blobs that
	// also had a copy in a deleted pack: a reader whose catalog used the
	// deleted copy re-reads their headers.
	Reindex []string `json:"reindex,omitempty"`
}

type indexPack struct {
	ID   string `json:"id"`
	Size int64  `json:"size"`
}

// condemnedSet is reclaim/condemned.
type condemnedSet struct {
	Generation string   `json:"generation"`
	Writer     string   `json:"writer"`
	Packs      []string `json:"packs"`
}

// reclaimLockObj is locks/reclaim.
type reclaimLockObj struct {
	Writer  string    `json:"writer"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Expires time.Time `json:"expires"`
}

// multiWriter is the state of one writer of a 2.0 repository.
type multiWriter struct {
	id, appliance, host string

	leaseMu   sync.Mutex // guards lease, renewedAt; held across the lease PUT
	lease     writerLease
	renewedAt time.Time

	logMu sync.Mutex // one catch-up or publish at a time; guards seq
	seq   uint64

	pubMu       sync.Mutex // guards unpublished
	unpublished []indexPack

	lastCatch sync.Mutex // guards caughtAt
	caughtAt  time.Time

	// condemned packs of another writer's reclaim (guarded by r.mu) and
	// the generation they came from (guarded by logMu).
	condemned map[packID]struct{}
	condGen   string

	stop chan struct{}
	wg   sync.WaitGroup
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func seqName(seq uint64) string { return fmt.Sprintf("%s%020d", indexPrefix, seq) }

func (r *Repository) exclusive() (storage.Exclusive, error) {
	ex, ok := storage.As[storage.Exclusive](r.store)
	if !ok {
		return nil, fmt.Errorf("backend %s cannot create objects exclusively (needed by several writers)", r.store.Location())
	}
	return ex, nil
}

// readSmall reads a small JSON object of the protocol.
func (r *Repository) readSmall(ctx context.Context, name string, v any) error {
	b, err := storage.ReadAll(ctx, r.store, name)
	if err != nil {
		return err
	}
	if len(b) > maxMWObject {
		return fmt.Errorf("%s: %d bytes, more than %d", name, len(b), maxMWObject)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return formatErr(name, "%v", err)
	}
	return nil
}

// mwStart registers this process as a writer: the lease, the last log
// sequence (before the catalog reconciles, so nothing published meanwhile
// is missed), and the renewal goroutine.
func (r *Repository) mwStart(ctx context.Context) error {
	ex, err := r.exclusive()
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	app := r.opts.Appliance
	if app == "" {
		app = host
	}
	mw := &multiWriter{id: randomHex(16), appliance: app, host: host, condemned: map[packID]struct{}{}, stop: make(chan struct{})}
	now := r.now().UTC()
	mw.lease = writerLease{Writer: mw.id, Appliance: app, Host: host, PID: os.Getpid(), Started: now, Renewed: now, Expires: now.Add(WriterLeaseTTL), Sessions: []leaseSession{}}
	b, _ := json.Marshal(mw.lease)
	if err := ex.PutExclusive(ctx, writersPrefix+mw.id, b); err != nil {
		return fmt.Errorf("writer lease: %w", err)
	}
	mw.renewedAt = now
	// The log's last entry: one listing at Open.
	if err := r.store.List(ctx, indexPrefix, func(name string, _ int64) error {
		if n, err := strconv.ParseUint(strings.TrimPrefix(name, indexPrefix), 10, 64); err == nil && n > mw.seq {
			mw.seq = n
		}
		return nil
	}); err != nil {
		r.store.Delete(context.Background(), writersPrefix+mw.id)
		return fmt.Errorf("list index log: %w", err)
	}
	r.mw = mw
	mw.wg.Add(1)
	go func() { // renews the lease; owned by mwStop
		defer mw.wg.Done()
		t := time.NewTicker(WriterLeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-mw.stop:
				return
			case <-t.C:
				if err := r.mwPutLease(context.Background(), nil); err != nil {
					r.warn(fmt.Sprintf("renew writer lease %s: %v", mw.id, err))
				}
			}
		}
	}()
	return nil
}

// mwStop ends the renewal and deletes the lease.
func (r *Repository) mwStop() error {
	mw := r.mw
	if mw == nil {
		return nil
	}
	close(mw.stop)
	mw.wg.Wait()
	return r.store.Delete(context.Background(), writersPrefix+mw.id)
}

// mwPutLease rewrites the lease (renewal), after edit changes it.
func (r *Repository) mwPutLease(ctx context.Context, edit func(*writerLease)) error {
	mw := r.mw
	mw.leaseMu.Lock()
	defer mw.leaseMu.Unlock()
	if edit != nil {
		edit(&mw.lease)
	}
	if err := failpoint.Hit("mw.lease"); err != nil {
		return err
	}
	now := r.now().UTC()
	mw.lease.Renewed, mw.lease.Expires = now, now.Add(WriterLeaseTTL)
	b, _ := json.Marshal(mw.lease)
	if err := storage.PutBytes(ctx, r.store, writersPrefix+mw.id, b, storage.Steps{}); err != nil {
		return err
	}
	mw.renewedAt = now
	return nil
}

// mwLeaseValid fails when the last renewal is too old to commit on
// (FORMAT.md §12a: LeaseTTL - SkewMargin), after one renewal attempt.
func (r *Repository) mwLeaseValid(ctx context.Context) error {
	mw := r.mw
	mw.leaseMu.Lock()
	at := mw.renewedAt
	mw.leaseMu.Unlock()
	if r.now().Sub(at) < WriterLeaseTTL-SkewMargin {
		return nil
	}
	if err := r.mwPutLease(ctx, nil); err != nil {
		return fmt.Errorf("%w: renew: %w", ErrLeaseLost, err)
	}
	return nil
}

// mwSessionStart lists s in the lease (before it looks up any blob), then
// reads the condemned set and catches up on the log.
func (r *Repository) mwSessionStart(ctx context.Context, s *Session) error {
	s.mwID = randomHex(8)
	if err := r.mwPutLease(ctx, func(l *writerLease) {
		l.Sessions = append(l.Sessions, leaseSession{ID: s.mwID, Started: s.started.UTC()})
	}); err != nil {
		return fmt.Errorf("register session in writer lease: %w", err)
	}
	return r.mwSync(ctx)
}

// mwSessionEnd removes s from the lease.
func (r *Repository) mwSessionEnd(s *Session) {
	if r.mw == nil || s.mwID == "" {
		return
	}
	id := s.mwID
	s.mwID = ""
	if err := r.mwPutLease(context.Background(), func(l *writerLease) {
		l.Sessions = slicesDeleteFunc(l.Sessions, func(x leaseSession) bool { return x.ID == id })
	}); err != nil {
		r.warn(fmt.Sprintf("writer lease %s: remove session: %v (the lease expires by itself)", r.mw.id, err))
	}
}

func slicesDeleteFunc(s []leaseSession, del func(leaseSession) bool) []leaseSession {
	out := s[:0]
	for _, x := range s {
		if !del(x) {
			out = append(out, x)
		}
	}
	return out
}

// mwSync reads the condemned set and catches up on the log. Packs newly
// condemned are honoured at once; those of a finished reclaim return to
// live only after the catch-up, which forgets the ones it deleted (the
// reclaimer publishes its deletions before it removes the set).
func (r *Repository) mwSync(ctx context.Context) error {
	revert, err := r.mwReadCondemned(ctx)
	if err != nil {
		return err
	}
	if err := r.mwCatchUp(ctx); err != nil {
		return err
	}
	return revert()
}

// mwMaybeCatchUp catches up when the last catch-up is older than
// catchUpEvery (a session storing a blob it does not know).
func (r *Repository) mwMaybeCatchUp(ctx context.Context) {
	mw := r.mw
	mw.lastCatch.Lock()
	due := time.Since(mw.caughtAt) >= catchUpEvery
	if due {
		mw.caughtAt = time.Now()
	}
	mw.lastCatch.Unlock()
	if due {
		if err := r.mwCatchUp(ctx); err != nil {
			r.warn(fmt.Sprintf("catch up on the index log: %v", err))
		}
	}
}

// mwCatchUp reads index/<seq+1>, <seq+2>, … until one is missing.
func (r *Repository) mwCatchUp(ctx context.Context) error {
	mw := r.mw
	mw.logMu.Lock()
	defer mw.logMu.Unlock()
	for {
		var e indexEntry
		err := r.readSmall(ctx, seqName(mw.seq+1), &e)
		if storage.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("index log: %w", err)
		}
		if err := r.mwApply(ctx, e); err != nil {
			return fmt.Errorf("index log %s: %w", seqName(mw.seq+1), err)
		}
		mw.seq++
	}
}

// mwApply indexes the packs of a log entry the catalog lacks (from their
// headers) and forgets the deleted ones.
func (r *Repository) mwApply(ctx context.Context, e indexEntry) error {
	if e.Writer == r.mw.id {
		return nil
	}
	for _, p := range e.Packs {
		id, err := parsePackID(p.ID)
		if err != nil {
			continue
		}
		var known bool
		if err := r.db.View(func(tx *bolt.Tx) error {
			known = tx.Bucket(bucketPacks).Get(id[:]) != nil
			return nil
		}); err != nil {
			return err
		}
		if known {
			continue
		}
		entries, size, err := r.readPackHeader(id)
		if storage.IsNotExist(err) {
			continue // reclaimed since: a later entry says so
		}
		if err != nil {
			r.warn(fmt.Sprintf("pack %s of writer %s: %v (not indexed; check reports it)", id, e.Writer, err))
			continue
		}
		if err := r.db.Update(func(tx *bolt.Tx) error { return indexPackTx(tx, id, uint64(size), entries) }); err != nil {
			return err
		}
	}
	if len(e.Deleted) > 0 {
		gone := map[packID]bool{}
		for _, s := range e.Deleted {
			if id, err := parsePackID(s); err == nil {
				gone[id] = true
				r.files.forget(id)
			}
		}
		if err := r.db.Update(func(tx *bolt.Tx) error { return dropPacksTx(tx, gone) }); err != nil {
			return err
		}
		if err := r.reindexShortPacks(ctx); err != nil {
			return err
		}
	}
	for _, p := range e.Reindex {
		id, err := parsePackID(p)
		if err != nil {
			continue
		}
		entries, size, err := r.readPackHeader(id)
		if err != nil {
			continue
		}
		if err := r.db.Update(func(tx *bolt.Tx) error { return indexPackTx(tx, id, uint64(size), entries) }); err != nil {
			return err
		}
	}
	return nil
}

// dropPacksTx removes packs and the blob entries that point into them.
func dropPacksTx(tx *bolt.Tx, gone map[packID]bool) error {
	packs, blobs := tx.Bucket(bucketPacks), tx.Bucket(bucketBlobs)
	for id := range gone {
		if err := packs.Delete(id[:]); err != nil {
			return err
		}
	}
	var del [][]byte
	if err := blobs.ForEach(func(k, v []byte) error {
		if l, err := decodeBlobLoc(v); err == nil && gone[l.Pack] {
			del = append(del, append([]byte(nil), k...))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range del {
		if err := blobs.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// mwNotePack records a pack this writer made durable and indexed (called
// by finalize before the pack is done, so a commit that flushed it finds
// it here).
func (r *Repository) mwNotePack(id packID, size int64) {
	mw := r.mw
	mw.pubMu.Lock()
	mw.unpublished = append(mw.unpublished, indexPack{ID: id.String(), Size: size})
	mw.pubMu.Unlock()
}

// mwPublish appends the unpublished packs (and deleted ones) to the log:
// exclusive create of index/<seq+1>, reading and applying what others
// published first.
func (r *Repository) mwPublish(ctx context.Context, deleted []string) error {
	if len(deleted) > 0 {
		return r.mwPublishReclaim(ctx, deleted, nil)
	}
	mw := r.mw
	ex, err := r.exclusive()
	if err != nil {
		return err
	}
	mw.logMu.Lock()
	defer mw.logMu.Unlock()
	mw.pubMu.Lock()
	packs := mw.unpublished
	mw.unpublished = nil
	mw.pubMu.Unlock()
	if len(packs) == 0 && len(deleted) == 0 {
		return nil
	}
	b, _ := json.Marshal(indexEntry{Writer: mw.id, Packs: packs, Deleted: deleted})
	if err := failpoint.Hit("mw.publish"); err != nil {
		mw.pubMu.Lock()
		mw.unpublished = append(packs, mw.unpublished...)
		mw.pubMu.Unlock()
		return fmt.Errorf("publish to index log: %w", err)
	}
	for {
		err := ex.PutExclusive(ctx, seqName(mw.seq+1), b)
		if err == nil {
			mw.seq++
			return nil
		}
		if !errors.Is(err, storage.ErrExists) {
			mw.pubMu.Lock()
			mw.unpublished = append(packs, mw.unpublished...)
			mw.pubMu.Unlock()
			return fmt.Errorf("publish to index log: %w", err)
		}
		var e indexEntry
		if err := r.readSmall(ctx, seqName(mw.seq+1), &e); err != nil {
			return fmt.Errorf("index log: %w", err)
		}
		if err := r.mwApply(ctx, e); err != nil {
			return err
		}
		mw.seq++
	}
}

// mwReadCondemned loads reclaim/condemned: its packs are marked condemned
// in the catalog (no dedup against them; a fresh copy supersedes their
// blobs). The returned func returns those of an earlier set that are no
// longer condemned to live; call it after catching up.
func (r *Repository) mwReadCondemned(ctx context.Context) (func() error, error) {
	mw := r.mw
	noop := func() error { return nil }
	var cs condemnedSet
	err := r.readSmall(ctx, condemnedName, &cs)
	if err != nil && !storage.IsNotExist(err) {
		return nil, fmt.Errorf("condemned set: %w", err)
	}
	if cs.Writer == mw.id {
		return noop, nil // our own reclaim: r.condemned already says it
	}
	mw.logMu.Lock()
	defer mw.logMu.Unlock()
	if cs.Generation == mw.condGen {
		return noop, nil
	}
	next := map[packID]struct{}{}
	for _, s := range cs.Packs {
		if id, err := parsePackID(s); err == nil {
			next[id] = struct{}{}
		}
	}
	r.mu.Lock()
	prev := mw.condemned
	union := make(map[packID]struct{}, len(prev)+len(next))
	for id := range prev {
		union[id] = struct{}{}
	}
	for id := range next {
		union[id] = struct{}{}
	}
	mw.condemned = union
	r.mu.Unlock()
	mw.condGen = cs.Generation
	if err := r.setPackStates(next, blobStateCondemned); err != nil {
		return nil, err
	}
	return func() error {
		old := map[packID]struct{}{}
		r.mu.Lock()
		for id := range prev {
			if _, still := next[id]; !still {
				old[id] = struct{}{}
				delete(mw.condemned, id)
			}
		}
		r.mu.Unlock()
		return r.setPackStates(old, blobStateLive)
	}, nil
}

// setPackStates sets the catalog state of the packs it knows.
func (r *Repository) setPackStates(ids map[packID]struct{}, st uint8) error {
	if len(ids) == 0 {
		return nil
	}
	return r.db.Update(func(tx *bolt.Tx) error {
		packs := tx.Bucket(bucketPacks)
		for id := range ids {
			v := packs.Get(id[:])
			if v == nil {
				continue
			}
			pi, err := decodePackInfo(v)
			if err != nil {
				continue
			}
			pi.State = st
			if err := packs.Put(id[:], encodePackInfo(pi)); err != nil {
				return err
			}
		}
		return nil
	})
}

// mwCondemnedPack reports whether another writer's reclaim condemned the
// pack. The caller holds r.mu.
func (r *Repository) mwCondemnedPack(id packID) bool {
	if r.mw == nil {
		return false
	}
	_, ok := r.mw.condemned[id]
	return ok
}

// mwBeforeCommit makes a session's references safe against a reclaim of
// another writer: it re-reads the condemned set and the log, stores again
// every referenced blob whose pack is condemned, and publishes the
// session's packs.
func (s *Session) mwBeforeCommit(ctx context.Context) error {
	r := s.r
	if err := r.mwSync(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	var redo []ID
	seen := map[ID]bool{}
	err := r.db.View(func(tx *bolt.Tx) error {
		for _, id := range s.used {
			if seen[id] {
				continue
			}
			seen[id] = true
			if _, pend := r.pending[id]; pend {
				continue
			}
			if loc, ok := lookupTx(tx, id); ok && r.mwCondemnedPack(loc.Pack) {
				redo = append(redo, id)
			}
		}
		return nil
	})
	r.mu.Unlock()
	if err != nil {
		return err
	}
	for _, id := range redo {
		if err := s.rescue(ctx, id); err != nil {
			return fmt.Errorf("store again blob %s of a condemned pack: %w", id, err)
		}
	}
	if len(redo) > 0 {
		if err := s.flush(ctx); err != nil {
			return err
		}
	}
	if err := r.mwPublish(ctx, nil); err != nil {
		return err
	}
	return r.mwLeaseValid(ctx)
}

// mwRefreshPoints brings the catalog's points up to date with every
// writer's commit records (new ones added, deleted ones dropped).
func (r *Repository) mwRefreshPoints(ctx context.Context) error {
	recs, err := r.listRecords() // records before the log: their packs were published first
	if err != nil {
		return err
	}
	if err := r.mwCatchUp(ctx); err != nil {
		return err
	}
	files := map[ID]bool{}
	for _, id := range recs {
		files[id] = true
	}
	inCat := map[ID]bool{}
	if err := r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPoints).ForEach(func(k, _ []byte) error {
			inCat[ID(k)] = true
			return nil
		})
	}); err != nil {
		return err
	}
	var add []Point
	for id := range files {
		if inCat[id] {
			continue
		}
		p, err := r.loadPointFromFiles(ctx, id)
		if err != nil {
			continue // its packs are not published yet: next time
		}
		add = append(add, p)
	}
	return r.db.Update(func(tx *bolt.Tx) error {
		for _, p := range add {
			if err := putPointTx(tx, p); err != nil {
				return err
			}
		}
		for id := range inCat {
			if !files[id] {
				if err := tx.Bucket(bucketPoints).Delete(id[:]); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// leaseGone reports whether a lease's holder may be ignored: expired
// beyond the skew margin, or a process of this host that no longer runs.
func leaseGone(now time.Time, expires time.Time, host string, pid int) bool {
	if now.After(expires.Add(SkewMargin)) {
		return true
	}
	me, _ := os.Hostname()
	if host != "" && host == me && pid > 0 && pid != os.Getpid() {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	return false
}

// mwReclaimLock takes locks/reclaim (exclusive create; an expired or dead
// holder's lock is taken over). release deletes it.
func (r *Repository) mwReclaimLock(ctx context.Context) (release func(), err error) {
	ex, err := r.exclusive()
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	obj := reclaimLockObj{Writer: r.mw.id, Host: host, PID: os.Getpid(), Expires: r.now().UTC().Add(WriterLeaseTTL)}
	b, _ := json.Marshal(obj)
	for attempt := 0; ; attempt++ {
		err := ex.PutExclusive(ctx, reclaimLock, b)
		if err == nil {
			break
		}
		if !errors.Is(err, storage.ErrExists) {
			return nil, fmt.Errorf("reclaim lock: %w", err)
		}
		var cur reclaimLockObj
		rerr := r.readSmall(ctx, reclaimLock, &cur)
		if storage.IsNotExist(rerr) && attempt < 3 {
			continue
		}
		if rerr == nil && attempt < 3 && leaseGone(r.now(), cur.Expires, cur.Host, cur.PID) {
			if err := r.store.Delete(ctx, reclaimLock); err != nil {
				return nil, fmt.Errorf("reclaim lock: take over: %w", err)
			}
			continue
		}
		return nil, fmt.Errorf("%w (writer %s, pid %d on %s)", ErrReclaimRunning, cur.Writer, cur.PID, cur.Host)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // renews the lock like a lease; owned by release
		defer wg.Done()
		t := time.NewTicker(WriterLeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				obj.Expires = r.now().UTC().Add(WriterLeaseTTL)
				b, _ := json.Marshal(obj)
				if err := storage.PutBytes(context.Background(), r.store, reclaimLock, b, storage.Steps{}); err != nil {
					r.warn(fmt.Sprintf("renew reclaim lock: %v", err))
				}
			}
		}
	}()
	return func() {
		close(stop)
		wg.Wait()
		r.store.Delete(context.Background(), reclaimLock)
	}, nil
}

// mwWriteCondemned publishes the condemned set of this reclaim.
func (r *Repository) mwWriteCondemned(ctx context.Context, packs []packID) (string, error) {
	gen := r.now().UTC().Format("20060102T150405") + "-" + randomHex(4)
	cs := condemnedSet{Generation: gen, Writer: r.mw.id, Packs: make([]string, 0, len(packs))}
	for _, p := range packs {
		cs.Packs = append(cs.Packs, p.String())
	}
	sort.Strings(cs.Packs)
	b, _ := json.Marshal(cs)
	if err := storage.PutBytes(ctx, r.store, condemnedName, b, storage.Steps{}); err != nil {
		return "", fmt.Errorf("condemned set: %w", err)
	}
	return gen, nil
}

// mwBarrier waits until every session listed now in another writer's live
// lease has ended (FORMAT.md §12a step 5). Leases of dead or expired
// writers are deleted.
func (r *Repository) mwBarrier(ctx context.Context, phase func(string, int64, int64)) error {
	type key struct{ writer, session string }
	var wait map[key]bool
	for {
		now := map[key]bool{}
		err := r.store.List(ctx, writersPrefix, func(name string, _ int64) error {
			wid := strings.TrimPrefix(name, writersPrefix)
			if wid == r.mw.id {
				return nil
			}
			var l writerLease
			if err := r.readSmall(ctx, name, &l); err != nil {
				if storage.IsNotExist(err) {
					return nil
				}
				return err
			}
			if leaseGone(r.now(), l.Expires, l.Host, l.PID) {
				r.store.Delete(ctx, name)
				return nil
			}
			for _, s := range l.Sessions {
				now[key{wid, s.ID}] = true
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("reclaim: barrier: %w", err)
		}
		if wait == nil {
			wait = now
		}
		left := 0
		for k := range wait {
			if now[k] {
				left++
			} else {
				delete(wait, k)
			}
		}
		if left == 0 {
			return nil
		}
		phase("wait for other writers' backups", 0, int64(left))
		t := time.NewTimer(barrierPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("reclaim: waiting for other writers' backups: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// MultiWriter reports whether the repository admits several writers
// (format 2.0).
func (r *Repository) MultiWriter() bool { return r.mw != nil }

// WriterID returns this process's writer id ("" for a single-writer
// repository).
func (r *Repository) WriterID() string {
	if r.mw == nil {
		return ""
	}
	return r.mw.id
}

// Appliance returns the appliance name this writer records in its points.
func (r *Repository) Appliance() string {
	if r.mw == nil {
		return ""
	}
	return r.mw.appliance
}

// mwReclaim carries a reclaim's multi-writer steps (FORMAT.md §12a).
type mwReclaim struct {
	r       *Repository
	unlock  func()
	marked  map[ID]bool // records listed before the mark
	reindex map[packID]bool
	wrote   bool // reclaim/condemned written
}

// mwReclaimBegin takes the reclaim lock, catches up and reconciles the
// catalog with the listings (every writer's packs, in flight or not).
func (r *Repository) mwReclaimBegin(ctx context.Context) (*mwReclaim, error) {
	unlock, err := r.mwReclaimLock(ctx)
	if err != nil {
		return nil, err
	}
	m := &mwReclaim{r: r, unlock: unlock, marked: map[ID]bool{}, reindex: map[packID]bool{}}
	fail := func(err error) (*mwReclaim, error) { unlock(); return nil, err }
	if err := r.mwCatchUp(ctx); err != nil {
		return fail(err)
	}
	recs, err := r.listRecords()
	if err != nil {
		return fail(err)
	}
	for _, id := range recs {
		m.marked[id] = true
	}
	if err := catalogGuard(func() error { return r.reconcile(ctx, nil) }); err != nil {
		return fail(err)
	}
	return m, nil
}

func (m *mwReclaim) release() { m.unlock() }

// condemn publishes the condemned set before anything is deleted.
func (m *mwReclaim) condemn(ctx context.Context, pl *ReclaimPlan) error {
	pl.orphans = nil
	ids := make([]packID, 0, len(pl.packs))
	for _, pp := range pl.packs {
		ids = append(ids, pp.id)
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := m.r.mwWriteCondemned(ctx, ids); err != nil {
		return err
	}
	m.wrote = true
	if err := failpoint.Hit("mw.condemned"); err != nil {
		return err
	}
	return nil
}

// remark reads the points committed since the mark (sessions the barrier
// waited for) and keeps every condemned pack holding a blob one of them
// references; it also notes which surviving packs hold the kept copy of a
// blob duplicated in a pack about to go.
func (m *mwReclaim) remark(ctx context.Context, pl *ReclaimPlan, keep map[packID]bool) error {
	r := m.r
	if len(pl.packs) == 0 {
		return nil
	}
	// Two writers taking over one stale lock at once: the later create
	// wins and the other stops here, before it deletes anything.
	var cur reclaimLockObj
	if err := r.readSmall(ctx, reclaimLock, &cur); err != nil || cur.Writer != r.mw.id {
		return fmt.Errorf("%w: the reclaim lock is no longer ours (%v, held by %q)", ErrReclaimRunning, err, cur.Writer)
	}
	// Records before the log: a record's packs were published before it.
	recs, err := r.listRecords()
	if err != nil {
		return err
	}
	if err := r.mwCatchUp(ctx); err != nil {
		return err
	}
	fresh := false
	for _, id := range recs {
		if !m.marked[id] {
			fresh = true
			break
		}
	}
	if fresh {
		live := newLiveSet(0)
		if err := r.markPoints(ctx, live, nil); err != nil {
			return err
		}
		for _, pp := range pl.packs {
			for _, id := range pp.dead {
				// Live again, and not stored afresh elsewhere (the
				// writer's commit re-stores what it took from a
				// condemned pack; the catch-up above indexed that copy).
				if loc, ok, err := r.lookup(id); live.has(id) && (err != nil || !ok || loc.Pack == pp.id) {
					keep[pp.id] = true
					break
				}
			}
		}
	}
	for _, pp := range pl.packs {
		if keep[pp.id] || int(pp.info.Count) <= len(pp.live)+len(pp.dead) {
			continue
		}
		entries, _, err := r.readPackHeader(pp.id)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if loc, ok, err := r.lookup(e.ID); err == nil && ok && loc.Pack != pp.id {
				m.reindex[loc.Pack] = true
			}
		}
	}
	return nil
}

// survivors returns the reindex packs that were not deleted.
func (m *mwReclaim) survivors(pl *ReclaimPlan, gone map[packID]bool) []string {
	var out []string
	for id := range m.reindex {
		if !gone[id] {
			out = append(out, id.String())
		}
	}
	sort.Strings(out)
	return out
}

// finish publishes the deletions, then drops the condemned set.
func (m *mwReclaim) finish(ctx context.Context, gone map[packID]bool, reindex []string) error {
	r := m.r
	if err := failpoint.Hit("mw.finish"); err != nil {
		return err
	}
	if len(gone) > 0 {
		del := make([]string, 0, len(gone))
		for id := range gone {
			del = append(del, id.String())
		}
		sort.Strings(del)
		if err := r.mwPublishReclaim(ctx, del, reindex); err != nil {
			return err
		}
	}
	if m.wrote {
		return r.store.Delete(ctx, condemnedName)
	}
	return nil
}

// mwPublishReclaim is mwPublish for a reclaim's deletions.
func (r *Repository) mwPublishReclaim(ctx context.Context, deleted, reindex []string) error {
	mw := r.mw
	ex, err := r.exclusive()
	if err != nil {
		return err
	}
	mw.logMu.Lock()
	defer mw.logMu.Unlock()
	b, _ := json.Marshal(indexEntry{Writer: mw.id, Deleted: deleted, Reindex: reindex})
	for {
		err := ex.PutExclusive(ctx, seqName(mw.seq+1), b)
		if err == nil {
			mw.seq++
			return nil
		}
		if !errors.Is(err, storage.ErrExists) {
			return fmt.Errorf("publish deletions to index log: %w", err)
		}
		var e indexEntry
		if err := r.readSmall(ctx, seqName(mw.seq+1), &e); err != nil {
			return fmt.Errorf("index log: %w", err)
		}
		if err := r.mwApply(ctx, e); err != nil {
			return err
		}
		mw.seq++
	}
}

// reindexShortPacks re-reads the headers of the packs that hold more blobs
// than the catalog places in them: copies of blobs stored twice (two
// writers racing), skipped when indexed because another copy was known.
// After that other copy's pack was deleted the catalog lacks the blob,
// although the pack it still knows holds it. Called after packs were
// dropped (a reclaim by another writer).
func (r *Repository) reindexShortPacks(ctx context.Context) error {
	var short []packID
	if err := r.db.View(func(tx *bolt.Tx) error {
		n := map[packID]uint32{}
		if err := tx.Bucket(bucketBlobs).ForEach(func(_, v []byte) error {
			if l, err := decodeBlobLoc(v); err == nil {
				n[l.Pack]++
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
			if pi, err := decodePackInfo(v); err == nil && len(k) == len(packID{}) && n[packID(k)] < pi.Count {
				short = append(short, packID(k))
			}
			return nil
		})
	}); err != nil {
		return err
	}
	for _, id := range short {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, size, err := r.readPackHeader(id)
		if err != nil {
			continue // gone or damaged: check's business
		}
		if err := r.db.Update(func(tx *bolt.Tx) error { return indexPackTx(tx, id, uint64(size), entries) }); err != nil {
			return err
		}
	}
	return nil
}
