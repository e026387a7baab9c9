package main

import (
	"net"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// instantLab is a lab with DC0_H0_VM0 backed up (its first MiB written
// from seed) into a new repository, and a free loopback address the lab's
// hosts mount NFS exports from: what the instant recovery and boot
// verification commands need.
type instantLab struct {
	l    *lab.Lab
	repo string
	tp   []string // vCenter flags
	pt   string   // the restore point
	nfs  string   // the NFS listen address
	cli  func(want int, args ...string) cliResult
}

func newInstantLab(t *testing.T, seed uint64) instantLab {
	t.Helper()
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	repo := initRepo(t)
	env := backupEnv(l.URL().String(), l.Username(), l.Password())
	tp := []string{"--thumbprint", l.Thumbprint()}
	const vm = "DC0_H0_VM0"
	if err := l.WriteDisk(vm, 0, 0, randBytes(seed, 1<<20)); err != nil {
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l.SetNFSServer(addr)
	return instantLab{l: l, repo: repo, tp: tp, pt: bj[0].RestorePoint, nfs: addr, cli: cli}
}
