package filerestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

// HoldAll holds the browsable volumes and names the others with why: here
// an ext4 partition and a blank disk.
func TestHoldAll(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{})
	blank := filepath.Join(t.TempDir(), "blank.img")
	if err := os.WriteFile(blank, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blank, 8<<20); err != nil {
		t.Fatal(err)
	}
	r := repository.TestRepository(t)
	p := frtest.Backup(t, r, "web01", time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), frtest.Ext4Disk(t, src), blank)
	s, err := New(Config{Source: Single("main", r)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	held, unheld, release, err := s.HoldAll(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if len(held) != 1 || held["d0p1"] == nil {
		t.Fatalf("held %v, want d0p1 only", held)
	}
	if len(unheld) == 0 {
		t.Fatal("the blank disk is not reported")
	}
	for _, u := range unheld {
		if u.Volume.Browsable || u.Reason == "" || u.Volume.ID == "d0p1" {
			t.Errorf("unheld %+v: want a non-browsable volume with a reason", u)
		}
	}
	guestfstest.Compare(t, held["d0p1"], src, guestfstest.CompareOptions{Ignore: func(n string) bool { return n == "lost+found" }})

	if _, _, _, err := s.HoldAll(ctx, "nope"); err == nil {
		t.Error("HoldAll of an unknown point succeeded")
	}
}
