package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

func TestFilesFind(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, BigDir: 100})
	repo := initRepo(t)
	p1 := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "web01", frtest.Ext4Disk(t, src)))
	os.WriteFile(filepath.Join(src, "etc/nginx/nginx.conf"), []byte("worker_processes 8;\n"), 0o600)
	p2 := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "web01", frtest.Ext4Disk(t, src)))
	cat := t.TempDir()

	var rows []findHitJSON
	raw := mustCLI(t, "files", "find", "--repo", repo, "--catalog", cat, "--json", "*.conf")
	if err := json.Unmarshal([]byte(raw), &rows); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if len(rows) != 2 || rows[0].RestorePoint != p2 || rows[1].RestorePoint != p1 || rows[0].Path != "/etc/nginx/nginx.conf" ||
		rows[0].Size != 20 || rows[1].Size != 6000 || rows[0].VM != "web01" || rows[0].Volume != "d0p1" {
		t.Fatalf("rows %+v", rows)
	}
	// The catalog is kept: the second run indexes nothing.
	r := runCLI(t, "files", "find", "--repo", repo, "--catalog", cat, "--vm", "web01", "file-00009")
	if r.code != 0 || strings.Contains(r.stderr, "indexing") || !strings.Contains(r.stdout, "/big/file-000099") || strings.Count(r.stdout, "file-00009") != 20 {
		t.Fatalf("second run: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "files", "find", "--repo", repo, "--catalog", cat, "--vm", "db01", "--json", "nginx"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("other VM: %d %q", r.code, r.stdout)
	}
	for _, args := range [][]string{{"[x"}, {}, {"a", "b"}, {"--since", "yesterday", "a"}} {
		if r := runCLI(t, append([]string{"files", "find", "--repo", repo, "--catalog", cat}, args...)...); r.code == 0 {
			t.Errorf("%q: exit 0", args)
		}
	}
}
