package testutil

import (
	"os"
	"testing"
)

// TestMakeExt4: the image has the asked size, holds about the asked data
// and is sparse (mkfs.ext4 -d writes only what it uses).
func TestMakeExt4(t *testing.T) {
	img := MakeExt4(t, t.TempDir(), 64<<20, 8<<20)
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 64<<20 {
		t.Fatalf("image is %d bytes, want 64 MiB", st.Size())
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	// ext4's superblock magic 0xEF53 at offset 1024+56.
	if b[1024+56] != 0x53 || b[1024+57] != 0xEF {
		t.Fatal("no ext4 superblock")
	}
}
