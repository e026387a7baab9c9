package repository

import (
	"bytes"
	"math/rand"
	"testing"
)

func TestIncompressible(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	random := func(n int) []byte { b := make([]byte, n); rng.Read(b); return b }
	text := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog 0123456789\n"), 40000)
	half := random(1 << 20)
	copy(half[512<<10:], text) // compressible second half
	tail := random(1 << 20)
	copy(tail[len(tail)-8<<10:], text) // only the last sample is compressible
	for _, tc := range []struct {
		name string
		data []byte
		want bool
	}{
		{"random 1 MiB", random(1 << 20), true},
		{"random 8 MiB", random(8 << 20), true},
		{"random below the minimum", random(entropyMinBlob - 1), false},
		{"text", text[:1<<20], false},
		{"zeros", make([]byte, 1<<20), false},
		{"random then text", half, false},
		{"random, text at the end", tail, false},
	} {
		if got := incompressible(tc.data); got != tc.want {
			t.Errorf("%s: incompressible = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEncodeIncompressibleRaw: a random blob skips zstd, is stored raw and
// reads back verified; a compressible one is still compressed.
func TestEncodeIncompressibleRaw(t *testing.T) {
	c, err := newCodec(bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), IDMACBLAKE3, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	rng := rand.New(rand.NewSource(4))
	random := make([]byte, 1<<20)
	rng.Read(random)
	text := bytes.Repeat([]byte("restore points are verified blob by blob\n"), 30000)
	for _, tc := range []struct {
		data []byte
		zstd bool
	}{{random, false}, {text, true}} {
		id := c.id(tc.data)
		enc, _, flags := c.encode(encBufs.get(encBound(len(tc.data))), encBufs.get(encBound(len(tc.data))), BlobData, id, tc.data)
		if got := flags&flagZstd != 0; got != tc.zstd {
			t.Fatalf("%d bytes: zstd flag %v, want %v", len(tc.data), got, tc.zstd)
		}
		e := packEntry{Type: BlobData, Flags: flags, RawLen: uint32(len(tc.data)), StoredLen: uint32(len(enc)), ID: id}
		out, err := c.decode(nil, e, append([]byte(nil), enc...))
		if err != nil || !bytes.Equal(out, tc.data) {
			t.Fatalf("round trip: %v", err)
		}
	}
}

func TestBufList(t *testing.T) {
	l := &bufList{max: 2}
	a := l.get(3 << 20)
	if cap(a) != 3<<20 || len(a) != 0 {
		t.Fatalf("get: len %d cap %d", len(a), cap(a))
	}
	l.put(a)
	if b := l.get(1 << 20); cap(b) != 3<<20 {
		t.Fatalf("a held 3 MiB buffer was not reused for 1 MiB: cap %d", cap(b))
	}
	l.put(make([]byte, 0, 1<<20))
	l.put(make([]byte, 0, 2<<20))
	l.put(make([]byte, 0, 4<<20)) // full: replaces the 1 MiB one
	if len(l.bufs) != 2 || cap(l.get(4<<20)) != 4<<20 || cap(l.get(2<<20)) != 2<<20 {
		t.Fatalf("the list kept the wrong buffers")
	}
	if b := l.get(5 << 20); cap(b) != 5<<20 {
		t.Fatalf("new buffer cap %d, want 5 MiB (a 1 MiB multiple)", cap(b))
	}
}
