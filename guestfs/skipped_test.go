package guestfs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// A FAT long name holding a "/" (patched into the UTF-16 name mcopy wrote;
// the LFN checksum covers the short name only) is left out of ReadDir,
// and ReadDirSkipped and ListSkipped say so (issue 24: FAT dropped it in
// the driver, without a word).
func TestFATSlashNameReported(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.vfat", "mcopy")
	src := t.TempDir()
	for _, n := range []string{"ok.txt", "longnameQwithslash.txt"} {
		if err := os.WriteFile(filepath.Join(src, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(t.TempDir(), "fat.img")
	guestfstest.FAT(t, img, 12, 8<<10, src)
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	// "Q" and its neighbours in UTF-16LE, in one LFN slot.
	from, to := []byte("e\x00Q\x00w\x00"), []byte("e\x00/\x00w\x00")
	if n := bytes.Count(b, from); n != 1 {
		t.Fatalf("the long name's bytes found %d times", n)
	}
	copy(b[bytes.Index(b, from):], to)
	if err := os.WriteFile(img, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f := openOnly(t, []guestfs.Disk{diskOf(t, img)}, guestfs.KindVFAT)
	ents, sk, err := guestfs.ReadDirSkipped(f, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "ok.txt" {
		t.Fatalf("entries %v", ents)
	}
	if len(sk) != 1 || sk[0].Name != "longname/withslash.txt" || sk[0].Dir != "/" || sk[0].Reason == "" {
		t.Fatalf("skipped %+v", sk)
	}
	list, sk, err := guestfs.ListSkipped(f, ".")
	if err != nil || len(list) != 1 || len(sk) != 1 {
		t.Fatalf("ListSkipped: %v %+v %v", list, sk, err)
	}
}
