package filerestore

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

// hugeClaimXFS makes the audit's image: XFS written by the kernel holding
// huge.bin (4 KiB of data) and hi.txt, then xfs_db -x sets huge.bin's
// core.size to 2^50 (1 PiB), the CRC kept valid. XFS can address that
// much, so it is a legal, absurdly sparse file: it must never be streamed
// as zeros.
func hugeClaimXFS(t *testing.T) string {
	t.Helper()
	guestfstest.Need(t, true, "mkfs.xfs", "xfs_db", "mount")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "huge.bin"), bytes.Repeat([]byte("A"), 4096), 0o644)
	os.WriteFile(filepath.Join(src, "hi.txt"), []byte("hi\n"), 0o644)
	img := filepath.Join(t.TempDir(), "xfs.img")
	guestfstest.Mounted(t, img, 300, src, "xfs", nil, "mkfs.xfs", "-q", "-f")
	guestfstest.Run(t, "xfs_db", "-x", "-c", "path /huge.bin", "-c", "write core.size 1125899906842624", img)
	return img
}

// Audit 2, defect 2: `files get … --output a.tar` wrote 7.6 GB in 12 s
// for a file claiming 1 PiB, the zip ran forever, /content sent 30 GB.
// Now tar keeps the holes (a few KiB of archive that Go's reader sees as
// the 1 PiB file with its data), and zip and whole-file reads are refused
// at once with ErrTooSparse, the point staying usable.
func TestHugeSizeClaim(t *testing.T) {
	img := hugeClaimXFS(t)
	r := repository.TestRepository(t)
	p := frtest.Backup(t, r, "xfs01", time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), img)
	s, err := New(Config{Source: Single("main", r)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vols, err := s.Volumes(ctx, p.ID)
	if err != nil || len(vols) != 1 {
		t.Fatalf("volumes %+v, %v", vols, err)
	}
	vol := vols[0].ID

	var tarball bytes.Buffer
	if err := s.WriteArchive(ctx, &tarball, FormatTar, p.ID, vol, []string{"/"}); err != nil {
		t.Fatalf("tar: %v", err)
	}
	if tarball.Len() > 64<<10 {
		t.Errorf("tar of 4 KiB of data is %d bytes", tarball.Len())
	}
	tr := tar.NewReader(&tarball)
	found := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		found[h.Name] = h.Size
		if h.Name == "huge.bin" {
			head := make([]byte, 8192)
			if _, err := io.ReadFull(tr, head); err != nil || !bytes.Equal(head[:4096], bytes.Repeat([]byte("A"), 4096)) || !bytes.Equal(head[4096:], make([]byte, 4096)) {
				t.Errorf("huge.bin's first 8 KiB: %q…, %v", head[:8], err)
			}
		}
	}
	if found["huge.bin"] != 1<<50 || found["hi.txt"] != 3 {
		t.Errorf("entries %v", found)
	}

	start := time.Now()
	if err := s.WriteArchive(ctx, io.Discard, FormatZip, p.ID, vol, []string{"/huge.bin"}); !errors.Is(err, ErrTooSparse) {
		t.Errorf("zip: %v, want ErrTooSparse", err)
	}
	if _, err := s.OpenFile(ctx, p.ID, vol, "huge.bin"); !errors.Is(err, ErrTooSparse) || !strings.Contains(err.Error(), "tar") {
		t.Errorf("whole-file read: %v, want ErrTooSparse naming tar", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refusals took %v", d)
	}
	f, err := s.OpenFile(ctx, p.ID, vol, "hi.txt")
	if err != nil {
		t.Fatalf("the rest of the volume: %v", err)
	}
	f.Close()
}

// A sparse tar entry is what GNU tar restores: a 64 MiB file with data at
// both ends and in the middle comes back byte for byte and with its holes.
func TestSparseTarGNU(t *testing.T) {
	guestfstest.Need(t, false, "tar")
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{SparseMiB: 64})
	r := repository.TestRepository(t)
	p := frtest.Backup(t, r, "web01", time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), frtest.Ext4Disk(t, src))
	s, err := New(Config{Source: Single("main", r)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var sparseName string
	filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() == 64<<20 {
			sparseName, _ = filepath.Rel(src, p)
		}
		return nil
	})
	if sparseName == "" {
		t.Fatal("no 64 MiB sparse file in the tree")
	}
	var tarball bytes.Buffer
	if err := s.WriteArchive(ctx, &tarball, FormatTar, p.ID, "d0p1", []string{"/" + sparseName}); err != nil {
		t.Fatal(err)
	}
	if tarball.Len() > 1<<20 {
		t.Errorf("tar of a 64 MiB sparse file is %d bytes", tarball.Len())
	}
	out := t.TempDir()
	cmd := exec.Command("tar", "-xf", "-", "-C", out)
	cmd.Stdin = &tarball
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GNU tar: %v: %s", err, b)
	}
	want, _ := os.ReadFile(filepath.Join(src, sparseName))
	gotPath := filepath.Join(out, filepath.Base(sparseName))
	got, err := os.ReadFile(gotPath)
	if err != nil || sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatalf("GNU tar's copy: %d bytes, %v", len(got), err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(gotPath, &st); err != nil || st.Blocks*512 > 8<<20 {
		t.Errorf("GNU tar's copy allocates %d bytes (holes lost), %v", st.Blocks*512, err)
	}
}
