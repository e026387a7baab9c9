package repository

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// Every decoder of on-disk bytes must reject garbage with an error, never a
// panic or a huge allocation. Seeds: f.Add below plus testdata/fuzz/FuzzX/.

func FuzzPackHeader(f *testing.F) {
	h := encodePackHeader(goldenEntries())
	f.Add(h, uint64(packStart+1065), false)
	f.Add(h[:20], uint64(100), true)
	f.Add([]byte{}, uint64(0), false)
	f.Fuzz(func(t *testing.T, b []byte, headerStart uint64, encrypted bool) {
		entries, err := decodePackHeader(b, headerStart, encrypted)
		if err == nil {
			if !bytes.Equal(encodePackHeader(entries), b) {
				t.Fatal("accepted header does not re-encode identically")
			}
		}
	})
}

func FuzzPackFile(f *testing.F) {
	c := goldenCodec(f, false)
	var pid packID
	pid[0] = 0x44
	pack, _ := goldenPack(nil, c, pid)
	f.Add(pack)
	f.Add(pack[:len(pack)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, _, err := decodePackFile(c, pid, bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, e := range entries {
			stored := append([]byte(nil), b[e.Offset:e.Offset+uint64(e.StoredLen)]...)
			c.decode(nil, e, stored) // may fail, must not panic
		}
	})
}

func FuzzSegment(f *testing.F) {
	f.Add(encodeSegment(segmentSpan, goldenExtents()))
	f.Add(encodeSegment(0, []Extent{{Offset: 0, Length: 1, Zero: true}}))
	f.Add(encodeSegment(0, []Extent{{Offset: 0, Length: 4096, ID: ID{1}, Skip: 512, Slice: true}, {Offset: 4096, Length: 1, Zero: true}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSegment(b)
		if err == nil && !bytes.Equal(encodeSegment(s.Start, s.Extents), b) {
			t.Fatal("accepted segment does not re-encode identically")
		}
	})
}

func FuzzRoot(f *testing.F) {
	var a ID
	a[0] = 1
	f.Add(encodeRoot(diskRoot{Size: 10, Span: segmentSpan, Segs: []segRef{{0, 10, a}}}))
	f.Add(encodeRoot(diskRoot{Size: 0, Span: segmentSpan}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRoot(b)
		if err == nil && !bytes.Equal(encodeRoot(r), b) {
			t.Fatal("accepted root does not re-encode identically")
		}
	})
}

func FuzzManifest(f *testing.F) {
	b, _ := encodeManifest(goldenManifest())
	f.Add(b)
	f.Add(append(magicManifest[:], `{"disks":[{"map":"zz"}]}`...))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeManifest(b)
	})
}

func FuzzRecord(f *testing.F) {
	plain, sealed := goldenCodec(f, false), goldenCodec(f, true)
	var mid ID
	mid[0] = 1
	f.Add(plain.encodeRecord(record{Manifest: mid, Locked: true}))
	f.Add(sealed.encodeRecord(record{Manifest: mid}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if rec, err := plain.decodeRecord(b); err == nil && !bytes.Equal(plain.encodeRecord(rec), b) {
			t.Fatal("accepted record does not re-encode identically")
		}
		sealed.decodeRecord(b)
	})
}

func FuzzConfig(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "golden", "config.json")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"format":"vmvault repository","version":{"major":1,"minor":0}}`))
	f.Add([]byte(`{"format":"vmvault repository","version":{"major":9,"minor":0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cf, err := decodeConfig(b)
		if err == nil && cf.Encryption != nil {
			// Bounded KDF parameters: unwrapping must stay cheap enough to try.
			if cf.Encryption.KDF.MemoryKiB > 4<<20 {
				t.Fatal("unbounded argon2 memory accepted")
			}
		}
	})
}

func FuzzCatalogValues(f *testing.F) {
	f.Add(encodeBlobLoc(blobLoc{Type: BlobData, RawLen: 5, StoredLen: 7, Offset: 8}))
	f.Add(encodePackInfo(packInfo{Count: 1, Size: 99}))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeBlobLoc(b)
		decodePackInfo(b)
		decodePointValue(b)
		if len(b) >= 16 {
			decodeTrailer(b[:16], int64(binary.LittleEndian.Uint32(b)))
		}
	})
}
