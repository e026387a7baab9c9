package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/web/api"
)

// TestPointVerifyBoot: `point verify --boot` instant-recovers a backed-up
// VM through the lab's NFS mount, passes when its Tools answer and the
// probed port and URL do, fails (exit 1) when Tools never start, and
// leaves no VM or NFS datastore either way; bad flags are usage errors.
func TestPointVerifyBoot(t *testing.T) {
	g := newInstantLab(t, 4)
	l, repo, tp, pt, addr, cli := g.l, g.repo, g.tp, g.pt, g.nfs, g.cli
	const vm = "DC0_H0_VM0"
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
