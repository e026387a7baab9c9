package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/backup"
)

func init() {
	register(&command{name: "backup", summary: "back up VMs from vCenter into restore points (CBT incremental)", run: runBackup})
}

// backupJSON is one VM of the documented `backup --json` output.
type backupJSON struct {
	VM           string   `json:"vm"`
	RestorePoint string   `json:"restorePoint"`
	Consistency  string   `json:"consistency"`
	Mode         string   `json:"mode"`
	BytesRead    int64    `json:"bytesRead"`
	NewBytes     int64    `json:"newBytes"`
	Seconds      float64  `json:"seconds"`
	Warnings     []string `json:"warnings"`
	Error        string   `json:"error,omitempty"`
}

func runBackup(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "backup")
	rf := addRepoFlags(fs)
	vf := addVCenterFlags(fs)
	var vms, containers stringList
	fs.Var(&vms, "vm", "VM to back up: name, inventory path or id (repeatable)")
	fs.Var(&containers, "all-in", "back up every VM in this folder, cluster or host inventory path (repeatable)")
	quiesce := fs.String("quiesce", "prefer", "guest quiescing: require (fail without it), prefer (fall back to crash-consistent) or off")
	level := fs.String("quiesce-level", "application", "how deep: application (VSS with writers on Windows) or filesystem (file systems frozen only)")
	vssType := fs.String("vss-type", "copy", "VSS backup type of application quiescing: copy (logs left alone) or full (writers truncate their logs)")
	parallel := fs.Int("parallel", 4, "VMs backed up at once")
	perDatastore := fs.Int("per-datastore", 2, "disks read from one datastore at once")
	activeDisks := fs.Int("max-disks", 4, "disk pipelines running at once over all VMs (bounds memory)")
	workers := fs.Int("workers", 0, "hashing/compression workers per disk (default: number of CPUs)")
	applianceID := fs.String("appliance-id", "", "marks this appliance's snapshots so a crash's leftovers are found (default $VMVAULT_APPLIANCE_ID or \"vmvault\")")
	asJSON := fs.Bool("json", false, "print a JSON array with one object per VM")
	progress := fs.Bool("progress", false, "print progress to stderr")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: unexpected argument %q (VMs are given with --vm)", errUsage, pos[0])
	}
	if len(vms) == 0 && len(containers) == 0 {
		return fmt.Errorf("%w: give at least one --vm or --all-in", errUsage)
	}
	mode, err := backup.ParseQuiesce(*quiesce)
	if err != nil {
		return fmt.Errorf("%w: --quiesce: %v", errUsage, err)
	}
	qlevel, err := backup.ParseLevel(*level)
	if err != nil {
		return fmt.Errorf("%w: --quiesce-level: %v", errUsage, err)
	}
	vss, err := backup.ParseVSSType(*vssType)
	if err != nil {
		return fmt.Errorf("%w: --vss-type: %v", errUsage, err)
	}
	if vss == backup.VSSFull && qlevel != backup.LevelApplication {
		return fmt.Errorf("%w: --vss-type full needs --quiesce-level application", errUsage)
	}
	if *parallel < 1 || *perDatastore < 1 || *activeDisks < 1 {
		return fmt.Errorf("%w: --parallel, --per-datastore and --max-disks must be at least 1", errUsage)
	}
	if err := rf.validate(); err != nil {
		return err
	}
	cfg, err := vf.config(env)
	if err != nil {
		return err
	}
	cfg.ApplianceID = *applianceID
	if cfg.ApplianceID == "" {
		cfg.ApplianceID = env.getenv("VMVAULT_APPLIANCE_ID")
	}
	if cfg.ApplianceID == "" {
		cfg.ApplianceID = "vmvault"
	}

	r, c, closeAll, err := openRepoAndVCenter(ctx, env, rf, cfg)
	if err != nil {
		return err
	}
	defer closeAll()

	targets, err := backup.Targets(ctx, c, vms, containers)
	if err != nil {
		return fmt.Errorf("--all-in: %w", err)
	}
	if len(targets) == 0 {
		return fmt.Errorf("no VM found in %s", strings.Join(containers, ", "))
	}
	var reqs []backup.Request
	bar := newProgress(env, *asJSON || *progress)
	defer bar.Finish()
	type vmBytes struct{ done, size int64 }
	perVM := map[string]vmBytes{}
	var pmu sync.Mutex
	last := map[string]time.Time{}
	for _, v := range targets {
		req := backup.Request{VM: v, Quiesce: mode, Level: qlevel, VSSType: vss}
		if *progress {
			req.Progress = func(p backup.VMProgress) {
				pmu.Lock()
				defer pmu.Unlock()
				if p.Phase == "disks" && time.Since(last[v]) < 2*time.Second {
					return
				}
				last[v] = time.Now()
				fmt.Fprintf(env.stderr, "%s: %s %s/%s read %s new %s %.1f MiB/s ETA %s\n", v, p.Phase, humanBytes(p.Done), humanBytes(p.Size),
					humanBytes(p.BytesRead), humanBytes(p.NewBytes), p.Rate()/(1<<20), p.ETA().Round(time.Second))
			}
		}
		if bar != nil {
			// One bar for all VMs: their bytes summed, as VMs run in parallel.
			req.Progress = func(p backup.VMProgress) {
				pmu.Lock()
				perVM[v] = vmBytes{p.Done, p.Size}
				var done, size int64
				for _, b := range perVM {
					done, size = done+b.done, size+b.size
				}
				n := len(perVM)
				pmu.Unlock()
				label := "back up " + v
				if len(targets) > 1 {
					label = fmt.Sprintf("back up %d VMs", n)
				}
				bar.Update(label, done, size, true)
			}
		}
		reqs = append(reqs, req)
	}
	e := backup.ForClient(c, r, backup.EngineOptions{Workers: *workers, MaxActiveDisks: *activeDisks, PerDatastore: *perDatastore})
	outs := e.BackupVMs(ctx, reqs, *parallel)
	bar.Finish()

	failed := 0
	var js []backupJSON
	for _, o := range outs {
		name := o.Result.VM.Name
		if name == "" {
			name = o.Request.VM
		}
		j := backupJSON{VM: name, RestorePoint: o.Result.RestorePoint, Consistency: o.Result.Consistency, Mode: o.Result.Mode,
			BytesRead: o.Result.BytesRead, NewBytes: o.Result.NewBytes, Seconds: o.Result.Duration.Seconds(), Warnings: o.Result.Warnings}
		if j.Warnings == nil {
			j.Warnings = []string{}
		}
		if o.Err != nil {
			failed++
			j.Error = o.Err.Error()
		}
		js = append(js, j)
		if *asJSON {
			continue
		}
		for _, w := range j.Warnings {
			fmt.Fprintf(env.stderr, "warning: %s: %s\n", name, w)
		}
		if o.Err != nil {
			fmt.Fprintf(env.stdout, "%s FAILED: %v\n", name, o.Err)
			continue
		}
		fmt.Fprintf(env.stdout, "%s %s %s %s, read %s, new %s in %.2fs\n", name, j.RestorePoint, j.Mode, j.Consistency,
			humanBytes(j.BytesRead), humanBytes(j.NewBytes), j.Seconds)
	}
	if *asJSON {
		if err := writeJSON(env.stdout, js); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d VMs failed", failed, len(outs))
	}
	return nil
}
