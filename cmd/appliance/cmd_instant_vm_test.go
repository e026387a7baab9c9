package main

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/web/api"
)

// TestInstantStartMigrate: `instant start --migrate-to` runs a backed-up
// VM from its restore point through the lab's NFS mount of the export,
// moves it to production storage and exits; `instant list` shows the
// session done; `instant stop` has nothing left to stop.
func TestInstantStartMigrate(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	repo := initRepo(t)
	env := backupEnv(l.URL().String(), l.Username(), l.Password())
	tp := []string{"--thumbprint", l.Thumbprint()}
	vm := "DC0_H0_VM0"
	if err := l.WriteDisk(vm, 0, 0, randBytes(3, 1<<20)); err != nil {
		t.Fatal(err)
	}
	cli := func(want int, args ...string) cliResult {
		t.Helper()
		r := runCLIEnv(t, env, args...)
		if r.code != want {
			t.Fatalf("appliance %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	bj := decodeJSON[[]backupJSON](t, cli(0, append([]string{"backup", "--repo", repo, "--vm", vm, "--json", "--unsafe-no-fsync"}, tp...)...).stdout)
	pt := bj[0].RestorePoint
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l.SetNFSServer(addr)
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
