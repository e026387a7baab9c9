package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore"
)

// benchPoint backs up an ext4 image made from src and opens its volume
// through the repository, as `files` does.
func benchPoint(b *testing.B, src string, sizeMiB int) (*repository.Repository, []guestfs.Disk, string, func()) {
	b.Helper()
	img := filepath.Join(b.TempDir(), "fs.img")
	guestfstest.Ext4(b, img, src, sizeMiB, "-N", "150000")
	t := &testing.T{}
	_ = t
	repo := filepath.Join(b.TempDir(), "repo")
	var out, errb stringsBuilder
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := run(context.Background(), env, []string{"repo", "init", "--repo", repo, "--no-encryption"}); code != 0 {
		b.Fatalf("init: %s", errb.String())
	}
	out.Reset()
	if code := run(context.Background(), env, []string{"image", "backup", "--repo", repo, "--vm", "bench", img}); code != 0 {
		b.Fatalf("backup: %s", errb.String())
	}
	point := lastLine(out.String())
	r, err := repository.Open(context.Background(), repo, nil, repository.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := r.Point(context.Background(), point)
	if err != nil {
		b.Fatal(err)
	}
	disks, readers, err := filerestore.OpenDisks(context.Background(), r, p)
	if err != nil {
		b.Fatal(err)
	}
	os.Remove(img)
	return r, disks, point, func() {
		for _, dr := range readers {
			dr.Close()
		}
		r.Close()
	}
}

type stringsBuilder struct{ b []byte }

func (s *stringsBuilder) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *stringsBuilder) String() string              { return string(s.b) }
func (s *stringsBuilder) Reset()                      { s.b = s.b[:0] }

// BenchmarkFilesList100k lists a directory of 100,000 entries out of a
// restore point (names, sizes, mtimes, modes).
func BenchmarkFilesList100k(b *testing.B) {
	guestfstest.Need(b, false, "mkfs.ext4")
	src := b.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "big"), 0o755); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 100_000; i++ {
		if err := os.WriteFile(filepath.Join(src, "big", fmt.Sprintf("f%06d", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	r, disks, _, done := benchPoint(b, src, 256)
	defer done()
	_ = r
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A fresh Open each time: nothing cached from the last round.
		f, err := guestfs.Open(context.Background(), disks, "d0")
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		ents, err := guestfs.List(f, "big")
		if err != nil || len(ents) != 100_000 {
			b.Fatalf("%d entries, %v", len(ents), err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/list")
		f.Close()
	}
}

// BenchmarkFilesRead1GiB reads a 1 GiB file out of a restore point and,
// for comparison, streams the whole disk as image restore does.
func BenchmarkFilesRead1GiB(b *testing.B) {
	guestfstest.Need(b, false, "mkfs.ext4")
	src := b.TempDir()
	f, err := os.Create(filepath.Join(src, "big.bin"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, 1<<30); err != nil {
		b.Fatal(err)
	}
	f.Close()
	r, disks, point, done := benchPoint(b, src, 1100)
	defer done()
	os.RemoveAll(src)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fsys, err := guestfs.Open(context.Background(), disks, "d0")
		if err != nil {
			b.Fatal(err)
		}
		fl, err := fsys.OpenFile("big.bin")
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		n, err := io.CopyBuffer(io.Discard, io.NewSectionReader(fl, 0, fl.Size()), make([]byte, 4<<20))
		if err != nil || n != 1<<30 {
			b.Fatalf("read %d: %v", n, err)
		}
		secs := time.Since(start).Seconds()
		b.ReportMetric(float64(n)/secs/1e6, "files-MB/s")
		fsys.Close()

		dr, err := r.OpenDisk(context.Background(), point, 0)
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(b.TempDir(), "disk.img"))
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if err := dr.Stream(context.Background(), out, nil); err != nil {
			b.Fatal(err)
		}
		secs = time.Since(start).Seconds()
		b.ReportMetric(float64(dr.Size())/secs/1e6, "image-restore-MB/s")
		out.Close()
		os.Remove(out.Name())
		dr.Close()
	}
}
