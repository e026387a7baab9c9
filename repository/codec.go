package repository

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"math"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
)

// codec turns plaintext blobs into stored bytes and back. It is stateless
// after construction and safe for concurrent use.
type codec struct {
	encrypted bool
	aead      cipher.AEAD  // nil when unencrypted
	block     cipher.Block // the AES key schedule under aead (salvage locates sealed pack headers with it)
	idKey     []byte
	macs      sync.Pool // hash.Hash: the config's id_mac keyed with idKey
	enc       *zstd.Encoder
	encSmall  *zstd.Encoder // blobs up to smallBlob bytes
	dec       *zstd.Decoder
}

func zstdLevel(l string) zstd.EncoderLevel {
	switch l {
	case "default":
		return zstd.SpeedDefault
	case "better":
		return zstd.SpeedBetterCompression
	}
	return zstd.SpeedFastest
}

// smallBlob: blobs this small are compressed at "fastest" whatever the
// configured level (a write-time choice readers ignore). Per 4 KiB blob the
// "better" encoder costs 8.5 µs, "fastest" 1.0 µs, and an incremental of
// scattered 4 KiB writes stores thousands of such blobs; the bytes saved by
// a stronger level on them are few. 64 KiB covers the blobs an incremental
// makes by coalescing the 4 KiB pieces of one window (up to 16 of them; at
// 16 KiB the ~15% of those blobs above it took most of the compression
// time of the 10,000-write incremental), while a full backup's CDC chunks
// (1 MiB average) stay at the configured level.
const smallBlob = 64 << 10

func newCodec(encKey, idKey []byte, idMAC, level string) (*codec, error) {
	c := &codec{}
	if encKey != nil {
		block, err := aes.NewCipher(encKey)
		if err != nil {
			return nil, fmt.Errorf("aes: %w", err)
		}
		c.block = block
		c.aead, err = cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("gcm: %w", err)
		}
		c.encrypted = true
		c.idKey = append([]byte(nil), idKey...)
		switch idMAC {
		case IDMACHMACSHA256:
			c.macs.New = func() any { return hmac.New(sha256.New, c.idKey) }
		case IDMACBLAKE3:
			if _, err := blake3.NewKeyed(c.idKey); err != nil {
				return nil, fmt.Errorf("blake3 id key: %w", err)
			}
			c.macs.New = func() any {
				h, _ := blake3.NewKeyed(c.idKey) // the key's length was checked above
				return h
			}
		default:
			return nil, fmt.Errorf("unknown id function %q", idMAC)
		}
	}
	n := runtime.GOMAXPROCS(0) * 2
	var err error
	// The level is a write-time choice (config compression_level); no frame
	// CRC because every read verifies the blob id anyway.
	c.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstdLevel(level)),
		zstd.WithEncoderConcurrency(n), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true),
		zstd.WithWindowSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	c.encSmall, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(n), zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true),
		zstd.WithWindowSize(1<<20))
	if err != nil {
		c.enc.Close()
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	c.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(n),
		zstd.WithDecoderMaxMemory(MaxBlobSize), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return c, nil
}

func (c *codec) close() {
	c.enc.Close()
	c.encSmall.Close()
	c.dec.Close()
}

// id computes a blob id.
func (c *codec) id(data []byte) ID {
	if !c.encrypted {
		return sha256.Sum256(data)
	}
	h := c.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(data)
	var id ID
	h.Sum(id[:0])
	c.macs.Put(h)
	return id
}

func blobAD(id ID, t BlobType) []byte {
	ad := make([]byte, 33)
	copy(ad, id[:])
	ad[32] = byte(t)
	return ad
}

// encode appends the stored form of data to dst[:0]. scratch is a buffer for
// the compressed payload (reused by the caller). Returns stored bytes and flags.
func (c *codec) encode(dst, scratch []byte, t BlobType, id ID, data []byte) (out, scratchOut []byte, flags uint8) {
	payload := data
	enc := c.enc
	if len(data) <= smallBlob {
		enc = c.encSmall
	}
	comp := scratch[:0]
	if !incompressible(data) {
		comp = enc.EncodeAll(data, scratch[:0])
		if len(comp) < len(data) {
			payload, flags = comp, flagZstd
		}
	}
	if !c.encrypted {
		return append(dst[:0], payload...), comp, flags
	}
	if need := gcmNonceSize + len(payload) + gcmTagSize; cap(dst) < need {
		dst = make([]byte, 0, need)
	}
	out = dst[:gcmNonceSize]
	if _, err := rand.Read(out); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // never happens on Linux (getrandom)
	}
	out = c.aead.Seal(out, out[:gcmNonceSize], payload, blobAD(id, t))
	return out, comp, flags
}

// Incompressible data is recognised from samples before zstd sees it: on a
// dense random disk zstd spent 0.23-0.34 CPU-s per GB finding out that
// nothing shrinks (docs/PERFORMANCE.md §13). A blob is stored raw without
// trying when every one of entropySamples samples of entropySample bytes,
// spread over it, has a byte entropy above entropyRaw bits per byte:
// encrypted, compressed or random bytes. zstd could shrink such bytes only
// through long repeats inside the blob, which deduplication already takes
// at chunk level. The first sample decides for compressible data (text,
// code, executables all stay well below the bound), so they pay one 4 KiB
// histogram per blob. A write-time choice: readers go by the blob's flags.
const (
	entropySample  = 4 << 10
	entropySamples = 8
	entropyRaw     = 7.9 // random 4 KiB samples measure 7.95 ± 0.005 (the estimate's bias); gzip output ~7.95
	entropyMinBlob = 64 << 10
)

// incompressible reports whether data looks like it will not compress.
func incompressible(data []byte) bool {
	if len(data) < entropyMinBlob {
		return false
	}
	step := (len(data) - entropySample) / (entropySamples - 1)
	for i := range entropySamples {
		if byteEntropy(data[i*step:i*step+entropySample]) < entropyRaw {
			return false
		}
	}
	return true
}

// byteEntropy is the Shannon entropy of b's byte histogram, in bits per byte.
func byteEntropy(b []byte) float64 {
	var h [256]uint32
	for _, c := range b {
		h[c]++
	}
	n := float64(len(b))
	var e float64
	for _, k := range h {
		if k != 0 {
			p := float64(k) / n
			e -= p * math.Log2(p)
		}
	}
	return e
}

// decode verifies and returns the plaintext of a stored blob, appended to dst[:0].
func (c *codec) decode(dst []byte, e packEntry, stored []byte) ([]byte, error) {
	if len(stored) != int(e.StoredLen) {
		return nil, fmt.Errorf("short read: %d of %d bytes", len(stored), e.StoredLen)
	}
	payload := stored
	if c.encrypted {
		if len(stored) < blobSealOverhead {
			return nil, errors.New("sealed blob too short")
		}
		var err error
		// Open in place: stored is our own scratch buffer.
		payload, err = c.aead.Open(stored[gcmNonceSize:gcmNonceSize], stored[:gcmNonceSize], stored[gcmNonceSize:], blobAD(e.ID, e.Type))
		if err != nil {
			return nil, fmt.Errorf("authentication failed: %w", err)
		}
	}
	var out []byte
	if e.Flags&flagZstd != 0 {
		if cap(dst) < int(e.RawLen) {
			dst = make([]byte, 0, e.RawLen)
		}
		var err error
		out, err = c.dec.DecodeAll(payload, dst[:0])
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
	} else {
		out = append(dst[:0], payload...)
	}
	if len(out) != int(e.RawLen) {
		return nil, fmt.Errorf("plaintext is %d bytes, header says %d", len(out), e.RawLen)
	}
	if got := c.id(out); got != e.ID {
		return nil, fmt.Errorf("content hash %s does not match id", got)
	}
	return out, nil
}

// sealMeta seals a small metadata structure (pack header, commit record).
func (c *codec) sealMeta(plain, ad []byte) []byte {
	if !c.encrypted {
		return plain
	}
	out := make([]byte, gcmNonceSize, gcmNonceSize+len(plain)+gcmTagSize)
	if _, err := rand.Read(out); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return c.aead.Seal(out, out, plain, ad)
}

func (c *codec) openMeta(what string, b, ad []byte) ([]byte, error) {
	if !c.encrypted {
		return b, nil
	}
	if len(b) < blobSealOverhead {
		return nil, formatErr(what, "sealed data too short")
	}
	p, err := c.aead.Open(nil, b[:gcmNonceSize], b[gcmNonceSize:], ad)
	if err != nil {
		return nil, formatErr(what, "authentication failed (wrong key or tampered)")
	}
	return p, nil
}

// encodeRecord returns the bytes of a commit record file.
func (c *codec) encodeRecord(rec record) []byte {
	p := encodeRecordPayload(rec)
	out := append([]byte(nil), magicRecord[:]...)
	if c.encrypted {
		return append(out, c.sealMeta(p, magicRecord[:])...)
	}
	out = append(out, p...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(p, crcTable))
}

func (c *codec) decodeRecord(b []byte) (record, error) {
	const what = "commit record"
	if len(b) < 8 || !bytes.Equal(b[:8], magicRecord[:]) {
		return record{}, formatErr(what, "bad magic")
	}
	b = b[8:]
	if c.encrypted {
		p, err := c.openMeta(what, b, magicRecord[:])
		if err != nil {
			return record{}, err
		}
		return decodeRecordPayload(p)
	}
	if len(b) != recordPayloadSize+4 {
		return record{}, formatErr(what, "%d bytes, want %d", len(b), recordPayloadSize+4)
	}
	if crc32.Checksum(b[:recordPayloadSize], crcTable) != binary.LittleEndian.Uint32(b[recordPayloadSize:]) {
		return record{}, formatErr(what, "checksum mismatch")
	}
	return decodeRecordPayload(b[:recordPayloadSize])
}

// packHeaderAD binds a sealed pack header to its pack id (file name).
func packHeaderAD(p packID) []byte {
	ad := append([]byte(nil), magicPackHeader[:]...)
	return append(ad, p[:]...)
}
