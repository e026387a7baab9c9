package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/instant"
	"github.com/vmvault/vmvault/service/instantvm"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/service/verify"
)

// bootVerifyFlags are `point verify --boot`'s: where the VM runs, the
// probes, and the NFS export instant recovery serves it from.
type bootVerifyFlags struct {
	boot, walk                   bool
	vf                           *vcenterFlags
	nfs                          instantFlags
	host, dc, datastore, network string
	folder, url, results         string
	ports                        stringList
	timeout, probeTimeout        time.Duration
	fs                           *flag.FlagSet
}

func addBootVerifyFlags(fs *flag.FlagSet) *bootVerifyFlags {
	b := &bootVerifyFlags{fs: fs}
	fs.BoolVar(&b.boot, "boot", false, "boot the point: instant-recover it in isolation, power it on, wait for the VMware Tools heartbeat, probe, tear it down (needs the vCenter and NFS flags)")
	fs.BoolVar(&b.walk, "walk", false, "with --boot: walk the file systems first as well (mode both)")
	b.vf = addVCenterFlags(fs)
	fs.StringVar(&b.host, "host", "", "host (name or path) that mounts the export and runs the VM (default: the only host)")
	fs.StringVar(&b.dc, "datacenter", "", "datacenter (default: the only one)")
	fs.StringVar(&b.datastore, "datastore", "", "datastore for the VM's own files (default: its first disk's original)")
	fs.StringVar(&b.folder, "folder", "", "VM folder inventory path")
	fs.StringVar(&b.network, "network", "", "put every NIC on this isolated port group (default: every NIC disconnected)")
	fs.Var(&b.ports, "port", "TCP port that must accept a connection at the guest's address (repeatable)")
	fs.StringVar(&b.url, "url", "", "URL that must answer 2xx; its host is replaced by the guest's address (http://guest:8080/health)")
	fs.DurationVar(&b.timeout, "timeout", verification.DefaultTimeout, "how long to wait for the heartbeat")
	fs.DurationVar(&b.probeTimeout, "probe-timeout", verification.DefaultProbeTimeout, "how long the probes are retried once the heartbeat is green")
	fs.StringVar(&b.results, "results", "", "directory to record the result in (as the daemon's state_dir/verification); default: not recorded")
	fs.StringVar(&b.nfs.dir, "dir", "", "directory of the instant recovery session (default: a temporary one, removed at the end)")
	fs.StringVar(&b.nfs.listen, "listen", ":2049", "NFS and MOUNT address HOST:PORT")
	pm := "off"
	if os.Geteuid() == 0 {
		pm = ":111"
	}
	fs.StringVar(&b.nfs.portmap, "portmap", pm, `portmapper address HOST:PORT ("off": none)`)
	fs.StringVar(&b.nfs.advertise, "advertise", "", "this machine's address as the host reaches it (required with --boot)")
	fs.Var(&b.nfs.allow, "allow", "network (CIDR or address) of the hosts' vmkernel ports that may mount the export; repeatable (default: loopback only)")
	return b
}

// used says whether a boot-only flag was given.
func (b *bootVerifyFlags) used() bool {
	set := false
	b.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "walk", "host", "datacenter", "datastore", "folder", "network", "port", "url", "timeout", "probe-timeout", "dir", "listen", "portmap", "advertise", "allow":
			set = true
		}
	})
	return set
}

func runPointVerifyBoot(ctx context.Context, env *cliEnv, rf *repoFlags, b *bootVerifyFlags, point string, readData, asJSON bool) error {
	if b.nfs.advertise == "" {
		return fmt.Errorf("%w: --advertise is required with --boot (the address the ESXi host mounts)", errUsage)
	}
	var ports []int
	for _, p := range b.ports {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: --port %q: want 1-65535", errUsage, p)
		}
		ports = append(ports, n)
	}
	if b.timeout <= 0 || b.probeTimeout <= 0 {
		return fmt.Errorf("%w: --timeout and --probe-timeout must be positive", errUsage)
	}
	if err := rf.validate(); err != nil {
		return err
	}
	cfg, err := b.vf.config(env)
	if err != nil {
		return err
	}
	srv, err := b.nfs.server()
	if err != nil {
		return err
	}
	dir := b.nfs.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "vmvault-verify-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	results := b.results
	if results == "" {
		if results, err = os.MkdirTemp("", "vmvault-verify-results-"); err != nil {
			return err
		}
		defer os.RemoveAll(results)
	}
	r, c, closeAll, err := openRepoAndVCenter(ctx, env, rf, cfg)
	if err != nil {
		return err
	}
	defer closeAll()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if err := srv.Start(sctx); err != nil {
		return err
	}
	defer srv.Close()
	rs := repos.New(map[string]*repository.Repository{"repository": r})
	ivm, err := instantvm.New(instantvm.Config{Dir: dir, Advertise: b.nfs.advertise, OverlayLimit: instant.DefaultOverlayLimit, NoSync: rf.noFsync}, c, rs, srv)
	if err != nil {
		return err
	}
	defer ivm.Close()
	walker, err := verify.New(filerestore.Single("repository", r), nil)
	if err != nil {
		return err
	}
	m, err := verification.New(verification.Config{Dir: results, Points: rs, Walker: walker, Boot: ivm, Guest: c, NoSync: rf.noFsync})
	if err != nil {
		return err
	}
	mode := verification.ModeBoot
	if b.walk {
		mode = verification.ModeBoth
	}
	res, err := m.Verify(ctx, verification.Request{Point: point, Mode: mode, Network: b.network, Datacenter: b.dc, Host: b.host,
		Folder: b.folder, Datastore: b.datastore, Ports: ports, URL: b.url, Timeout: b.timeout, ProbeTimeout: b.probeTimeout,
		ReadData: readData}, func(phase string) {
		if !asJSON {
			fmt.Fprintf(env.stderr, "%s\n", phase)
		}
	})
	if res.ID == "" {
		if errors.Is(err, verification.ErrInvalid) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	}
	if asJSON {
		if werr := writeJSON(env.stdout, verification.DTO(res)); werr != nil {
			return werr
		}
	} else {
		bt := res.Boot
		fmt.Fprintf(env.stdout, "VM %s: powered on after %.1fs, heartbeat after %.1fs", bt.VMName, bt.PoweredOnSeconds, bt.HeartbeatSeconds)
		if len(bt.Probes) > 0 {
			fmt.Fprintf(env.stdout, ", probes after %.1fs", bt.ProbesSeconds)
		}
		fmt.Fprintln(env.stdout)
		for _, p := range bt.Probes {
			st := "passed"
			if !p.Passed {
				st = "failed: " + sanitize(p.Error)
			}
			fmt.Fprintf(env.stdout, "  %s %s: %s (%d attempts)\n", p.Kind, p.Target, st, p.Attempts)
		}
		fmt.Fprintf(env.stdout, "%s: %s\n", res.Result, sanitize(res.Reason))
	}
	if err != nil {
		return err // the teardown failed: the VM may be left
	}
	if !res.Passed() {
		return fmt.Errorf("%w: restore point %s: %s", verify.ErrFailed, short(res.Point), sanitize(res.Reason))
	}
	return nil
}
