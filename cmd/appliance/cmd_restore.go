package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/restore"
)

func init() {
	register(&command{name: "restore", summary: "restore a VM: to a new VM, as a rehearsal, or over the original", run: runRestore})
	register(&command{name: "restore-disk", summary: "restore one disk: attach it to a VM or download it (raw or VMDK)", run: runRestoreDisk})
	register(&command{name: "rehearsal cleanup", summary: "remove restore rehearsal VMs", run: runRehearsalCleanup})
}

// progressPrinter reports restore progress: with --progress as lines on
// stderr at most every 2 s per disk (for logs), otherwise as a bar when stderr
// is a terminal and the output is not --json. Call the returned finish before
// printing the result.
func progressPrinter(env *cliEnv, on, asJSON bool) (func(restore.Progress), func()) {
	if !on {
		bar := newProgress(env, asJSON)
		if bar == nil {
			return nil, func() {}
		}
		return func(p restore.Progress) {
			if p.Phase != "disk" {
				bar.Update(p.Phase, 0, 0, false)
				return
			}
			bar.Update(fmt.Sprintf("disk %d", p.Disk), p.Done, p.Size, true)
		}, bar.Finish
	}
	var mu sync.Mutex
	last := map[int]time.Time{}
	start := time.Now()
	return func(p restore.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Phase != "disk" {
			fmt.Fprintf(env.stderr, "%s\n", p.Phase)
			return
		}
		if p.Done < p.Size && time.Since(last[p.Disk]) < 2*time.Second {
			return
		}
		last[p.Disk] = time.Now()
		fmt.Fprintf(env.stderr, "disk %d: %s/%s (%.1f MiB/s overall)\n", p.Disk, humanBytes(p.Done), humanBytes(p.Size),
			float64(p.Done)/time.Since(start).Seconds()/(1<<20))
	}, func() {}
}

func printResult(env *cliEnv, res restore.Result, asJSON bool) error {
	if asJSON {
		if res.Disks == nil {
			res.Disks = []restore.DiskResult{}
		}
		return writeJSON(env.stdout, res)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(env.stderr, "warning: %s\n", w)
	}
	if res.VM.MoRef != "" {
		fmt.Fprintf(env.stdout, "%s: VM %s (%s) from restore point %s\n", res.Mode, res.VM.Name, res.VM.MoRef, short(res.RestorePoint))
	}
	for _, d := range res.Disks {
		fmt.Fprintf(env.stdout, "disk %d (key %d -> %d) %s -> %s: %s written in %.2fs, sha256 %s\n", d.Index, d.SourceKey, d.TargetKey,
			d.Label, d.Target, humanBytes(d.BytesWritten), d.Seconds, d.SHA256)
	}
	fmt.Fprintf(env.stdout, "%s in %.2fs (%.1f MiB/s)", humanBytes(res.BytesWritten), res.Seconds, res.BytesPerSec/(1<<20))
	if res.PoweredOn {
		fmt.Fprint(env.stdout, ", powered on")
	}
	fmt.Fprintln(env.stdout)
	if res.RemoveCommand != "" {
		fmt.Fprintf(env.stdout, "remove it with: %s\n", res.RemoveCommand)
	}
	return nil
}

// parseMap parses repeated SRC=DST flags.
func parseMap(flagName string, list []string) (map[string]string, error) {
	m := map[string]string{}
	for _, s := range list {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%w: --%s %q: want SRC=DST", errUsage, flagName, s)
		}
		m[k] = v
	}
	return m, nil
}

func runRestore(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "restore")
	rf := addRepoFlags(fs)
	vf := addVCenterFlags(fs)
	point := fs.String("restore-point", "", "restore point id or unique prefix (required)")
	name := fs.String("name", "", "name of the new VM (default: the original's, which must be free)")
	dc := fs.String("datacenter", "", "target datacenter (default: the original's)")
	folder := fs.String("folder", "", "target VM folder inventory path")
	host := fs.String("host", "", "target host (name or path)")
	cluster := fs.String("cluster", "", "target cluster (name or path)")
	pool := fs.String("pool", "", "target resource pool (name or path)")
	datastore := fs.String("datastore", "", "datastore for the VM and its disks (default: each disk's original)")
	var netMap, diskDS stringList
	fs.Var(&netMap, "network-map", "SRC=DST: put NICs of network SRC on network DST (repeatable)")
	fs.Var(&diskDS, "disk-datastore", "N=DS: put restore point disk N on datastore DS (repeatable)")
	thin := fs.Bool("thin", false, "make every disk thin (default: keep each disk's provisioning)")
	powerOn := fs.Bool("power-on", false, "power the VM on after the restore")
	overwrite := fs.Bool("overwrite", false, "restore over the original VM's disks (it keeps its identity)")
	powerOff := fs.Bool("power-off", false, "with --overwrite: power the original off if it is on")
	rehearsal := fs.Bool("rehearsal", false, "restore a copy named <vm>-rehearsal-<time> with NICs disconnected")
	transport := fs.String("transport", "put", "how a new VM's disks are written: put (datastore file service, whole file) or nfc (NFC import of streamOptimized VMDK: zeros not sent)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	progress := fs.Bool("progress", false, "print progress to stderr")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if *transport != restore.TransportPUT && *transport != restore.TransportNFC {
		return fmt.Errorf("%w: --transport %q: put or nfc", errUsage, *transport)
	}
	if *overwrite && *transport != restore.TransportPUT {
		return fmt.Errorf("%w: --overwrite writes with put", errUsage)
	}
	if *point == "" {
		return fmt.Errorf("%w: --restore-point is required", errUsage)
	}
	if *overwrite && (*rehearsal || *name != "" || *dc != "" || *folder != "" || *host != "" || *cluster != "" || *pool != "" ||
		*datastore != "" || len(netMap) > 0 || len(diskDS) > 0 || *thin) {
		return fmt.Errorf("%w: --overwrite restores in place; it takes no placement, name, map, --thin or --rehearsal", errUsage)
	}
	if *powerOff && !*overwrite {
		return fmt.Errorf("%w: --power-off only goes with --overwrite", errUsage)
	}
	nm, err := parseMap("network-map", netMap)
	if err != nil {
		return err
	}
	dm, err := parseMap("disk-datastore", diskDS)
	if err != nil {
		return err
	}
	diskDatastores := map[int]string{}
	for k, v := range dm {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: --disk-datastore %s=%s: N is a disk index", errUsage, k, v)
		}
		diskDatastores[n] = v
	}
	if err := rf.validate(); err != nil {
		return err
	}
	cfg, err := vf.config(env)
	if err != nil {
		return err
	}
	r, c, closeAll, err := openRepoAndVCenter(ctx, env, rf, cfg)
	if err != nil {
		return err
	}
	defer closeAll()
	prog, progDone := progressPrinter(env, *progress, *asJSON)
	defer progDone()
	res, err := restore.New(r, c, restore.Options{}).RestoreVM(ctx, restore.VMRequest{
		RestorePoint: *point, Name: *name, Datacenter: *dc, Folder: *folder, Host: *host, Cluster: *cluster, ResourcePool: *pool,
		Datastore: *datastore, DiskDatastores: diskDatastores, NetworkMap: nm, Thin: *thin, PowerOn: *powerOn,
		Overwrite: *overwrite, PowerOff: *powerOff, Rehearsal: *rehearsal, Transport: *transport, Progress: prog,
	})
	progDone()
	if err != nil {
		return err
	}
	return printResult(env, res, *asJSON)
}

func runRestoreDisk(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "restore-disk")
	rf := addRepoFlags(fs)
	vf := addVCenterFlags(fs)
	point := fs.String("restore-point", "", "restore point id or unique prefix (required)")
	disk := fs.Int("disk", -1, "disk index within the restore point (required)")
	attachTo := fs.String("attach-to", "", "add the disk to this VM (name, path or id)")
	datastore := fs.String("datastore", "", "with --attach-to: datastore for the new disk (default: the VM's)")
	controller := fs.String("controller", "", "with --attach-to: TYPE[:BUS] of the VM's controller (scsi, sata, nvme, ide; default: first SCSI)")
	thin := fs.Bool("thin", false, "with --attach-to: thin-provision the new disk")
	output := fs.String("output", "", "write the disk to this file instead")
	format := fs.String("format", "raw", "with --output: raw (sparse) or vmdk (streamOptimized)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	progress := fs.Bool("progress", false, "print progress to stderr")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	case *point == "":
		return fmt.Errorf("%w: --restore-point is required", errUsage)
	case *disk < 0:
		return fmt.Errorf("%w: --disk N is required", errUsage)
	case (*attachTo == "") == (*output == ""):
		return fmt.Errorf("%w: give exactly one of --attach-to and --output", errUsage)
	case *output != "" && (*datastore != "" || *controller != "" || *thin):
		return fmt.Errorf("%w: --datastore, --controller and --thin go with --attach-to", errUsage)
	case *attachTo != "" && *format != "raw":
		return fmt.Errorf("%w: --format goes with --output", errUsage)
	case *format != restore.FormatRaw && *format != restore.FormatVMDK:
		return fmt.Errorf("%w: --format %q: raw or vmdk", errUsage, *format)
	}
	ctlType, bus := *controller, int64(0)
	if t, b, ok := strings.Cut(*controller, ":"); ok {
		ctlType = t
		if bus, err = strconv.ParseInt(b, 10, 32); err != nil || bus < 0 {
			return fmt.Errorf("%w: --controller %q: want TYPE[:BUS]", errUsage, *controller)
		}
	}
	if err := rf.validate(); err != nil {
		return err
	}
	if *output != "" {
		r, err := rf.open(ctx, env)
		if err != nil {
			return err
		}
		defer r.Close()
		prog, progDone := progressPrinter(env, *progress, *asJSON)
		defer progDone()
		res, err := restore.New(r, nil, restore.Options{}).DownloadDisk(ctx, restore.DownloadRequest{RestorePoint: *point, Disk: *disk,
			Output: *output, Format: *format, Progress: prog})
		progDone()
		if err != nil {
			return err
		}
		return printResult(env, res, *asJSON)
	}
	cfg, err := vf.config(env)
	if err != nil {
		return err
	}
	r, c, closeAll, err := openRepoAndVCenter(ctx, env, rf, cfg)
	if err != nil {
		return err
	}
	defer closeAll()
	prog, progDone := progressPrinter(env, *progress, *asJSON)
	defer progDone()
	res, err := restore.New(r, c, restore.Options{}).AttachDisk(ctx, restore.AttachRequest{RestorePoint: *point, Disk: *disk,
		VM: *attachTo, Datastore: *datastore, ControllerType: ctlType, Bus: int32(bus), Thin: *thin, Progress: prog})
	progDone()
	if err != nil {
		return err
	}
	return printResult(env, res, *asJSON)
}

func runRehearsalCleanup(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "rehearsal cleanup")
	vf := addVCenterFlags(fs)
	olderThan := fs.Duration("older-than", 0, "only remove rehearsals created at least this long ago (e.g. 24h)")
	asJSON := fs.Bool("json", false, "print the removed VMs as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if *olderThan < 0 {
		return fmt.Errorf("%w: --older-than must not be negative", errUsage)
	}
	c, err := vf.connect(ctx, env)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	list, cerr := restore.New(nil, c, restore.Options{}).CleanupRehearsals(ctx, *olderThan)
	if *asJSON {
		if list == nil {
			list = []restore.Rehearsal{}
		}
		if err := writeJSON(env.stdout, list); err != nil {
			return err
		}
	} else {
		for _, r := range list {
			status := "removed"
			if !r.Removed {
				status = "NOT removed: " + r.Error
			}
			fmt.Fprintf(env.stdout, "%s (%s), rehearsal of %s from %s, created %s: %s\n", r.VM.Name, r.VM.MoRef, r.Source, short(r.Point),
				r.Created.Format(time.RFC3339), status)
		}
		if len(list) == 0 {
			fmt.Fprintln(env.stdout, "no rehearsal VMs to remove")
		}
	}
	return cerr
}
