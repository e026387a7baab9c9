package settings

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/state"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// The key file is made once (0600, 32 bytes) and read back; a sealed
// secret opens with it, not with another key, and does not hold the
// secret in clear; a key file of the wrong size is refused, not replaced.
func TestSealer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, KeyFileName)
	s1, err := OpenKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("key file %v %v", fi, err)
	}
	sealed, err := s1.Seal("hunter2-secret")
	if err != nil || strings.Contains(sealed, "hunter2") || !strings.HasPrefix(sealed, "v1:") {
		t.Fatalf("sealed %q %v", sealed, err)
	}
	again, _ := s1.Seal("hunter2-secret")
	if again == sealed {
		t.Fatal("two seals of one secret are equal: the nonce is not random")
	}
	s2, err := OpenKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.Open(sealed); err != nil || got != "hunter2-secret" {
		t.Fatalf("open with the same key file: %q %v", got, err)
	}
	other, _ := OpenKeyFile(filepath.Join(dir, "other.key"))
	if _, err := other.Open(sealed); err == nil {
		t.Fatal("opened with another key")
	}
	for _, bad := range []string{"hunter2", "v1:!!!", "v1:AAAA", sealed[:len(sealed)-4] + "AAAA"} {
		if _, err := s1.Open(bad); err == nil {
			t.Errorf("opened %q", bad)
		}
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenKeyFile(short); err == nil {
		t.Fatal("a 9-byte key file was accepted")
	}
	if b, _ := os.ReadFile(short); string(b) != "too short" {
		t.Fatal("a bad key file was replaced")
	}
	var none *Sealer
	if _, err := none.Seal("x"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("seal without a key: %v", err)
	}
}

// Sections round-trip with their passwords sealed in the database, are
// forgotten by DeleteSection, and repositories are kept in order with no
// duplicate name.
func TestSections(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "state.db"))
	defer db.Close()
	s, _ := OpenKeyFile(filepath.Join(dir, KeyFileName))
	b, err := NewBolt(db, WithSealer(s))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.SMTP(ctx); ok || err != nil {
		t.Fatalf("fresh SMTP: %v %v", ok, err)
	}
	if err := b.PutVCenter(ctx, api.VCenterSettings{URL: "https://vc/sdk", Username: "u", Password: "vc-Secret-1"}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutSMTP(ctx, api.SMTPSettings{Enabled: true, Host: "smtp", Username: "m", Password: "smtp-Secret-2", From: "a@b.c", To: []string{"d@e.f"}, DailyReportAt: "off"}); err != nil {
		t.Fatal(err)
	}
	w := policy.Window{}
	w.Days[6] = []policy.Range{{Start: 60, End: 120}}
	if err := b.PutMaintenance(ctx, api.MaintenanceSettings{Window: &w, FullCheckDays: 5}); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	_ = rawView(t, db, func(b *state.Bucket) error {
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			raw = append(raw, v...)
		}
		return nil
	})
	if strings.Contains(string(raw), "Secret") {
		t.Fatalf("a password in clear: %s", raw)
	}
	vc, ok, err := b.VCenter(ctx)
	if err != nil || !ok || vc.Password != "vc-Secret-1" || vc.Source != api.SourceConsole || !vc.PasswordSet {
		t.Fatalf("vCenter %+v %v %v", vc, ok, err)
	}
	m, ok, err := b.SMTP(ctx)
	if err != nil || !ok || m.Password != "smtp-Secret-2" || m.Host != "smtp" || len(m.To) != 1 {
		t.Fatalf("SMTP %+v %v %v", m, ok, err)
	}
	mt, ok, err := b.Maintenance(ctx)
	if err != nil || !ok || mt.FullCheckDays != 5 || mt.Window == nil || len(mt.Window.Days[6]) != 1 {
		t.Fatalf("maintenance %+v %v %v", mt, ok, err)
	}
	if err := b.DeleteSection(ctx, SectionSMTP); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.SMTP(ctx); ok {
		t.Fatal("SMTP still saved after DeleteSection")
	}
	if err := b.DeleteSection(ctx, "tls"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown section: %v", err)
	}
	// Without the key, a sealed password does not open: an error, not "".
	nokey, _ := NewBolt(db)
	if _, _, err := nokey.VCenter(ctx); err == nil {
		t.Fatal("a sealed password opened without the key")
	}
	if err := nokey.PutVCenter(ctx, api.VCenterSettings{URL: "https://x", Username: "u", Password: "p"}); !errors.Is(err, ErrNoKey) {
		t.Fatalf("saving a password without a key: %v", err)
	}

	for _, r := range []Repo{{Name: "b", Path: "/b"}, {Name: "a", Path: "/a", PassphraseFile: "/s/a.passphrase"}} {
		if err := b.AddRepository(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.AddRepository(ctx, Repo{Name: "a", Path: "/other"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("duplicate name: %v", err)
	}
	list, err := b.Repositories(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "b" || list[1].PassphraseFile != "/s/a.passphrase" {
		t.Fatalf("repositories %+v %v", list, err)
	}
	if _, err := b.RemoveRepository(ctx, "c"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("removing a name never added: %v", err)
	}
	gone, err := b.RemoveRepository(ctx, "a")
	if err != nil || gone.PassphraseFile != "/s/a.passphrase" {
		t.Fatalf("remove a: %+v %v", gone, err)
	}
	if list, err := b.Repositories(ctx); err != nil || len(list) != 1 || list[0].Name != "b" {
		t.Fatalf("repositories after removing a: %+v %v", list, err)
	}
	// The name is free again.
	if err := b.AddRepository(ctx, Repo{Name: "a", Path: "/a"}); err != nil {
		t.Fatal(err)
	}
}
