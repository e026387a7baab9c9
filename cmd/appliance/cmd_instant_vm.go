package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/instant"
	"github.com/vmvault/vmvault/service/instantvm"
	"github.com/vmvault/vmvault/service/repos"
)

func init() {
	register(&command{name: "instant start", summary: "run a VM straight from a restore point (NFS datastore on a host), until Ctrl-C or --migrate-to", run: runInstantStart})
	register(&command{name: "instant list", summary: "list the instant recovery sessions kept in --dir", run: runInstantList})
	register(&command{name: "instant stop", summary: "stop a session a killed `instant start` left: unregister the VM, unmount, drop the overlay", run: runInstantStop})
}

// instantFlags are the NFS export's and the sessions' flags.
type instantFlags struct {
	dir, listen, portmap, advertise string
	allow                           stringList
	limitMiB                        int64
}

func (f *instantFlags) server() (*instant.Server, error) {
	prefixes, err := instant.ParseAllow(f.allow)
	if err != nil {
		return nil, fmt.Errorf("%w: --%v", errUsage, err)
	}
	pm := f.portmap
	if pm == "off" {
		pm = ""
	}
	return instant.NewServer(instant.ServerOptions{Listen: f.listen, Portmap: pm, Allow: prefixes}), nil
}

func runInstantStart(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "instant start")
	rf := addRepoFlags(fs)
	vf := addVCenterFlags(fs)
	var f instantFlags
	point := fs.String("restore-point", "", "restore point id or unique prefix (required)")
	name := fs.String("name", "", "name of the VM (default: <vm>-instant)")
	dc := fs.String("datacenter", "", "datacenter (default: the only one)")
	host := fs.String("host", "", "host (name or path) that mounts the export and runs the VM (default: the only host)")
	folder := fs.String("folder", "", "VM folder inventory path")
	datastore := fs.String("datastore", "", "production datastore for the VM's own files: configuration, log, swap (default: its first disk's original)")
	var netMap stringList
	fs.Var(&netMap, "network-map", "SRC=DST: put NICs of network SRC on network DST (repeatable)")
	isolated := fs.Bool("isolated", false, "leave every NIC disconnected")
	original := fs.Bool("original", false, "keep the original VM's identity (BIOS UUID, MACs; name and instance UUID when it is gone); the original must be gone or powered off")
	targetVM := fs.String("target-vm", "", "instant disk recovery: attach the point's disks to this existing VM (name, path, moref or instance UUID) instead of creating one")
	var diskIdx stringList
	fs.Var(&diskIdx, "disk", "with --target-vm: the point's disk index to attach (repeatable; default all)")
	noPower := fs.Bool("no-power-on", false, "leave the VM powered off")
	migrate := fs.String("migrate-to", "", "move the running VM to this datastore with Storage vMotion right away, then end the export and exit (the VM stays)")
	fs.StringVar(&f.dir, "dir", "", "directory of the sessions: records, overlays (required; keep it: `instant stop` cleans up after a kill)")
	fs.StringVar(&f.listen, "listen", ":2049", "NFS and MOUNT address HOST:PORT")
	portmapDefault := "off"
	if os.Geteuid() == 0 {
		portmapDefault = ":111"
	}
	fs.StringVar(&f.portmap, "portmap", portmapDefault, `portmapper address HOST:PORT ("off": none; ESXi asks it for MOUNT's port)`)
	fs.StringVar(&f.advertise, "advertise", "", "this machine's address as the host reaches it (the NFS datastore's server; required)")
	fs.Var(&f.allow, "allow", "network (CIDR or address) of the hosts' vmkernel ports that may mount the export; repeatable (default: loopback only)")
	fs.Int64Var(&f.limitMiB, "overlay-limit-mib", instant.DefaultOverlayLimit>>20, "bytes the VM may write per disk, in MiB")
	asJSON := fs.Bool("json", false, "print the session as JSON when it runs (and when it ends)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	case *point == "":
		return fmt.Errorf("%w: --restore-point is required", errUsage)
	case f.dir == "":
		return fmt.Errorf("%w: --dir is required", errUsage)
	case f.advertise == "":
		return fmt.Errorf("%w: --advertise is required (the address the ESXi host mounts)", errUsage)
	case f.limitMiB <= 0:
		return fmt.Errorf("%w: --overlay-limit-mib must be positive", errUsage)
	}
	nm, err := parseMap("network-map", netMap)
	if err != nil {
		return err
	}
	var disks []int
	for _, d := range diskIdx {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: --disk %q: a disk index", errUsage, d)
		}
		disks = append(disks, n)
	}
	if len(disks) > 0 && *targetVM == "" {
		return fmt.Errorf("%w: --disk goes with --target-vm", errUsage)
	}
	srv, err := f.server()
	if err != nil {
		return err
	}
	m, sctx, closeAll, err := openInstant(ctx, env, rf, vf, srv, instantvm.Config{Dir: f.dir, Advertise: f.advertise, OverlayLimit: f.limitMiB << 20}, "repository")
	if err != nil {
		return err
	}
	defer closeAll()
	rec, err := m.Start(ctx, instantvm.StartRequest{Point: *point, Name: *name, Datacenter: *dc, Host: *host, Folder: *folder,
		Datastore: *datastore, NetworkMap: nm, Isolated: *isolated, NoPowerOn: *noPower, TargetVM: *targetVM, Disks: disks, Original: *original}, func(p string) {
		if !*asJSON {
			fmt.Fprintf(env.stderr, "%s\n", p)
		}
	})
	if err != nil {
		return err
	}
	show := func(r instantvm.Record) error {
		if *asJSON {
			return writeJSON(env.stdout, instantvm.DTO(r))
		}
		fmt.Fprintf(env.stdout, "%s: VM %s (%s) runs from restore point %s on datastore %s (%s)\n", r.ID, r.VM.Name, r.VM.MoRef, short(r.Point), r.NFS, r.State)
		return nil
	}
	if err := show(rec); err != nil {
		return err
	}
	if env.instantReady != nil {
		env.instantReady(rec.ID)
	}
	if *migrate != "" {
		done, err := m.Migrate(sctx, rec.ID, *migrate, func(pct int32) {
			if !*asJSON {
				fmt.Fprintf(env.stderr, "migrate %d%%\n", pct)
			}
		})
		if err != nil {
			// Still running from the export: stop rather than leave a VM
			// whose disks vanish when this process ends.
			st, serr := m.Stop(context.WithoutCancel(ctx), rec.ID)
			if serr != nil {
				return fmt.Errorf("%w; stopping the session failed too: %v (run `appliance instant stop --dir %s --id %s`)", err, serr, f.dir, rec.ID)
			}
			_ = st
			return fmt.Errorf("%w (the VM was stopped and unregistered)", err)
		}
		return show(done)
	}
	if !*asJSON {
		fmt.Fprintf(env.stderr, "Ctrl-C stops the VM, unregisters it and drops what it wrote\n")
	}
	<-ctx.Done()
	st, err := m.Stop(context.WithoutCancel(ctx), rec.ID)
	if err != nil {
		return fmt.Errorf("stop %s: %w (run `appliance instant stop --dir %s --id %s`)", rec.ID, err, f.dir, rec.ID)
	}
	return show(st)
}

func runInstantList(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "instant list")
	dir := fs.String("dir", "", "directory of the sessions (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("%w: --dir is required", errUsage)
	}
	recs, err := instantvm.Records(*dir)
	if err != nil {
		return err
	}
	if *asJSON {
		out := []any{}
		for _, r := range recs {
			out = append(out, instantvm.DTO(r))
		}
		return writeJSON(env.stdout, out)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSOURCE VM\tVM\tPOINT\tDATASTORE\tCREATED\tERROR")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.State, r.SourceVM, r.VM.Name, short(r.Point), r.NFS,
			r.Created.Format("2006-01-02 15:04:05"), strings.ReplaceAll(r.Error, "\n", " "))
	}
	return tw.Flush()
}

func runInstantStop(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "instant stop")
	rf := addRepoFlags(fs)
	vf := addVCenterFlags(fs)
	dir := fs.String("dir", "", "directory of the sessions (required)")
	id := fs.String("id", "", "session id (required; see instant list)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *id == "" {
		return fmt.Errorf("%w: --dir and --id are required", errUsage)
	}
	recs, err := instantvm.Records(*dir)
	if err != nil {
		return err
	}
	var rec *instantvm.Record
	for i := range recs {
		if recs[i].ID == *id {
			rec = &recs[i]
		}
	}
	if rec == nil {
		return fmt.Errorf("session %s: %w", *id, instantvm.ErrNotFound)
	}
	if !rec.Active() {
		return fmt.Errorf("session %s is %s: nothing to stop", *id, rec.State)
	}
	// The export is reopened (loopback only: nothing mounts it now) so the
	// manager owns it again, then the session is stopped.
	srv := instant.NewServer(instant.ServerOptions{Listen: "127.0.0.1:0"})
	m, _, closeAll, err := openInstant(ctx, env, rf, vf, srv, instantvm.Config{Dir: *dir, Advertise: "127.0.0.1"}, rec.Repository)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := m.Resume(ctx); err != nil {
		fmt.Fprintf(env.stderr, "warning: %v\n", err)
	}
	st, err := m.Stop(ctx, *id)
	if err != nil {
		if errors.Is(err, instantvm.ErrState) {
			return fmt.Errorf("session %s: %w", *id, err)
		}
		return err
	}
	fmt.Fprintf(env.stdout, "%s: %s\n", st.ID, st.State)
	return nil
}

// openInstant opens the repository (named repoName for the sessions) and
// vCenter, starts srv and returns a session manager over them; closeAll
// ends them in reverse. sctx outlives a cancelled ctx (stopping a session
// after Ctrl-C needs the export and vCenter).
func openInstant(ctx context.Context, env *cliEnv, rf *repoFlags, vf *vcenterFlags, srv *instant.Server, cfg instantvm.Config, repoName string) (*instantvm.Manager, context.Context, func(), error) {
	if err := rf.validate(); err != nil {
		return nil, nil, nil, err
	}
	vcfg, err := vf.config(env)
	if err != nil {
		return nil, nil, nil, err
	}
	r, c, closeRV, err := openRepoAndVCenter(ctx, env, rf, vcfg)
	if err != nil {
		return nil, nil, nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := srv.Start(sctx); err != nil {
		cancel()
		closeRV()
		return nil, nil, nil, err
	}
	cfg.NoSync = rf.noFsync
	m, err := instantvm.New(cfg, c, repos.New(map[string]*repository.Repository{repoName: r}), srv)
	if err != nil {
		srv.Close()
		cancel()
		closeRV()
		return nil, nil, nil, err
	}
	return m, sctx, func() {
		m.Close()
		srv.Close()
		cancel()
		closeRV()
	}, nil
}
