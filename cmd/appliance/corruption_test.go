package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listFiles returns the files under dir, relative to it.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestCorruptPack flips one byte inside a pack that only restore point A
// uses: check --read-data fails and names A (and not B), restoring A fails
// with an error naming the damaged blob, and B still restores.
func TestCorruptPack(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	b := makeRandom(t, dir, 3<<20, 81)
	pb := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "b", b))
	packsB := listFiles(t, filepath.Join(repo, "packs"))
	a := makeRandom(t, dir, 3<<20, 82)
	pa := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "a", a))
	var packsA []string
	for _, p := range listFiles(t, filepath.Join(repo, "packs")) {
		if !slices.Contains(packsB, p) {
			packsA = append(packsA, p)
		}
	}
	if len(packsA) == 0 {
		t.Fatal("backup A wrote no pack of its own")
	}
	// The biggest of A's packs holds its data chunks; flip a byte early in
	// it, inside the first blob, away from the trailing header.
	victim := ""
	var size int64
	for _, p := range packsA {
		st, _ := os.Stat(filepath.Join(repo, "packs", p))
		if st.Size() > size {
			victim, size = p, st.Size()
		}
	}
	path := filepath.Join(repo, "packs", victim)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[100] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, "repo", "check", "--repo", repo, "--read-data")
	if r.code == 0 {
		t.Fatalf("check --read-data passed over a flipped byte:\n%s", r.stdout)
	}
	report := r.stdout + r.stderr
	if !strings.Contains(report, pa) {
		t.Errorf("check does not name the damaged restore point %s:\n%s", pa, report)
	}
	if strings.Contains(report, pb) {
		t.Errorf("check names the intact restore point %s:\n%s", pb, report)
	}
	out := filepath.Join(dir, "a.out")
	r = runCLI(t, "image", "restore", "--repo", repo, "--restore-point", pa, out)
	if r.code == 0 {
		t.Fatal("restore of a damaged restore point succeeded")
	}
	if !strings.Contains(r.stderr, "blob") {
		t.Errorf("restore error does not name the blob: %s", r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("failed restore left %s behind", out)
	}
	outB := filepath.Join(dir, "b.out")
	mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", pb, outB)
	assertSameFile(t, b, outB)
}
