package filerestore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

// TestHostileNamesReported: on a real ext4 image with a "/" and a NUL in
// names, the listing, a restore to a directory and an archive leave those
// entries out and say so (issue 24: they were dropped, or read from the
// wrong path, without a word).
func TestHostileNamesReported(t *testing.T) {
	disk := frtest.HostileNamesDisk(t)
	r := repository.TestRepository(t)
	p := frtest.Backup(t, r, "web01", time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), disk)
	s, err := New(Config{Source: Single("main", r)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	want := map[string]bool{`"zz1/zz1"`: true, `"zz2\x00zz2"`: true}
	check := func(what string, sk []guestfs.Skipped) {
		t.Helper()
		got := map[string]bool{}
		for _, x := range sk {
			if x.Dir != "/h" || x.Reason == "" {
				t.Errorf("%s: skipped %+v", what, x)
			}
			got[strconv.Quote(x.Name)] = true
		}
		if len(got) != len(want) || !got[`"zz1/zz1"`] || !got[`"zz2\x00zz2"`] {
			t.Errorf("%s: skipped %v, want %v", what, got, want)
		}
	}

	ents, total, sk, err := s.ReadDir(ctx, p.ID, "d0p1", "/h", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != 1 || len(ents) != 1 || ents[0].Name != "ok" {
		t.Fatalf("listing %v (total %d), want only ok", ents, total)
	}
	check("ReadDir", sk)
	if _, sk, err = s.List(ctx, p.ID, "d0p1", "/h"); err != nil {
		t.Fatal(err)
	}
	check("List", sk)

	out := filepath.Join(t.TempDir(), "out")
	st, err := s.Extract(ctx, p.ID, "d0p1", []string{"/h"}, out)
	if err != nil {
		t.Fatal(err)
	}
	check("Extract", st.Skipped)
	if des, _ := os.ReadDir(filepath.Join(out, "h")); len(des) != 1 || des[0].Name() != "ok" {
		t.Errorf("restored %v, want only ok", des)
	}

	var buf bytes.Buffer
	if err := s.WriteArchive(ctx, &buf, FormatTar, p.ID, "d0p1", []string{"/h"}); err != nil {
		t.Fatal(err)
	}
	x := readTar(t, buf.Bytes())
	rep := string(x.files[SkippedReportName])
	if string(x.files["h/ok"]) != "fine" || !bytes.Contains([]byte(rep), []byte("/h\t\"zz1/zz1\"\t")) || !bytes.Contains([]byte(rep), []byte(`"zz2\x00zz2"`)) {
		t.Errorf("archive files %v, report %q", keys(x.files, ""), rep)
	}
}
