package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/web/api"
)

// TestInstantStartMigrate: `instant start --migrate-to` runs a backed-up
// VM from its restore point through the lab's NFS mount of the export,
// moves it to production storage and exits; `instant list` shows the
// session done; `instant stop` has nothing left to stop.
func TestInstantStartMigrate(t *testing.T) {
	g := newInstantLab(t, 3)
	l, repo, tp, pt, addr, cli := g.l, g.repo, g.tp, g.pt, g.nfs, g.cli
	const vm = "DC0_H0_VM0"
	dir := filepath.Join(t.TempDir(), "sessions")

	// Usage errors first: nothing is started.
	cli(2, append([]string{"instant", "start", "--repo", repo, "--restore-point", pt, "--dir", dir}, tp...)...) // no --advertise
	cli(2, "instant", "list")

	out := cli(0, append([]string{"instant", "start", "--repo", repo, "--restore-point", pt, "--dir", dir, "--listen", addr, "--portmap", "off",
		"--advertise", "127.0.0.1", "--host", "/DC0/host/DC0_H0/DC0_H0", "--datastore", "LocalDS_0", "--isolated",
		"--migrate-to", "LocalDS_0", "--json"}, tp...)...).stdout
	dec := json.NewDecoder(strings.NewReader(out))
	var running, done api.InstantRecovery
	if err := dec.Decode(&running); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&done); err != nil {
		t.Fatal(err)
	}
	if running.State != "running" || done.State != "done" || done.VM.Name != vm+"-instant" || !done.Isolated {
		t.Fatalf("printed %+v then %+v", running, done)
	}
	if boot, total := l.NASReads(done.VM.MoRef); boot == 0 || total < 4<<20 {
		t.Fatalf("read through NFS: %d at power-on, %d in all", boot, total)
	}
	list := decodeJSON[[]api.InstantRecovery](t, cli(0, "instant", "list", "--dir", dir, "--json").stdout)
	if len(list) != 1 || list[0].ID != done.ID || list[0].State != "done" {
		t.Fatalf("list %+v", list)
	}
	text := cli(0, "instant", "list", "--dir", dir).stdout
	if !strings.Contains(text, done.ID) || !strings.Contains(text, "done") {
		t.Fatalf("list:\n%s", text)
	}
	r := cli(1, append([]string{"instant", "stop", "--repo", repo, "--dir", dir, "--id", done.ID}, tp...)...)
	if !strings.Contains(r.stderr, "nothing to stop") {
		t.Fatalf("stop of a done session: %s", r.stderr)
	}
}
