package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vmvault/vmvault/repository/storage"
)

// flipTransport flips one byte of the body of every PUT whose path holds
// "bad" after the client computed its checksum: what a faulty NIC, proxy
// or memory between the client and the server would do.
type flipTransport struct {
	flipped atomic.Int64
}

type flipBody struct {
	io.ReadCloser
	t    *flipTransport
	seen int64
	done bool
}

func (b *flipBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	// Past the first 100 bytes: inside the payload, not a chunk header.
	if !b.done && b.seen+int64(n) > 100 {
		p[100-b.seen] ^= 0x40
		b.done = true
		b.t.flipped.Add(1)
	}
	b.seen += int64(n)
	return n, err
}

func (t *flipTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "bad") && req.Body != nil {
		req.Body = &flipBody{ReadCloser: req.Body, t: t}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestUploadChecksumVerifiedByServer: a byte changed on the wire is
// refused by the server (the CRC32C header of a staged single PUT, the
// trailer of each part of a multipart upload and of a Put), nothing is
// stored, and the same upload intact succeeds.
func TestUploadChecksumVerifiedByServer(t *testing.T) {
	_, srv := NewTestStore(t, "vmvault-crc", "")
	tg, err := ParseTarget(srv.Location("vmvault-crc", "")[len("s3:"):])
	if err != nil {
		t.Fatal(err)
	}
	ft := &flipTransport{}
	ctx := context.Background()
	st, err := New(ctx, tg, Options{StageDir: t.TempDir(), PartSize: 5 << 20, Transport: ft, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{64 << 10, 11<<20 + 5} { // single PUT, multipart
		data := make([]byte, size)
		rand.Read(data)
		before := ft.flipped.Load()
		w, err := st.Create(ctx, "packs/ba/bad")
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		err = w.Commit(ctx, storage.Steps{})
		if ft.flipped.Load() == before {
			t.Fatalf("%d bytes: the transport corrupted nothing", size)
		}
		if err == nil {
			t.Fatalf("%d bytes: an upload corrupted on the wire was accepted", size)
		}
		if _, err := st.Stat(ctx, "packs/ba/bad"); !storage.IsNotExist(err) {
			t.Fatalf("%d bytes: a corrupted upload left an object: %v", size, err)
		}
		before = ft.flipped.Load()
		err = storage.PutBytes(ctx, st, "points/bad", data, storage.Steps{})
		if ft.flipped.Load() == before {
			t.Fatalf("%d bytes Put: the transport corrupted nothing", size)
		}
		if err == nil {
			t.Fatalf("%d bytes Put: an upload corrupted on the wire was accepted", size)
		}
		if _, err := st.Stat(ctx, "points/bad"); !storage.IsNotExist(err) {
			t.Fatalf("%d bytes Put: a corrupted upload left an object: %v", size, err)
		}
		if err := storage.PutBytes(ctx, st, "packs/go/good", data, storage.Steps{}); err != nil {
			t.Fatalf("%d bytes intact: %v", size, err)
		}
		if b, err := storage.ReadAll(ctx, st, "packs/go/good"); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%d bytes read back: %v", size, err)
		}
		st.Delete(ctx, "packs/go/good")
	}
}

// recordTransport keeps the headers of every PUT.
type recordTransport struct {
	mu   sync.Mutex
	puts []http.Header
}

func (t *recordTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		t.mu.Lock()
		h := req.Header.Clone()
		h.Set("X-Test-Path", req.URL.Path)
		t.puts = append(t.puts, h)
		t.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestStagedPackChecksumInHeader: a staged pack that fits one PUT goes
// with its CRC32C (computed while staging, across a spill from memory to
// the file too) in the x-amz-checksum-crc32c header and an unsigned,
// un-chunked body; one that goes multipart keeps the per-part trailer.
// (Before, every upload was aws-chunked with a trailer: the header case
// failed.)
func TestStagedPackChecksumInHeader(t *testing.T) {
	_, srv := NewTestStore(t, "vmvault-crch", "")
	tg, err := ParseTarget(srv.Location("vmvault-crch", "")[len("s3:"):])
	if err != nil {
		t.Fatal(err)
	}
	rt := &recordTransport{}
	ctx := context.Background()
	st, err := New(ctx, tg, Options{StageDir: t.TempDir(), PartSize: 5 << 20, Transport: rt, MemoryBudget: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		size   int
		header bool
	}{
		{"in memory", 100 << 10, true},
		{"spilled to a file", 3<<20 + 7, true},
		{"at the part size", 5 << 20, true},
		{"multipart", 5<<20 + 1, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := make([]byte, tc.size)
			rand.Read(data)
			name := fmt.Sprintf("packs/cc/p%d", i)
			w, err := st.Create(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			// Uneven writes, as the pack writer's buffer flushes.
			for rest := data; len(rest) > 0; {
				k := min(len(rest), 256<<10+13)
				if _, err := w.Write(rest[:k]); err != nil {
					t.Fatal(err)
				}
				rest = rest[k:]
			}
			rt.mu.Lock()
			rt.puts = nil
			rt.mu.Unlock()
			if err := w.Commit(ctx, storage.Steps{}); err != nil {
				t.Fatal(err)
			}
			if b, err := storage.ReadAll(ctx, st, name); err != nil || !bytes.Equal(b, data) {
				t.Fatalf("read back: %v", err)
			}
			var sum [4]byte
			binary.BigEndian.PutUint32(sum[:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
			want := base64.StdEncoding.EncodeToString(sum[:])
			rt.mu.Lock()
			defer rt.mu.Unlock()
			if len(rt.puts) == 0 {
				t.Fatal("no PUT recorded")
			}
			h := rt.puts[0]
			if tc.header {
				if len(rt.puts) != 1 {
					t.Fatalf("%d PUTs, want one", len(rt.puts))
				}
				if got := h.Get("X-Amz-Checksum-Crc32c"); got != want {
					t.Fatalf("x-amz-checksum-crc32c %q, want %q (headers %v)", got, want, h)
				}
				if got := h.Get("X-Amz-Content-Sha256"); got != "UNSIGNED-PAYLOAD" {
					t.Fatalf("X-Amz-Content-Sha256 %q, want UNSIGNED-PAYLOAD", got)
				}
				if tr := h.Get("X-Amz-Trailer"); tr != "" {
					t.Fatalf("a trailer (%s) besides the header", tr)
				}
				return
			}
			for _, h := range rt.puts {
				if !strings.Contains(h.Get("X-Test-Path"), name) {
					continue
				}
				if h.Get("X-Amz-Trailer") == "" && h.Get("X-Amz-Checksum-Crc32c") == "" {
					t.Fatalf("a part went without checksum: %v", h)
				}
			}
		})
	}
}
