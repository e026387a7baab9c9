package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/web/api"
)

// TestPointVerifyBoot: `point verify --boot` instant-recovers a backed-up
// VM through the lab's NFS mount, passes when its Tools answer and the
// probed port and URL do, fails (exit 1) when Tools never start, and
// leaves no VM or NFS datastore either way; bad flags are usage errors.
func TestPointVerifyBoot(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	repo := initRepo(t)
	env := backupEnv(l.URL().String(), l.Username(), l.Password())
	tp := []string{"--thumbprint", l.Thumbprint()}
	vm := "DC0_H0_VM0"
	if err := l.WriteDisk(vm, 0, 0, randBytes(4, 1<<20)); err != nil {
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
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer web.Close()
	ip, port, _ := net.SplitHostPort(web.Listener.Addr().String())

	base := append([]string{"point", "verify", "--repo", repo, "--restore-point", pt, "--unsafe-no-fsync"}, tp...)
	boot := append(append([]string{}, base...), "--boot", "--listen", addr, "--portmap", "off", "--advertise", "127.0.0.1",
		"--host", "/DC0/host/DC0_H0/DC0_H0", "--datastore", "LocalDS_0")
	cli(2, append(append([]string{}, base...), "--port", "22")...)                    // a probe without --boot
	cli(2, append(append([]string{}, base...), "--boot", "--listen", addr)...)        // no --advertise
	cli(2, append(append([]string{}, boot...), "--port", "0")...)                     // a bad port
	cli(2, append(append([]string{}, boot...), "--url", "ftp://guest/", "--json")...) // a bad URL

	l.SetNFSGuest(&lab.NFSGuest{ToolsRunning: true, IP: ip})
	v := decodeJSON[api.Verification](t, cli(0, append(append([]string{}, boot...), "--port", port, "--url", "http://guest:"+port+"/", "--json")...).stdout)
	if v.Result != "passed" || v.Boot == nil || len(v.Boot.Probes) != 2 || v.Boot.TeardownError != "" {
		t.Fatalf("verification %+v", v)
	}
	l.SetNFSGuest(&lab.NFSGuest{ToolsRunning: false})
	r := cli(1, append(append([]string{}, boot...), "--timeout", "300ms")...)
	if !strings.Contains(r.stdout, "failed: no heartbeat within 300ms") {
		t.Fatalf("no heartbeat:\n%s\n%s", r.stdout, r.stderr)
	}
	if n := l.NASDatastores(); len(n) != 0 {
		t.Fatalf("NFS datastores left: %v", n)
	}
	for _, name := range l.VMNames() {
		if strings.Contains(name, "-verify-") {
			t.Fatalf("VM %s left", name)
		}
	}
}
