package lvm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// buildPV lays out a PV as lvm2 writes one: label in sector 1, PV header,
// one data area, one metadata area at 4 KiB whose text starts at textOff
// in its circular buffer (wrapping past the area's end when it must).
func buildPV(text []byte, textOff int64) []byte {
	const mdaOff, mdaSize = 4096, 16384
	img := make([]byte, mdaOff+mdaSize+4096)
	le := binary.LittleEndian
	l := img[512:]
	copy(l, "LABELONE")
	le.PutUint64(l[8:], 1)
	le.PutUint32(l[20:], 32)
	copy(l[24:], "LVM2 001")
	ph := l[32:]
	copy(ph, "mRSnDqk3mdmuG9O6NewV9ct0HpQHvok1")
	le.PutUint64(ph[32:], uint64(len(img)))
	le.PutUint64(ph[40:], mdaOff+mdaSize) // data area
	// zero terminator at 56, metadata area at 72
	le.PutUint64(ph[72:], mdaOff)
	le.PutUint64(ph[80:], mdaSize)
	h := img[mdaOff:]
	copy(h[4:], mdaMagic)
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[24:], mdaOff)
	le.PutUint64(h[32:], mdaSize)
	le.PutUint64(h[40:], uint64(textOff))
	le.PutUint64(h[48:], uint64(len(text)))
	for i, c := range text {
		p := textOff + int64(i)
		if p >= mdaSize {
			p = p - mdaSize + 512
		}
		h[p] = c
	}
	return img
}

func TestReadLabel(t *testing.T) {
	txt := []byte(seed(t))
	for _, off := range []int64{512, 16384 - 100} { // plain, and wrapped around the buffer's end
		img := buildPV(txt, off)
		pv, err := ReadLabel(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			t.Fatal(err)
		}
		if pv.UUID != "mRSnDqk3mdmuG9O6NewV9ct0HpQHvok1" || !bytes.Equal(pv.Metadata, txt) {
			t.Fatalf("offset %d: uuid %q, %d bytes of metadata", off, pv.UUID, len(pv.Metadata))
		}
	}
	img := buildPV(txt, 512)
	binary.LittleEndian.PutUint64(img[4096+48:], 1<<40)
	if _, err := ReadLabel(bytes.NewReader(img), int64(len(img))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("absurd metadata size: %v", err)
	}
	if _, err := ReadLabel(bytes.NewReader(make([]byte, 4096)), 4096); !errors.Is(err, ErrNoLabel) {
		t.Errorf("no label: %v", err)
	}
}

func FuzzReadLabel(f *testing.F) {
	f.Add(buildPV([]byte("vg { extent_size = 8 }"), 512))
	f.Fuzz(func(t *testing.T, b []byte) {
		pv, err := ReadLabel(bytes.NewReader(b), int64(len(b)))
		if err == nil && pv.Metadata != nil {
			Parse(pv.Metadata)
		}
	})
}
