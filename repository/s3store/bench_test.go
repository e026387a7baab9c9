package s3store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/vmvault/vmvault/repository/storage"
)

func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkUploadChecksum measures what the way an upload carries its
// checksum costs the server (versitygw's CPU, /proc) and this process:
// 8 packs of 32 MiB of random bytes per round, VMVAULT_BENCH_RUNS rounds
// (default 3) alternating the ways (each round in another order),
// medians per 256 MiB.
//
//   - store: Create, Write, Commit (what the repository does: CRC32C
//     computed while staging, sent in the x-amz-checksum-crc32c header);
//   - crc32c-trailer, crc64nvme-trailer: minio-go computes the checksum as
//     it sends and appends it in a trailer (an aws-chunked body);
//   - crc64nvme-header: the CRC64NVME computed beforehand, in a header.
//
// VMVAULT_BENCH_GW_FLAGS passes flags to the server (e.g.
// --data-integrity-etag). Run with -benchtime 1x:
//
//	go test -run '^$' -bench UploadChecksum -benchtime 1x ./repository/s3store/
func BenchmarkUploadChecksum(b *testing.B) {
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("VMVAULT_BENCH_RUNS")); err == nil && v > 0 {
		rounds = v
	}
	srv := StartTestServerWith(b, strings.Fields(os.Getenv("VMVAULT_BENCH_GW_FLAGS"))...)
	tg, err := ParseTarget(srv.Location("vmvault-bench", "")[len("s3:"):])
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	st, err := New(ctx, tg, Options{StageDir: b.TempDir(), CreateBucket: true})
	if err != nil {
		b.Fatal(err)
	}
	const packs, size = 8, 32 << 20
	data := make([]byte, size)
	rand.Read(data)
	src := filepath.Join(b.TempDir(), "pack")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		b.Fatal(err)
	}
	sum := func(t minio.ChecksumType) string {
		h := t.Hasher()
		h.Write(data)
		return base64.StdEncoding.EncodeToString(h.Sum(nil))
	}
	crc64 := sum(minio.ChecksumCRC64NVME)
	// put uploads the staged copy of data the way named.
	put := func(way, name string) error {
		if way == "store" {
			w, err := st.Create(ctx, name)
			if err != nil {
				return err
			}
			for rest := data; len(rest) > 0; rest = rest[min(len(rest), 256<<10):] {
				if _, err := w.Write(rest[:min(len(rest), 256<<10)]); err != nil {
					return err
				}
			}
			return w.Commit(ctx, storage.Steps{})
		}
		f, err := os.Open(src) // as Commit sends its staging file
		if err != nil {
			return err
		}
		defer f.Close()
		opts := minio.PutObjectOptions{DisableContentSha256: true, PartSize: st.partSize, ContentType: "application/octet-stream"}
		switch way {
		case "crc32c-trailer":
			opts.Checksum = minio.ChecksumFullObjectCRC32C
		case "crc64nvme-trailer":
			opts.Checksum = minio.ChecksumCRC64NVME
		case "crc64nvme-header":
			opts.UserMetadata = map[string]string{"x-amz-checksum-crc64nvme": crc64}
		}
		_, err = st.c.PutObject(ctx, st.t.Bucket, name, f, size, opts)
		return err
	}
	ways := []string{"store", "crc32c-trailer", "crc64nvme-trailer", "crc64nvme-header"}
	gw := map[string][]float64{}
	self := map[string][]float64{}
	for range b.N {
		for r := range rounds {
			// Each round starts one way later: how much a way costs the
			// server depends on which one ran before it (its buffers, the
			// page cache), measured up to ±0.4 s.
			for k := range ways {
				way := ways[(r+k)%len(ways)]
				g0, s0 := srv.CPUSeconds(b), selfCPU()
				for i := range packs {
					if err := put(way, fmt.Sprintf("packs/%s/%d-%d", way, r, i)); err != nil {
						b.Fatalf("%s: %v", way, err)
					}
				}
				gw[way] = append(gw[way], srv.CPUSeconds(b)-g0)
				self[way] = append(self[way], selfCPU()-s0)
				for i := range packs { // the server's disk and page cache stay as they were
					if err := st.Delete(ctx, fmt.Sprintf("packs/%s/%d-%d", way, r, i)); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	med := func(v []float64) float64 {
		v = append([]float64(nil), v...)
		sort.Float64s(v)
		return v[len(v)/2]
	}
	for _, way := range ways {
		b.Logf("%s: gateway %.2f, client %.2f CPU-s per round", way, gw[way], self[way])
		b.ReportMetric(med(gw[way]), way+"-gateway-cpu-s")
		b.ReportMetric(med(self[way]), way+"-client-cpu-s")
	}
}
