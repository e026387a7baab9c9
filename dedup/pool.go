package dedup

import (
	"bytes"
	"math/bits"
	"sync"
)

// Chunk buffers are pooled by capacity class: powers of two split in quarters, so a buffer wastes
// at most a quarter of its size and every class has its own sync.Pool.
const (
	minClassShift = 12 // 4 KiB: smallest class
	maxClassShift = 27 // 128 MiB: above maxChunkSize
)

var bufPools [maxClassShift + 1][4]sync.Pool

// classOf returns the capacity class that holds n bytes (n > 0): its pool indexes and capacity.
func classOf(n int) (k, q, size int) {
	if n <= 1<<minClassShift {
		return minClassShift, 3, 1 << minClassShift
	}
	k = bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k
	base := 1 << (k - 1)
	step := base / 4
	q = (n - base + step - 1) / step // 1..4
	return k, q - 1, base + (q)*step
}

// getBuffer returns a buffer of length n from the pool.
func getBuffer(n int) []byte {
	k, q, size := classOf(n)
	if k > maxClassShift {
		return make([]byte, n)
	}
	if p, ok := bufPools[k][q].Get().(*[]byte); ok && cap(*p) == size {
		return (*p)[:n]
	}
	return make([]byte, n, size)
}

// ReleaseBuffer returns a Chunk.Data buffer to the pool. Buffers that did not come from the pool
// (wrong capacity) and nil are ignored; b must not be used afterwards.
func ReleaseBuffer(b []byte) {
	c := cap(b)
	if c == 0 {
		return
	}
	k, q, size := classOf(c)
	if size != c || k > maxClassShift {
		return
	}
	b = b[:c]
	bufPools[k][q].Put(&b)
}

var zeroPage [64 << 10]byte

// isZero reports whether b is all zero; memequal compares whole words, no hashing.
func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
