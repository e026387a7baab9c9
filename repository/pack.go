package repository

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/repository/storage"
	bolt "go.etcd.io/bbolt"
)

// packWriter is an open pack being filled. Blobs are streamed to a temp file
// as they arrive; only the header entries stay in memory.
type packWriter struct {
	id   packID
	name string // storage name

	mu      sync.Mutex // guards everything below
	f       storage.Staged
	w       *bufio.Writer // small blobs are gathered into few write calls; flushed by writePackTail
	size    int64
	entries []packEntry
	pbs     []*pendingBlob
	sealed  bool
	werr    error

	done chan struct{} // closed when finalised and indexed (or failed)
	err  error         // final result, valid after done
}

// packWriteBuffer gathers appended blobs: an incremental of scattered 4 KiB
// changes appends thousands of small blobs, one write call each without it.
// Nothing reads a pack before its tail is written (readers of a pending blob
// wait until the pack is indexed), and the tail flushes the buffer.
const packWriteBuffer = 256 << 10

// packName is the storage name of a pack.
func packName(id packID) string {
	s := id.String()
	return "packs/" + s[:2] + "/" + s
}

// packPath names a pack in messages (for a local repository, its path).
func (r *Repository) packPath(id packID) string { return r.objectPath(packName(id)) }

func (r *Repository) newPackWriter() (*packWriter, error) {
	var id packID
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	pw := &packWriter{id: id, name: packName(id), done: make(chan struct{})}
	if err := failpoint.Hit("pack.create"); err != nil {
		return nil, r.diskFull(fmt.Errorf("create pack: %w", err))
	}
	f, err := r.store.Create(context.Background(), pw.name)
	if err != nil {
		return nil, r.diskFull(fmt.Errorf("create pack: %w", err))
	}
	if _, err := f.Write(magicPack[:]); err != nil {
		f.Abort()
		return nil, r.diskFull(fmt.Errorf("write pack %s: %w", id, err))
	}
	pw.f, pw.size = f, packStart
	pw.w = bufio.NewWriterSize(f, packWriteBuffer)
	r.mu.Lock()
	r.openPacks[id] = pw
	r.mu.Unlock()
	return pw, nil
}

// acquirePack takes a pack from the free list or opens a new one.
func (r *Repository) acquirePack() (*packWriter, error) {
	r.poolMu.Lock()
	for len(r.free) > 0 {
		pw := r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
		pw.mu.Lock()
		sealed := pw.sealed
		pw.mu.Unlock()
		if !sealed {
			r.poolMu.Unlock()
			return pw, nil
		}
	}
	r.poolMu.Unlock()
	return r.newPackWriter()
}

func (r *Repository) releasePack(pw *packWriter) {
	r.poolMu.Lock()
	r.free = append(r.free, pw)
	r.poolMu.Unlock()
}

// appendBlob writes one stored blob to a shared open pack. The pack is
// handed to the finaliser when it reaches the target size.
func (r *Repository) appendBlob(e packEntry, stored []byte, pb *pendingBlob) (*packWriter, error) {
	for {
		pw, err := r.acquirePack()
		if err != nil {
			return nil, err
		}
		pw.mu.Lock()
		if pw.sealed {
			pw.mu.Unlock()
			continue
		}
		e.Offset = uint64(pw.size)
		if err = failpoint.Hit("pack.write"); err == nil {
			_, err = pw.w.Write(stored)
		}
		if err != nil {
			// A failed append poisons the pack: its tail is unknown.
			pw.werr = r.diskFull(fmt.Errorf("write pack %s: %w", pw.id, err))
			pw.sealed = true
			pw.mu.Unlock()
			r.queueFinalize(pw)
			return nil, pw.werr
		}
		pw.size += int64(len(stored))
		pw.entries = append(pw.entries, e)
		pw.pbs = append(pw.pbs, pb)
		if pb != nil {
			pb.pw = pw // read by others only after pb.ready is closed
		}
		full := pw.size >= int64(r.cfg.PackSize) || len(pw.entries) >= maxPackHeaderBlobs/2
		if full {
			pw.sealed = true
		}
		pw.mu.Unlock()
		if full {
			r.queueFinalize(pw)
		} else {
			r.releasePack(pw)
		}
		return pw, nil
	}
}

// sealPack hands pw to the finaliser now (Commit, Close), unless already sealed.
func (r *Repository) sealPack(pw *packWriter) {
	pw.mu.Lock()
	if pw.sealed {
		pw.mu.Unlock()
		return
	}
	pw.sealed = true
	pw.mu.Unlock()
	r.queueFinalize(pw)
}

func (r *Repository) queueFinalize(pw *packWriter) { r.finq <- pw }

// finalizer runs in a small fixed pool owned by the Repository.
func (r *Repository) finalizer() {
	defer r.finWG.Done()
	for pw := range r.finq {
		r.finalize(pw)
		if r.mw != nil { // other writers learn of the pack at once (FORMAT.md §12a)
			if err := r.mwPublish(context.Background(), nil); err != nil {
				r.warn(fmt.Sprintf("publish pack %s: %v (published again at commit)", pw.id, err))
			}
		}
	}
}

// finalize writes the header and trailer, fsyncs, renames, fsyncs the dir and
// indexes the pack in ONE bbolt transaction (the write-order contract).
func (r *Repository) finalize(pw *packWriter) {
	err := pw.werr
	indexed := false
	if err == nil && len(pw.entries) == 0 {
		pw.f.Abort()
	} else if err == nil {
		err = r.writePackTail(pw)
		if err == nil {
			err = r.db.Update(func(tx *bolt.Tx) error {
				if err := failpoint.Hit("catalog.pack"); err != nil {
					return err
				}
				return indexPackTx(tx, pw.id, uint64(pw.size), pw.entries)
			})
			if err != nil {
				err = fmt.Errorf("index pack %s: %w", pw.id, err)
			} else {
				indexed = true
			}
		}
	} else {
		pw.f.Abort()
	}
	r.mu.Lock()
	for i, e := range pw.entries {
		if pb := pw.pbs[i]; pb != nil && r.pending[e.ID] == pb {
			delete(r.pending, e.ID)
		}
		if indexed {
			delete(r.condemned, e.ID)
		}
	}
	delete(r.openPacks, pw.id)
	// Done in the same critical section that drops the pending entries: a
	// session that finds one of these blobs missing (under r.mu) must also
	// find the pack done with its error, or it reports "not found" instead
	// of the disk's error (packFailure).
	if indexed && r.mw != nil {
		r.mwNotePack(pw.id, pw.size)
	}
	pw.err = r.diskFull(err)
	close(pw.done)
	r.mu.Unlock()
}

func (r *Repository) writePackTail(pw *packWriter) error {
	hdr := r.codec.sealMeta(encodePackHeader(pw.entries), packHeaderAD(pw.id))
	tail := append(hdr, encodeTrailer(hdr)...)
	fail := func(err error) error {
		pw.f.Abort()
		return fmt.Errorf("finalise pack %s: %w", pw.id, err)
	}
	if err := failpoint.Hit("pack.tail"); err != nil {
		return fail(err)
	}
	if _, err := pw.w.Write(tail); err != nil {
		return fail(err)
	}
	if err := pw.w.Flush(); err != nil {
		return fail(err)
	}
	pw.size += int64(len(tail))
	// fsync, rename, fsync dir (local) or upload (object store): the
	// backend keeps the pack.* failpoints on those steps.
	if err := pw.f.Commit(context.Background(), packSteps); err != nil {
		return fmt.Errorf("finalise pack %s: %w", pw.id, err)
	}
	return nil
}

// readPackHeader reads and verifies the trailing header of a pack file.
func (r *Repository) readPackHeader(id packID) ([]packEntry, int64, error) {
	f, err := r.store.Open(context.Background(), packName(id))
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return decodePackFile(r.codec, id, f, f.Size())
}

// decodePackFile parses a pack's magic, trailer and header.
func decodePackFile(c *codec, id packID, f io.ReaderAt, size int64) ([]packEntry, int64, error) {
	if size < packStart+packTrailerSize {
		return nil, size, formatErr("pack", "%d bytes is too short", size)
	}
	var head [packStart]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return nil, size, err
	}
	if head != magicPack {
		return nil, size, formatErr("pack", "bad magic")
	}
	trailer := make([]byte, packTrailerSize)
	if _, err := f.ReadAt(trailer, size-packTrailerSize); err != nil {
		return nil, size, err
	}
	hlen, crc, err := decodeTrailer(trailer, size)
	if err != nil {
		return nil, size, err
	}
	hdr := make([]byte, hlen)
	hstart := size - packTrailerSize - int64(hlen)
	if _, err := f.ReadAt(hdr, hstart); err != nil {
		return nil, size, err
	}
	if crc32.Checksum(hdr, crcTable) != crc {
		return nil, size, formatErr("pack header", "checksum mismatch")
	}
	plain, err := c.openMeta("pack header", hdr, packHeaderAD(id))
	if err != nil {
		return nil, size, err
	}
	entries, err := decodePackHeader(plain, uint64(hstart), c.encrypted)
	return entries, size, err
}

// fileCache keeps a bounded number of pack files open for reading. A file
// deleted by reclaim stays readable through an open handle (POSIX), and
// lookups retry once after a miss.
type fileCache struct {
	store storage.Storage
	mu    sync.Mutex
	files map[packID]*cachedFile
	max   int
	tick  uint64
}

type cachedFile struct {
	f    storage.Object
	used uint64
	refs int
	dead bool
}

func newFileCache(store storage.Storage, max int) *fileCache {
	return &fileCache{store: store, files: map[packID]*cachedFile{}, max: max}
}

func (c *fileCache) get(id packID) (*cachedFile, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	if cf, ok := c.files[id]; ok {
		cf.used, cf.refs = c.tick, cf.refs+1
		return cf, nil
	}
	f, err := c.store.Open(context.Background(), packName(id))
	if err != nil {
		return nil, err
	}
	if len(c.files) >= c.max {
		var victim packID
		var vf *cachedFile
		for k, v := range c.files {
			if vf == nil || v.used < vf.used {
				victim, vf = k, v
			}
		}
		delete(c.files, victim)
		vf.dead = true
		if vf.refs == 0 {
			vf.f.Close()
		}
	}
	cf := &cachedFile{f: f, used: c.tick, refs: 1}
	c.files[id] = cf
	return cf, nil
}

func (c *fileCache) put(cf *cachedFile) {
	c.mu.Lock()
	cf.refs--
	if cf.dead && cf.refs == 0 {
		cf.f.Close()
	}
	c.mu.Unlock()
}

// forget drops a pack (deleted by reclaim).
func (c *fileCache) forget(id packID) {
	c.mu.Lock()
	if cf, ok := c.files[id]; ok {
		delete(c.files, id)
		cf.dead = true
		if cf.refs == 0 {
			cf.f.Close()
		}
	}
	c.mu.Unlock()
}

func (c *fileCache) closeAll() {
	c.mu.Lock()
	for id, cf := range c.files {
		delete(c.files, id)
		cf.dead = true
		if cf.refs == 0 {
			cf.f.Close()
		}
	}
	c.mu.Unlock()
}

// readAt reads len(p) bytes of pack id at off.
func (r *Repository) readPackAt(id packID, p []byte, off int64) error {
	cf, err := r.files.get(id)
	if err != nil {
		return fmt.Errorf("open pack %s: %w", id, err)
	}
	defer r.files.put(cf)
	n, err := cf.f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read pack %s at %d: %w", id, off, err)
}
