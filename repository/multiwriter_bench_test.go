package repository

import (
	"context"
	"crypto/rand"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/repository/s3store"
)

// BenchmarkMultiWriterSessionOverhead measures what the several-writers
// protocol adds to one backup session (FORMAT.md §12a): the lease PUT of
// the session's start, the condemned set and index log reads at start and
// again before the commit, the publication, the lease PUT of its end. The
// catalog holds 100,000 synthetic packs and the log is 100,000 entries
// long: neither is listed or read per session (the log is read from the
// writer's position on). Local directory by default; on versitygw with
// VMVAULT_VERSITYGW set and -bench=.../s3.
func BenchmarkMultiWriterSessionOverhead(b *testing.B) {
	for _, backend := range []string{"local", "s3"} {
		b.Run(backend, func(b *testing.B) {
			ctx := context.Background()
			var loc string
			init := InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 1 << 20, MultiWriter: true}
			if backend == "s3" {
				if os.Getenv("VMVAULT_VERSITYGW") == "" {
					b.Skip("set VMVAULT_VERSITYGW to run on S3")
				}
				srv := s3store.StartTestServer(b)
				loc = srv.Location("vmvault-mwbench", "r")
				init.CreateBucket = true
			} else {
				loc = b.TempDir() + "/repo"
			}
			if err := Init(ctx, loc, []byte(TestPassword), init); err != nil {
				b.Fatal(err)
			}
			r := mwOpenLoc(b, loc, "bench")
			// 100,000 packs of one blob each in the catalog.
			const packs = 100_000
			if err := r.db.Update(func(tx *bolt.Tx) error {
				for range packs {
					var pid packID
					var id ID
					rand.Read(pid[:])
					rand.Read(id[:])
					if err := indexPackTx(tx, pid, 4096, []packEntry{{Type: BlobData, RawLen: 4096, StoredLen: 4096, Offset: 8, ID: id}}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			r.mw.seq = packs // as if 100,000 entries had been read
			b.ResetTimer()
			for range b.N {
				s, err := r.NewSession(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.mwBeforeCommit(ctx); err != nil {
					b.Fatal(err)
				}
				s.Abort()
			}
		})
	}
}
