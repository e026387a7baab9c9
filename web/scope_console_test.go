package web

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/browsertest"
)

// The console's users table shows each user's scope, and an
// administrator edits it there (administrators have no scope to edit).
func TestConsoleUserScope(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: not in -short")
	}
	f := newFixture(t, nil)
	f.clk.Set(time.Now())
	ctx := context.Background()
	if _, err := f.srv.cfg.Auth.CreateScopedUser(ctx, "fin", "fin-password", auth.RoleRestoreOnly, auth.Scope{VMs: []string{"fin-*"}}); err != nil {
		t.Fatal(err)
	}
	b := browsertest.New(t, f.http.URL)
	b.Login("admin", testAdminPassword)
	b.Go("#/settings")
	b.WaitText("#users-list td", "fin")
	b.WaitText("#users-list .user-scope", "VMs fin-*")
	if n := b.Count(`[aria-label="Edit the scope of admin"]`); n != 0 {
		t.Error("an administrator's scope is offered for editing")
	}
	b.Click(`[aria-label="Edit the scope of fin"]`)
	b.WaitVisible("#user-scope-folders")
	b.Fill("#user-scope-folders", "/DC0/vm/finance, /DC0/vm/hr")
	b.Fill("#user-scope-vms", "")
	b.Click(`#user-scope button[type=submit]`)
	b.WaitText(".toast", "Scope of fin saved.")
	b.WaitText("#users-list .user-scope", "folders /DC0/vm/finance, /DC0/vm/hr")
	// A token limited to some VMs.
	b.Fill("#token-name", "fin-ci")
	b.Select("#token-role", "restore-only")
	b.Fill("#token-scope-vms", "fin-*, hr-*")
	b.Click(`#tokens-create button[type=submit]`)
	b.WaitVisible("#token-secret")
	b.WaitText("#tokens-list .token-scope", "VMs fin-*, hr-*")

	u, err := f.srv.cfg.Auth.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range u {
		if x.Username == "fin" && !reflect.DeepEqual(x.Scope, auth.Scope{Folders: []string{"/DC0/vm/finance", "/DC0/vm/hr"}}) {
			t.Fatalf("scope after the edit: %+v", x.Scope)
		}
	}
}
