package state

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/state/schema"
)

// testdata/state-v2.db is the golden database of schema 2: the v1 file as
// the code of schema 2 migrated it (testdata/genv2, run at 0796bae).
const fixtureV2 = "testdata/state-v2.db"

// TestMigrateV2Fixture opens the golden v2 file: schema 3 (users' and
// tokens' scopes) rewrites no value, records version 3, keeps the v2 file
// as a copy, and every user and token reads back unscoped.
func TestMigrateV2Fixture(t *testing.T) {
	ctx := context.Background()
	if v := storedSchema(t, dump(t, fixtureV2)); v != 2 {
		t.Fatalf("fixture schema %d, want 2", v)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	copyTo(t, fixtureV2, path)
	before := dump(t, path)
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := d.Schema(ctx); err != nil || v != 3 || schema.Version != 3 {
		t.Fatalf("schema after migration %d %v", v, err)
	}
	as, err := auth.NewBoltStore(d.Bolt())
	if err != nil {
		t.Fatal(err)
	}
	us, err := as.Users(ctx)
	if err != nil || len(us) == 0 {
		t.Fatalf("users after migration %v %v", us, err)
	}
	for _, u := range us {
		if !u.Scope.Empty() {
			t.Errorf("user %s scoped after migration: %+v", u.Username, u.Scope)
		}
	}
	ts, err := as.Tokens(ctx)
	if err != nil || len(ts) == 0 {
		t.Fatalf("tokens after migration %v %v", ts, err)
	}
	for _, tk := range ts {
		if !tk.Scope.Empty() {
			t.Errorf("token %s scoped after migration: %+v", tk.ID, tk.Scope)
		}
	}
	// A scoped record is written and read back by the store.
	u := auth.User{Username: "fin", Role: auth.RoleRestoreOnly, Source: auth.SourceLocal, Scope: auth.Scope{VMs: []string{"fin-*"}}}
	if err := as.PutUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if got, err := as.User(ctx, u.Username); err != nil || !reflect.DeepEqual(got.Scope, u.Scope) {
		t.Fatalf("scoped user read back %+v %v", got, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	after := dump(t, path)
	for name, kvs := range before {
		for k, v := range kvs {
			if name == "meta" {
				continue
			}
			if after[name][k] != v {
				t.Errorf("%s/%q rewritten by the v2 migration", name, k)
			}
		}
	}
	if storedSchema(t, after) != 3 {
		t.Fatal("meta/schema is not 3")
	}
	cs, err := ListCopies(CopiesDir(path), true)
	if err != nil || len(cs) != 1 || !strings.HasSuffix(cs[0].Path, "-v2.db") {
		t.Fatalf("copy of the v2 file: %+v %v", cs, err)
	}
}
