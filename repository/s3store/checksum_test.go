package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"strings"
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
// refused by the server (the CRC32C trailer of a single PUT, of each part
// of a multipart upload), nothing is stored, and the same upload intact
// succeeds.
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
		if err := storage.PutBytes(ctx, st, "packs/go/good", data, storage.Steps{}); err != nil {
			t.Fatalf("%d bytes intact: %v", size, err)
		}
		if b, err := storage.ReadAll(ctx, st, "packs/go/good"); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%d bytes read back: %v", size, err)
		}
		st.Delete(ctx, "packs/go/good")
	}
}
