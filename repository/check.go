package repository

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/internal/failpoint"
)

// CheckOptions select the depth of Check.
type CheckOptions struct {
	ReadData bool // read, decrypt, decompress and verify every blob
}

// DiskRef names one disk of a restore point.
type DiskRef struct {
	Point string `json:"point"`
	Disk  int    `json:"disk"`
}

// Problem is one finding of Check.
type Problem struct {
	Kind    string    `json:"kind"` // see the problem kinds below
	Pack    string    `json:"pack,omitempty"`
	Blob    string    `json:"blob,omitempty"`
	Message string    `json:"message"`
	Points  []string  `json:"points,omitempty"` // restore points affected
	Disks   []DiskRef `json:"disks,omitempty"`  // disks affected
}

// Problem kinds.
const (
	ProblemMissingPack   = "missing-pack"   // catalog lists a pack that is not on disk
	ProblemBadPack       = "bad-pack"       // pack size or header does not match the catalog
	ProblemUnindexedPack = "unindexed-pack" // pack file whose header cannot be read
	ProblemMissingBlob   = "missing-blob"   // a point references a blob that is not indexed
	ProblemCorruptBlob   = "corrupt-blob"   // a blob failed verification
	ProblemBadPoint      = "bad-point"      // commit record, manifest or disk map unreadable
	ProblemCatalog       = "catalog"        // catalog disagrees with commit records
	ProblemMissingRecord = "missing-record" // catalog lists a restore point whose commit record is not on disk
	ProblemShortLock     = "short-lock"     // immutable: a pack's object lock ends before that of a point needing it
)

func (p Problem) String() string {
	s := p.Kind + ": " + p.Message
	if len(p.Points) > 0 {
		s += fmt.Sprintf(" (restore points: %v)", p.Points)
	}
	return s
}

// CheckReport is the result of Check.
type CheckReport struct {
	Problems  []Problem `json:"problems"`
	Points    int       `json:"points"`
	Packs     int       `json:"packs"`
	Blobs     int       `json:"blobs"`
	BlobsRead int64     `json:"blobsRead"`
	// Quarantined counts corrupt blobs flagged in the catalog so that the
	// next backup producing the same content stores a fresh copy.
	Quarantined int   `json:"quarantined"`
	BytesRead   int64 `json:"bytesRead"`
}

// Clean reports whether Check found no problem.
func (c *CheckReport) Clean() bool { return len(c.Problems) == 0 }

// DamagedPoints lists the restore points named by any problem.
func (c *CheckReport) DamagedPoints() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range c.Problems {
		for _, id := range p.Points {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out
}

type checker struct {
	mu        sync.Mutex // guards rep, bad, touched, hits during the parallel read phase
	r         *Repository
	hits      int         // problems recorded or attached so far
	cleanSegs map[ID]bool // segments walked without any finding
	rep       *CheckReport
	packs     map[packID]packInfo // catalog snapshot
	bad       map[ID]int          // blob -> index into rep.Problems
	touched   map[int]map[string]bool
}

func (c *checker) problem(p Problem) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.problemLocked(p)
}

func (c *checker) problemLocked(p Problem) int {
	c.rep.Problems = append(c.rep.Problems, p)
	return len(c.rep.Problems) - 1
}

func (c *checker) attach(i int, point string, disk int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attachLocked(i, point, disk)
}

func (c *checker) attachLocked(i int, point string, disk int) {
	c.hits++
	p := &c.rep.Problems[i]
	if c.touched[i] == nil {
		c.touched[i] = map[string]bool{}
	}
	if !c.touched[i][point] {
		c.touched[i][point] = true
		p.Points = append(p.Points, point)
	}
	if disk >= 0 {
		key := fmt.Sprintf("%s/%d", point, disk)
		if !c.touched[i][key] {
			c.touched[i][key] = true
			p.Disks = append(p.Disks, DiskRef{Point: point, Disk: disk})
		}
	}
}

// blobProblem records (once) a problem about a blob and attaches a point.
func (c *checker) blobProblem(id ID, kind, pack, msg, point string, disk int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.bad[id]
	if !ok {
		i = c.problemLocked(Problem{Kind: kind, Blob: id.String(), Pack: pack, Message: msg})
		c.bad[id] = i
	}
	if point != "" {
		c.attachLocked(i, point, disk)
	}
}

// Check verifies the repository: catalog vs packs vs commit records and
// manifests; with ReadData, every blob is read and verified. Bad blobs are
// reported with exactly the restore points (and disks) that reference them.
func (r *Repository) Check(ctx context.Context, opts CheckOptions, progress func(Progress)) (*CheckReport, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	if r.mw != nil {
		// Several writers: learn every writer's packs and points first, so
		// that check judges the repository, not this writer's view of it.
		if err := r.Refresh(ctx); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
	}
	c := &checker{r: r, rep: &CheckReport{}, bad: map[ID]int{}, touched: map[int]map[string]bool{}, cleanSegs: map[ID]bool{}}
	report := func(phase string, done, total int64) {
		if progress != nil {
			progress(Progress{Phase: phase, Done: done, Total: total})
		}
	}
	// Catalog snapshot.
	packs := map[packID]packInfo{}
	perPack := map[packID]uint32{}
	if err := r.db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
			pi, err := decodePackInfo(v)
			if err != nil {
				return err
			}
			packs[packID(k)] = pi
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
			l, err := decodeBlobLoc(v)
			if err != nil {
				return err
			}
			perPack[l.Pack]++
			c.rep.Blobs++
			return nil
		})
	}); err != nil {
		return nil, fmt.Errorf("check: read catalog: %w", err)
	}
	c.rep.Packs = len(packs)
	c.packs = packs
	onDisk, err := r.listPackFiles()
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	r.mu.Lock()
	for id := range r.openPacks {
		delete(onDisk, id)
	}
	r.mu.Unlock()
	badPacks := map[packID]string{}
	// Packs whose size or header is wrong: a damaged header or trailer
	// says nothing about the blobs, which verify against their ids on
	// their own, so each catalogued blob is read and verified.
	damaged := map[packID][]packEntry{}
	ids := make([]packID, 0, len(packs))
	for id := range packs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	// ReadData: packs are verified by a bounded pool of readers while the
	// loop below checks headers.
	type readJob struct {
		id      packID
		entries []packEntry
	}
	g, gctx := errgroup.WithContext(ctx)
	readJobs := make(chan readJob)
	if opts.ReadData {
		for range defaultWorkers() {
			g.Go(func() error {
				for j := range readJobs {
					if err := c.readPack(gctx, j.id, j.entries); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	sendErr := func() error {
		for n, id := range ids {
			if err := gctx.Err(); err != nil {
				return err
			}
			report("packs", int64(n+1), int64(len(ids)))
			pi := packs[id]
			size, ok := onDisk[id]
			delete(onDisk, id)
			if !ok && !r.packIndexed(id) {
				continue // removed by a concurrent reclaim
			}
			if !ok {
				badPacks[id] = "pack file is missing"
				c.problem(Problem{Kind: ProblemMissingPack, Pack: id.String(), Message: fmt.Sprintf("pack %s is in the catalog but not on disk", id)})
				continue
			}
			if uint64(size) != pi.Size {
				damaged[id] = nil
				c.problem(Problem{Kind: ProblemBadPack, Pack: id.String(), Message: fmt.Sprintf("pack %s is %d bytes, catalog says %d (each of its blobs is verified on its own)", id, size, pi.Size)})
				continue
			}
			entries, _, err := r.readPackHeader(id)
			if err != nil {
				damaged[id] = nil
				c.problem(Problem{Kind: ProblemBadPack, Pack: id.String(), Message: fmt.Sprintf("pack %s: %v (its blobs are verified on their own; recatalog salvages those that verify)", id, err)})
				continue
			}
			if msg := r.comparePack(id, entries, perPack[id]); msg != "" {
				c.problem(Problem{Kind: ProblemBadPack, Pack: id.String(), Message: fmt.Sprintf("pack %s: %s", id, msg)})
			}
			if opts.ReadData {
				select {
				case readJobs <- readJob{id, entries}:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
		}
		return nil
	}()
	close(readJobs)
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if sendErr != nil {
		return nil, sendErr
	}
	for id := range onDisk {
		if r.packIndexed(id) {
			continue // indexed after our catalog snapshot (a concurrent backup)
		}
		c.problem(Problem{Kind: ProblemUnindexedPack, Pack: id.String(), Message: fmt.Sprintf("pack %s is on disk but unreadable and not indexed (reclaim removes it unless a restore point misses a blob)", id)})
	}
	if len(badPacks) > 0 || len(damaged) > 0 {
		// Every blob of a lost pack is lost.
		if err := r.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
				l, err := decodeBlobLoc(v)
				if err == nil {
					if why, ok := badPacks[l.Pack]; ok {
						c.blobProblem(ID(k), ProblemCorruptBlob, l.Pack.String(), fmt.Sprintf("blob %s: %s", ID(k), why), "", -1)
					} else if es, ok := damaged[l.Pack]; ok {
						damaged[l.Pack] = append(es, l.entry(ID(k)))
					}
				}
				return nil
			})
		}); err != nil {
			return nil, err
		}
		for _, id := range ids {
			if es, ok := damaged[id]; ok {
				if err := c.verifyEntries(ctx, id, es); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := c.checkPoints(ctx, report); err != nil {
		return nil, err
	}
	if err := c.quarantine(); err != nil {
		return nil, err
	}
	shorts, err := r.shortLocks(ctx)
	if err != nil {
		return nil, err
	}
	for _, sl := range shorts {
		c.rep.Problems = append(c.rep.Problems, Problem{Kind: ProblemShortLock, Pack: sl.Pack,
			Message: fmt.Sprintf("pack %s is locked until %s, but restore point %s, which needs it, is locked until %s: run `appliance repo extend-locks`",
				sl.Pack, sl.Until.Format(time.RFC3339), sl.NeededBy, sl.Need.Format(time.RFC3339))})
	}
	return c.rep, nil
}

// comparePack checks a pack header against the catalog.
func (r *Repository) comparePack(id packID, entries []packEntry, catalogCount uint32) string {
	var msg string
	var pointing uint32
	_ = r.db.View(func(tx *bolt.Tx) error {
		for _, e := range entries {
			l, ok := lookupTx(tx, e.ID)
			if !ok || l.Pack != id {
				// An unreferenced copy (the catalog uses another pack, or
				// reclaim dropped a dead blob): garbage, not damage. Blobs
				// that points need are checked by the points walk.
				continue
			}
			pointing++
			if l.Offset != e.Offset || l.StoredLen != e.StoredLen || l.RawLen != e.RawLen || l.Type != e.Type || l.Flags != e.Flags {
				msg = fmt.Sprintf("blob %s: catalog entry differs from the pack header", e.ID)
				return nil
			}
		}
		return nil
	})
	if msg == "" && pointing != catalogCount {
		msg = fmt.Sprintf("catalog has %d blobs in this pack, header lists %d", catalogCount, pointing)
	}
	return msg
}

// verifyEntries reads and verifies the catalogued blobs of a pack whose
// header cannot be trusted, one by one at the catalog's offsets.
func (c *checker) verifyEntries(ctx context.Context, id packID, entries []packEntry) error {
	var blobs, bytes int64
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		buf := make([]byte, e.StoredLen)
		err := c.r.readPackAt(id, buf, int64(e.Offset))
		if err == nil {
			blobs++
			bytes += int64(e.StoredLen)
			_, err = c.r.codec.decode(nil, e, buf)
		}
		if err != nil {
			c.blobProblem(e.ID, ProblemCorruptBlob, id.String(), (&CorruptBlobError{Blob: e.ID, Pack: id.String(), Err: err}).Error(), "", -1)
		}
	}
	c.mu.Lock()
	c.rep.BlobsRead += blobs
	c.rep.BytesRead += bytes
	c.mu.Unlock()
	return nil
}

// readPack reads a whole pack sequentially and verifies every blob.
func (c *checker) readPack(ctx context.Context, id packID, entries []packEntry) error {
	r := c.r
	f, err := r.store.Open(ctx, packName(id))
	if err != nil {
		c.problem(Problem{Kind: ProblemBadPack, Pack: id.String(), Message: err.Error()})
		return nil
	}
	defer f.Close()
	if len(entries) == 0 {
		return nil
	}
	// Blobs are contiguous from offset 8: one sequential buffered read.
	br := bufio.NewReaderSize(io.NewSectionReader(f, int64(entries[0].Offset), 1<<62), 4<<20)
	var buf, plain []byte
	var blobs, bytes int64
	defer func() {
		c.mu.Lock()
		c.rep.BlobsRead += blobs
		c.rep.BytesRead += bytes
		c.mu.Unlock()
	}()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cap(buf) < int(e.StoredLen) {
			buf = make([]byte, e.StoredLen)
		}
		buf = buf[:e.StoredLen]
		if _, err := io.ReadFull(br, buf); err != nil {
			c.blobProblem(e.ID, ProblemCorruptBlob, id.String(), fmt.Sprintf("blob %s in pack %s: %v", e.ID, id, err), "", -1)
			return nil
		}
		blobs++
		bytes += int64(e.StoredLen)
		b, err := r.codec.decode(plain, e, buf)
		if err != nil {
			if l, ok, _ := r.lookup(e.ID); !ok || l.Pack != id {
				continue // a dead copy the catalog does not use: garbage for reclaim, not damage
			}
			c.blobProblem(e.ID, ProblemCorruptBlob, id.String(), (&CorruptBlobError{Blob: e.ID, Pack: id.String(), Err: err}).Error(), "", -1)
			continue
		}
		plain = b
	}
	return nil
}

// checkPoints walks every restore point: record, manifest, config, maps and
// the index entries of every referenced blob.
func (c *checker) checkPoints(ctx context.Context, report func(string, int64, int64)) error {
	r := c.r
	pts, err := r.listCatalog(ctx)
	if err != nil {
		return err
	}
	c.rep.Points = len(pts)
	inCat := map[string]bool{}
	for n, p := range pts {
		inCat[p.ID] = true
		report("points", int64(n+1), int64(len(pts)))
		pid, _ := ParseID(p.ID)
		rec, err := r.readRecord(pid)
		if errors.Is(err, os.ErrNotExist) {
			i := c.problem(Problem{Kind: ProblemMissingRecord, Message: fmt.Sprintf("restore point %s is in the catalog but its commit record %s is missing (run appliance repo repair to rewrite it from the catalog and the manifest, restore the file from a copy, or delete the point; reclaim keeps its data meanwhile)", p.ID, r.recordPath(pid))})
			c.attach(i, p.ID, -1)
			continue
		}
		if err != nil {
			i := c.problem(Problem{Kind: ProblemBadPoint, Message: fmt.Sprintf("restore point %s: commit record: %v (run appliance repo repair to rewrite it from the catalog and the manifest)", p.ID, err)})
			c.attach(i, p.ID, -1)
			continue
		}
		if rec.Locked != p.Locked {
			i := c.problem(Problem{Kind: ProblemCatalog, Message: fmt.Sprintf("restore point %s: lock state differs between catalog and commit record", p.ID)})
			c.attach(i, p.ID, -1)
		}
		fp, err := r.loadPointFromFiles(ctx, pid)
		if err != nil {
			c.blobError(err, pid, p.ID, -1, "manifest")
			continue
		}
		cp := p
		cp.Locked = fp.Locked // reported above
		if a, b := pointJSON(fp), pointJSON(cp); a != b {
			i := c.problem(Problem{Kind: ProblemCatalog, Message: fmt.Sprintf("restore point %s: the catalog entry differs from its manifest and commit record (recatalog rebuilds it)", p.ID)})
			c.attach(i, p.ID, -1)
		}
		if !p.ConfigID.IsZero() {
			c.checkRef(Extent{ID: p.ConfigID}, false, p.ID, -1)
		}
		for di, d := range p.Disks {
			if err := c.checkMap(ctx, p.ID, di, d.Map); err != nil {
				return err
			}
		}
	}
	recs, err := r.listRecords()
	if err != nil {
		return err
	}
	for _, id := range recs {
		if inCat[id.String()] {
			continue
		}
		if _, err := r.readRecord(id); err != nil {
			if !errors.Is(err, os.ErrNotExist) { // not deleted meanwhile
				c.problem(Problem{Kind: ProblemBadPoint, Message: fmt.Sprintf("commit record %s cannot be read: %v (reclaim refuses to run until it is repaired or removed)", r.recordPath(id), err), Points: []string{id.String()}})
			}
			continue
		}
		c.problem(Problem{Kind: ProblemCatalog, Message: fmt.Sprintf("commit record %s is not in the catalog (its manifest may be unreadable)", id), Points: []string{id.String()}})
	}
	return nil
}

// blobError turns a load error into a problem attached to a point.
func (c *checker) blobError(err error, id ID, point string, disk int, what string) {
	var cb *CorruptBlobError
	if errors.As(err, &cb) {
		c.blobProblem(cb.Blob, ProblemCorruptBlob, cb.Pack, cb.Error(), point, disk)
		return
	}
	if errors.Is(err, ErrNotFound) {
		c.blobProblem(id, ProblemMissingBlob, "", fmt.Sprintf("%s blob %s is not in the repository", what, id), point, disk)
		return
	}
	i := c.problem(Problem{Kind: ProblemBadPoint, Blob: id.String(), Message: fmt.Sprintf("restore point %s: %s %s: %v", point, what, id, err)})
	c.attach(i, point, disk)
}

// checkRef checks a reference to a blob: indexed, and, for a disk map
// extent (data), a data blob holding [Skip, Skip+Length): exactly its
// bytes for a whole-blob extent (format v1.0), within them for a slice.
func (c *checker) checkRef(e Extent, data bool, point string, disk int) {
	id := e.ID
	if _, ok := c.bad[id]; ok {
		c.blobProblem(id, "", "", "", point, disk)
		return
	}
	loc, ok, err := c.r.lookup(id)
	if err != nil || !ok {
		c.blobProblem(id, ProblemMissingBlob, "", fmt.Sprintf("blob %s is not in the repository", id), point, disk)
		return
	}
	if _, known := c.packs[loc.Pack]; !known && !c.r.packIndexed(loc.Pack) {
		// A damaged catalog entry (its pack id changed): recatalog rebuilds it.
		c.blobProblem(id, ProblemCatalog, loc.Pack.String(), fmt.Sprintf("the catalog places blob %s in pack %s, which it does not list (recatalog rebuilds the catalog)", id, loc.Pack), point, disk)
		return
	}
	if !data {
		return
	}
	raw := int64(loc.RawLen)
	switch {
	case loc.Type != BlobData:
		c.blobProblem(id, ProblemCorruptBlob, loc.Pack.String(), fmt.Sprintf("disk map extent at %d references blob %s of type %s, not data", e.Offset, id, loc.Type), point, disk)
	case !e.Slice && raw != e.Length:
		c.blobProblem(id, ProblemCorruptBlob, loc.Pack.String(), fmt.Sprintf("blob %s is %d bytes, disk map says %d", id, loc.RawLen, e.Length), point, disk)
	case e.Slice && (e.Skip < 0 || e.Skip+e.Length > raw):
		c.blobProblem(id, ProblemCorruptBlob, loc.Pack.String(), fmt.Sprintf("blob %s is %d bytes, disk map slices [%d,+%d)", id, loc.RawLen, e.Skip, e.Length), point, disk)
	}
}

func (c *checker) checkMap(ctx context.Context, point string, disk int, root ID) error {
	r := c.r
	if _, ok := c.bad[root]; ok {
		c.blobProblem(root, "", "", "", point, disk)
		return nil
	}
	dr, err := r.loadRoot(ctx, root)
	if err != nil {
		c.blobError(err, root, point, disk, "disk map root")
		return ctx.Err()
	}
	for _, ref := range dr.Segs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, ok := c.bad[ref.ID]; ok {
			c.blobProblem(ref.ID, "", "", "", point, disk)
			continue
		}
		if c.cleanSegs[ref.ID] {
			continue // shared with an earlier point and already verified
		}
		s, err := r.loadSegment(ctx, ref)
		if err != nil {
			c.blobError(err, ref.ID, point, disk, "disk map segment")
			continue
		}
		before := c.hits
		for _, e := range s.Extents {
			if !e.Zero {
				c.checkRef(e, true, point, disk)
			}
		}
		if c.hits == before {
			c.cleanSegs[ref.ID] = true
		}
	}
	return nil
}

func (r *Repository) packIndexed(id packID) bool {
	var ok bool
	r.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketPacks).Get(id[:]) != nil
		return nil
	})
	return ok
}

// quarantine flags corrupt blobs (PBS-style) so deduplication stops handing
// them out: the next backup of the same data heals the repository.
func (c *checker) quarantine() error {
	var ids []ID
	packs := map[ID]string{}
	for id, i := range c.bad {
		if p := c.rep.Problems[i]; p.Kind == ProblemCorruptBlob && p.Pack != "" {
			ids = append(ids, id)
			packs[id] = p.Pack
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := failpoint.Hit("check.quarantine"); err != nil {
		return err
	}
	return c.r.db.Update(func(tx *bolt.Tx) error {
		for _, id := range ids {
			l, ok := lookupTx(tx, id)
			if !ok || l.Pack.String() != packs[id] || l.State == blobStateCorrupt {
				continue
			}
			l.State = blobStateCorrupt
			if err := tx.Bucket(bucketBlobs).Put(id[:], encodeBlobLoc(l)); err != nil {
				return err
			}
			c.rep.Quarantined++
		}
		return nil
	})
}

func pointJSON(p Point) string {
	b, _ := json.Marshal(p)
	return string(b)
}
