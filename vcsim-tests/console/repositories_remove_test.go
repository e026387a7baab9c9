package console

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRepositoryRemove: a repository added to the demo is removed from its
// page by an administrator after a confirmation that says its data is
// kept; the page says so, the list no longer shows it, its files stay and
// it opens again (mode open). It is removed again at the end, so the demo
// keeps its one repository for the other tests.
func TestRepositoryRemove(t *testing.T) {
	b := signedIn(t)
	dir := filepath.Join(t.TempDir(), "spare")
	create := map[string]any{"mode": "create", "name": "spare", "path": dir, "passphrase": "spare-passphrase-1"}
	if st := p2API(t, b, "POST", "/repositories", create, nil); st != 201 {
		t.Fatalf("create the spare repository: %d", st)
	}
	t.Cleanup(func() { p2API(t, b, "DELETE", "/repositories/spare", nil, nil) })

	b.Go("#/repositories/spare")
	pageTitle(t, b, "Repository: spare")
	b.WaitText("#remove-info", "Its data is not deleted")
	b.Click("#remove-repository")
	b.WaitVisible("#confirm[open]")
	b.WaitText("#confirm-message", "Its data is kept")
	b.WaitText("#confirm-message", dir)
	b.Click("#confirm-ok")
	b.WaitText("#remove-done", "data is kept")

	b.Go("#/repositories")
	b.WaitVisible("#repositories-table")
	b.WaitJS(`!document.querySelector('#repositories-table tr[data-repository="spare"]')`, "the list without the removed repository")
	if _, err := os.Stat(filepath.Join(dir, "config")); err != nil {
		t.Fatalf("the removed repository's files: %v", err)
	}
	open := map[string]any{"mode": "open", "name": "spare", "path": dir, "passphrase": "spare-passphrase-1"}
	if st := p2API(t, b, "POST", "/repositories", open, nil); st != 201 {
		t.Fatalf("open the removed repository again: %d", st)
	}
	b.CheckConsole()
}
