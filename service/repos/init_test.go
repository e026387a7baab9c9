package repos

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
)

func TestInit(t *testing.T) {
	pol := repository.TestChunker.Polynomial
	bad := uint64(0x12345) // reducible
	cases := []struct {
		name    string
		req     InitRequest
		invalid bool
		want    repository.ChunkerConfig // Polynomial 0: random, only checked non-zero
		pack    int
	}{
		{name: "defaults", req: InitRequest{Algorithm: dedup.AlgorithmCDC},
			want: repository.ChunkerConfig{Algorithm: "cdc", MinSize: dedup.DefaultMinSize, AvgSize: dedup.DefaultAvgSize, MaxSize: dedup.DefaultMaxSize}},
		{name: "chunk size keeps the proportions", req: InitRequest{Algorithm: dedup.AlgorithmCDC, ChunkSize: 64 << 10, Polynomial: &pol, PackSize: 1 << 20},
			want: repository.ChunkerConfig{Algorithm: "cdc", Polynomial: pol, MinSize: 32 << 10, AvgSize: 64 << 10, MaxSize: 512 << 10}, pack: 1 << 20},
		{name: "fixed", req: InitRequest{Algorithm: dedup.AlgorithmFixed, ChunkSize: 1 << 20},
			want: repository.ChunkerConfig{Algorithm: "fixed", MinSize: 512 << 10, AvgSize: 1 << 20, MaxSize: 8 << 20}},
		{name: "reducible polynomial", req: InitRequest{Algorithm: dedup.AlgorithmCDC, Polynomial: &bad}, invalid: true},
		{name: "chunk size not a power of two", req: InitRequest{Algorithm: dedup.AlgorithmCDC, ChunkSize: 100000}, invalid: true},
		{name: "unknown algorithm", req: InitRequest{Algorithm: "rabin"}, invalid: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "repo")
			c.req.KDFTime, c.req.KDFMemoryKiB = 1, 8<<10 // fast
			p, err := Init(ctx, dir, []byte("pw"), c.req)
			if c.invalid {
				if !errors.Is(err, dedup.ErrInvalidParams) {
					t.Fatalf("Init = %v, want dedup.ErrInvalidParams", err)
				}
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Fatalf("an invalid chunker created %s (stat: %v)", dir, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, err := repository.Open(ctx, dir, []byte("pw"), repository.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got := r.Config()
			if got.Chunker != ChunkerConfig(p) {
				t.Errorf("stored chunker %+v, Init returned %+v", got.Chunker, ChunkerConfig(p))
			}
			w := c.want
			if w.Polynomial == 0 {
				if got.Chunker.Polynomial == 0 {
					t.Error("no polynomial chosen")
				}
				w.Polynomial = got.Chunker.Polynomial
			}
			if got.Chunker != w {
				t.Errorf("chunker %+v, want %+v", got.Chunker, w)
			}
			if !got.Encrypted {
				t.Error("not encrypted")
			}
			if c.pack != 0 && got.PackSize != c.pack {
				t.Errorf("pack size %d, want %d", got.PackSize, c.pack)
			}
		})
	}
}
