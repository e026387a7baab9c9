package repository

import (
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The copy map (catalog bucket "copymap", FORMAT.md §9) remembers, in the
// target's catalog, which target blob id each source data blob became, so
// that copying a point whose blobs the target already holds reads nothing
// from the source: each blob costs a catalog lookup instead of a read,
// decryption, decompression and HMAC of its bytes. It is a cache: a
// rebuilt catalog starts without it and Copy falls back to reading. Each
// entry carries a MAC under the target's id key, so a damaged or forged
// entry is ignored instead of pointing a copy at the wrong data.

var bucketCopyMap = []byte("copymap")

const (
	copyMapKeyLen = 16 + 32 // source repository id (raw) ‖ source blob id
	copyMapValLen = 32 + 16 // target blob id ‖ MAC
)

var copyMapMagic = []byte("vmvault copy map v1")

func copyMapKey(srcRepo []byte, src ID) []byte {
	k := make([]byte, 0, copyMapKeyLen)
	return append(append(k, srcRepo...), src[:]...)
}

func (r *Repository) copyMapMAC(key []byte, dst ID) []byte {
	b := make([]byte, 0, len(copyMapMagic)+copyMapKeyLen+32)
	b = append(append(append(b, copyMapMagic...), key...), dst[:]...)
	id := r.codec.id(b)
	return id[:16]
}

// copyMapGet returns the target ids the map knows for src blobs of the
// source repository srcRepo (hex id).
func (r *Repository) copyMapGet(srcRepo string, ids []ID) (map[ID]ID, error) {
	repo, err := hex.DecodeString(srcRepo)
	if err != nil || len(repo) != 16 {
		return nil, fmt.Errorf("copy map: bad repository id %q", srcRepo)
	}
	out := map[ID]ID{}
	err = r.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCopyMap)
		if b == nil {
			return nil
		}
		for _, id := range ids {
			k := copyMapKey(repo, id)
			v := b.Get(k)
			if len(v) != copyMapValLen {
				continue
			}
			var dst ID
			copy(dst[:], v[:32])
			if string(r.copyMapMAC(k, dst)) == string(v[32:]) {
				out[id] = dst
			}
		}
		return nil
	})
	return out, err
}

// copyMapPut records source → target ids in one transaction.
func (r *Repository) copyMapPut(srcRepo string, pairs map[ID]ID) error {
	if len(pairs) == 0 {
		return nil
	}
	repo, err := hex.DecodeString(srcRepo)
	if err != nil || len(repo) != 16 {
		return fmt.Errorf("copy map: bad repository id %q", srcRepo)
	}
	return r.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCopyMap)
		if err != nil {
			return err
		}
		for src, dst := range pairs {
			k := copyMapKey(repo, src)
			if err := b.Put(k, append(append(make([]byte, 0, copyMapValLen), dst[:]...), r.copyMapMAC(k, dst)...)); err != nil {
				return err
			}
		}
		return nil
	})
}
