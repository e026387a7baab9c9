package main

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

// files ls and files get say which entries of a hostile image they left
// out and why (issue 24: they vanished without a word).
func TestFilesSkippedHostileNames(t *testing.T) {
	disk := frtest.HostileNamesDisk(t)
	repo := initRepo(t)
	point := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "web01", disk))
	base := []string{"--repo", repo, "--restore-point", point, "--volume", "d0p1"}
	for _, j := range [][]string{nil, {"--json"}} {
		r := runCLI(t, append(append(append([]string{"files", "ls"}, j...), base...), "/h")...)
		if r.code != 0 || !strings.Contains(r.stdout, "ok") || strings.Contains(r.stdout, "zz1") {
			t.Fatalf("ls %v: exit %d, %q, %q", j, r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{`skipped /h "zz1/zz1": the name holds "/"`, `skipped /h "zz2\x00zz2": the name holds a NUL byte`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("ls %v: stderr %q, want %q", j, r.stderr, want)
			}
		}
	}
	for _, out := range []string{"dir", "h.tar"} {
		o := filepath.Join(t.TempDir(), out)
		got := mustCLI(t, append(append([]string{"files", "get"}, base...), "--output", o, "/h")...)
		if !strings.Contains(got, "skipped 2 entries") || !strings.Contains(got, `/h "zz1/zz1"`) || !strings.Contains(got, `/h "zz2\x00zz2"`) {
			t.Errorf("get %s: %q", out, got)
		}
		if out == "h.tar" {
			f, err := os.Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var names []string
			for tr := tar.NewReader(f); ; {
				h, err := tr.Next()
				if err != nil {
					break
				}
				names = append(names, h.Name)
			}
			if len(names) == 0 || names[len(names)-1] != filerestore.SkippedReportName {
				t.Errorf("tar entries %v, want %s last", names, filerestore.SkippedReportName)
			}
		}
	}
}
