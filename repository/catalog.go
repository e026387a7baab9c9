package repository

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/vmvault/vmvault/internal/failpoint"
	bolt "go.etcd.io/bbolt"
)

// Catalog buckets (FORMAT.md "Catalog"). Values are fixed-width binary with
// a leading schema byte, except points (rarely touched, JSON).
var (
	bucketMeta   = []byte("meta")
	bucketBlobs  = []byte("blobs")
	bucketPacks  = []byte("packs")
	bucketPoints = []byte("points")

	metaSchema  = []byte("schema")
	metaRepoID  = []byte("repo_id")
	metaReclaim = []byte("reclaim_in_progress")
)

// blobLoc is where a blob lives (catalog value of bucket blobs).
type blobLoc struct {
	Type      BlobType
	Flags     uint8
	State     uint8
	RawLen    uint32
	StoredLen uint32
	Offset    uint64
	Pack      packID
}

func (l blobLoc) entry(id ID) packEntry {
	return packEntry{Type: l.Type, Flags: l.Flags, RawLen: l.RawLen, StoredLen: l.StoredLen, Offset: l.Offset, ID: id}
}

func encodeBlobLoc(l blobLoc) []byte {
	b := make([]byte, blobValueSize)
	b[0] = catalogSchema
	b[1] = byte(l.Type)
	b[2] = l.Flags
	b[3] = l.State
	binary.LittleEndian.PutUint32(b[4:], l.RawLen)
	binary.LittleEndian.PutUint32(b[8:], l.StoredLen)
	binary.LittleEndian.PutUint64(b[12:], l.Offset)
	copy(b[20:36], l.Pack[:])
	return b
}

func decodeBlobLoc(b []byte) (blobLoc, error) {
	var l blobLoc
	if len(b) != blobValueSize || b[0] != catalogSchema {
		return l, formatErr("catalog blob entry", "bad size %d or schema", len(b))
	}
	l.Type, l.Flags, l.State = BlobType(b[1]), b[2], b[3]
	l.RawLen = binary.LittleEndian.Uint32(b[4:])
	l.StoredLen = binary.LittleEndian.Uint32(b[8:])
	l.Offset = binary.LittleEndian.Uint64(b[12:])
	copy(l.Pack[:], b[20:36])
	return l, nil
}

// packInfo is the catalog value of bucket packs.
type packInfo struct {
	State uint8 // blobStateLive or blobStateCondemned (pack to be deleted)
	Count uint32
	Size  uint64
}

func encodePackInfo(p packInfo) []byte {
	b := make([]byte, packValueSize)
	b[0] = catalogSchema
	b[1] = p.State
	binary.LittleEndian.PutUint32(b[4:], p.Count)
	binary.LittleEndian.PutUint64(b[8:], p.Size)
	return b
}

func decodePackInfo(b []byte) (packInfo, error) {
	if len(b) != packValueSize || b[0] != catalogSchema {
		return packInfo{}, formatErr("catalog pack entry", "bad size %d or schema", len(b))
	}
	return packInfo{State: b[1], Count: binary.LittleEndian.Uint32(b[4:]), Size: binary.LittleEndian.Uint64(b[8:])}, nil
}

func encodePointValue(p Point) ([]byte, error) {
	j, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return append([]byte{catalogSchema}, j...), nil
}

func decodePointValue(b []byte) (Point, error) {
	var p Point
	if len(b) < 1 || b[0] != catalogSchema {
		return p, formatErr("catalog point entry", "bad schema")
	}
	if err := json.Unmarshal(b[1:], &p); err != nil {
		return p, formatErr("catalog point entry", "%v", err)
	}
	return p, nil
}

// initCatalog creates the buckets; it reports whether the catalog is new
// (so that the caller rebuilds it from files).
func initCatalog(db *bolt.DB, repoID string) (fresh bool, err error) {
	if err := failpoint.Hit("catalog.init"); err != nil {
		return false, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if m != nil {
			s := m.Get(metaSchema)
			if len(s) != 1 || s[0] != catalogSchema {
				return fmt.Errorf("catalog schema %v is not %d", s, catalogSchema)
			}
			if string(m.Get(metaRepoID)) != repoID {
				return fmt.Errorf("catalog belongs to repository %q, not %q", m.Get(metaRepoID), repoID)
			}
			return nil
		}
		fresh = true
		for _, b := range [][]byte{bucketMeta, bucketBlobs, bucketPacks, bucketPoints} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m = tx.Bucket(bucketMeta)
		if err := m.Put(metaSchema, []byte{catalogSchema}); err != nil {
			return err
		}
		return m.Put(metaRepoID, []byte(repoID))
	})
	return fresh, err
}

// lookupTx returns a blob's location.
func lookupTx(tx *bolt.Tx, id ID) (blobLoc, bool) {
	v := tx.Bucket(bucketBlobs).Get(id[:])
	if v == nil {
		return blobLoc{}, false
	}
	l, err := decodeBlobLoc(v)
	if err != nil {
		return blobLoc{}, false
	}
	return l, true
}

// indexPackTx adds a pack and its blobs. An existing entry for the same blob
// is replaced only when it is condemned or lives in a condemned pack, so
// that a fresh copy supersedes one that reclaim is about to delete.
func indexPackTx(tx *bolt.Tx, id packID, size uint64, entries []packEntry) error {
	packs, blobs := tx.Bucket(bucketPacks), tx.Bucket(bucketBlobs)
	if err := packs.Put(id[:], encodePackInfo(packInfo{Count: uint32(len(entries)), Size: size})); err != nil {
		return err
	}
	// Keys in order: bbolt splits and rebalances far less (thousands of small
	// blobs per pack after a scattered incremental).
	sorted := make([]*packEntry, len(entries))
	for i := range entries {
		sorted[i] = &entries[i]
	}
	sort.SliceStable(sorted, func(i, j int) bool { return bytes.Compare(sorted[i].ID[:], sorted[j].ID[:]) < 0 })
	for _, e := range sorted {
		if old, ok := lookupTx(tx, e.ID); ok && old.State == blobStateLive && old.Pack != id {
			if pv := packs.Get(old.Pack[:]); pv != nil {
				if pi, err := decodePackInfo(pv); err == nil && pi.State == blobStateLive {
					continue
				}
			}
		}
		l := blobLoc{Type: e.Type, Flags: e.Flags, RawLen: e.RawLen, StoredLen: e.StoredLen, Offset: e.Offset, Pack: id}
		if err := blobs.Put(e.ID[:], encodeBlobLoc(l)); err != nil {
			return err
		}
	}
	return nil
}
