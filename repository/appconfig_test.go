package repository

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/repository/s3store"
)

func TestApplianceConfigNewestWins(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []bool{true, false} {
		dir := t.TempDir()
		opts := []TestOption{WithDir(dir)}
		if !enc {
			opts = append(opts, WithNoEncryption())
		}
		r := TestRepository(t, opts...)
		if _, _, err := r.LoadApplianceConfig(ctx); !errors.Is(err, ErrNotFound) {
			t.Fatalf("empty repository: %v, want ErrNotFound", err)
		}
		for i := range 5 {
			if err := r.SaveApplianceConfig(ctx, []byte{'v', byte('0' + i)}); err != nil {
				t.Fatal(err)
			}
		}
		b, at, err := r.LoadApplianceConfig(ctx)
		if err != nil || string(b) != "v4" || at.IsZero() {
			t.Fatalf("load: %q %v %v, want v4", b, at, err)
		}
		m, _ := filepath.Glob(filepath.Join(dir, "appconfig", "*"))
		if len(m) != appConfigKeep {
			t.Fatalf("%d saves kept, want %d", len(m), appConfigKeep)
		}
		if enc {
			for _, f := range m {
				if c, _ := os.ReadFile(f); bytes.Contains(c, []byte("v4")) || bytes.Contains(c, []byte("v3")) {
					t.Fatalf("%s holds the configuration in clear", f)
				}
			}
		}
		// A failed save (full disk, crash) leaves the previous one.
		withFailpoints(t, "appconfig.rename=enospc")
		if err := r.SaveApplianceConfig(ctx, []byte("lost")); err == nil {
			t.Fatal("save through the failpoint succeeded")
		}
		withFailpoints(t, "")
		if b, _, _ := r.LoadApplianceConfig(ctx); string(b) != "v4" {
			t.Fatalf("after a failed save: %q, want v4", b)
		}
		// A damaged newest save falls back to the previous one, with a warning.
		slices.Sort(m)
		slices.Reverse(m)
		if err := os.WriteFile(m[0], []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, _, _ := r.LoadApplianceConfig(ctx); string(b) != "v3" {
			t.Fatalf("with the newest damaged: %q, want v3", b)
		}
		if w := strings.Join(r.Warnings(), "\n"); !strings.Contains(w, "appliance configuration") {
			t.Fatalf("no warning: %q", w)
		}
		if err := r.SaveApplianceConfig(ctx, make([]byte, MaxApplianceConfig+1)); err == nil {
			t.Fatal("oversized configuration accepted")
		}
	}
}

// Disaster recovery: the appliance is gone; a fresh one with only the
// bucket's location and the passphrase (an empty cache: the catalog is
// rebuilt from the bucket) lists and reads every point and gets the
// appliance configuration back.
func TestApplianceConfigDisasterRecoveryS3(t *testing.T) {
	ctx := context.Background()
	srv := s3store.StartTestServer(t)
	loc := srv.Location("vmvault-dr", "site-a")
	if err := Init(ctx, loc, []byte(TestPassword), InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 256 << 10, CreateBucket: true}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	img := testDisk(51, 2<<20)
	p := backup(t, r, "web", testTime, img)
	conf := []byte(`{"jobs":[{"name":"nightly","vms":["web"]}]}`)
	if err := r.SaveApplianceConfig(ctx, []byte(`{"jobs":[]}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.SaveApplianceConfig(ctx, conf); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	fresh, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	b, _, err := fresh.LoadApplianceConfig(ctx)
	if err != nil || !bytes.Equal(b, conf) {
		t.Fatalf("fresh appliance reads %q, %v; want %q", b, err, conf)
	}
	pts, err := fresh.List(ctx)
	if err != nil || len(pts) != 1 || pts[0].ID != p.ID {
		t.Fatalf("fresh appliance lists %v, %v", pts, err)
	}
	verifyPoint(t, fresh, p.ID, img)
	if _, err := Open(ctx, loc, []byte("wrong"), OpenOptions{CacheDir: t.TempDir()}); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong passphrase: %v", err)
	}
}
