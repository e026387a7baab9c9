package repository

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// salvagePack recovers the blobs of a pack whose magic, trailer or header
// is damaged (the pack's blobs themselves may be intact: each verifies
// against its id on its own). The header is searched for at every length
// it can have, ending where the trailer starts: a sealed header is
// recognised by decrypting its first block and accepted only when GCM
// authenticates it (bound to the pack id), a plain one by its magic and
// the strict header rules. Failing that, hint (the entries a previous
// catalog knew for this pack) gives the offsets and lengths too. Only
// blobs that decrypt and verify against their ids are returned.
func (r *Repository) salvagePack(id packID, hint []packEntry) (entries []packEntry, size int64, err error) {
	f, err := r.store.Open(context.Background(), packName(id))
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	size = f.Size()
	// Both sources: a header found intact but with a damaged entry leaves
	// that blob to the hint.
	cands := append(r.findPackHeader(f, id, size), hint...)
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].Offset < cands[j].Offset })
	var buf []byte
	seen := map[ID]bool{}
	for _, e := range cands {
		if seen[e.ID] {
			continue
		}
		if e.Offset < packStart || e.Offset+uint64(e.StoredLen) > uint64(size) || e.StoredLen > MaxBlobSize+blobSealOverhead+1024 {
			continue
		}
		if cap(buf) < int(e.StoredLen) {
			buf = make([]byte, e.StoredLen)
		}
		b := buf[:e.StoredLen]
		if _, err := f.ReadAt(b, int64(e.Offset)); err != nil {
			continue
		}
		if _, err := r.codec.decode(nil, e, b); err != nil {
			continue
		}
		seen[e.ID] = true
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, size, fmt.Errorf("salvage pack %s: no blob verifies", id)
	}
	return entries, size, nil
}

// findPackHeader looks for a pack's header just before its trailer
// without trusting the trailer (nil when none is found). The region a
// header can occupy is read once; each candidate length costs one AES
// block (sealed) or an 8-byte compare (plain) before any full decode.
func (r *Repository) findPackHeader(f io.ReaderAt, id packID, size int64) []packEntry {
	c := r.codec
	over := int64(0)
	if c.encrypted {
		over = blobSealOverhead
	}
	end := size - packTrailerSize
	maxN := min(int64(maxPackHeaderBlobs), (end-packStart-packHeaderFixed-over)/packEntrySize)
	if maxN < 1 {
		return nil
	}
	tailStart := end - (packHeaderFixed + maxN*packEntrySize + over)
	tail := make([]byte, end-tailStart)
	if _, err := f.ReadAt(tail, tailStart); err != nil {
		return nil
	}
	ad := packHeaderAD(id)
	first := make([]byte, 16)
	for n := int64(1); n <= maxN; n++ {
		hlen := packHeaderFixed + n*packEntrySize + over
		hdr := tail[int64(len(tail))-hlen:]
		copy(first, hdr[:16])
		if c.encrypted {
			// GCM is CTR mode: with a 12-byte nonce the first block of
			// ciphertext is XORed with AES(nonce ‖ 00000002).
			var ctr, ks [16]byte
			copy(ctr[:], hdr[:gcmNonceSize])
			ctr[15] = 2
			c.block.Encrypt(ks[:], ctr[:])
			for i := range first {
				first[i] = hdr[gcmNonceSize+i] ^ ks[i]
			}
		}
		if [8]byte(first[:8]) != magicPackHeader || int64(binary.LittleEndian.Uint32(first[12:])) != n {
			continue
		}
		plain, err := c.openMeta("pack header", append([]byte(nil), hdr...), ad)
		if err != nil {
			continue
		}
		if entries, err := decodePackHeader(plain, uint64(end-hlen), c.encrypted); err == nil {
			return entries
		}
	}
	return nil
}

// openHintCatalog opens a previous catalog read-only for salvage hints (nil
// when it is missing or fails verification).
func openHintCatalog(path string) *bolt.DB {
	if _, err := os.Stat(path); err != nil || verifyCatalogFile(path) != nil {
		return nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil
	}
	return db
}

// packEntriesOf returns the entries db lists for pack id.
func packEntriesOf(db *bolt.DB, id packID) []packEntry {
	var out []packEntry
	db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlobs)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if l, err := decodeBlobLoc(v); err == nil && l.Pack == id && len(k) == len(ID{}) {
				out = append(out, l.entry(ID(k)))
			}
			return nil
		})
	})
	return out
}
