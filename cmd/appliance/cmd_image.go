package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/backup/imagebackup"
	"github.com/vmvault/vmvault/internal/progress"
)

func init() {
	register(&command{name: "image backup", summary: "back up disk image files (raw or VMDK) as one restore point", run: runImageBackup})
	register(&command{name: "image restore", summary: "write a restored disk to a file (sparse)", run: runImageRestore})
}

func runImageBackup(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "image backup")
	rf := addRepoFlags(fs)
	vm := fs.String("vm", "", "name of the VM the images belong to (required)")
	parentID := fs.String("parent", "", "parent restore point (with --changed: incremental)")
	changedPath := fs.String("changed", "", "JSON list of changed byte ranges since --parent, as CBT reports them")
	asJSON := fs.Bool("json", false, "print one JSON object with the statistics")
	workers := fs.Int("workers", 0, "parallel hashing/compression workers (default: number of CPUs)")
	forceRead := fs.Bool("force-read", false, "read every image even when it is unchanged since the last restore point of this VM")
	images, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *vm == "" {
		return fmt.Errorf("%w: --vm is required", errUsage)
	}
	if len(images) == 0 {
		return fmt.Errorf("%w: give at least one IMAGE", errUsage)
	}
	if (*changedPath != "") && *parentID == "" {
		return fmt.Errorf("%w: --changed needs --parent", errUsage)
	}
	if *changedPath != "" && len(images) != 1 {
		return fmt.Errorf("%w: --changed describes one disk: give exactly one IMAGE", errUsage)
	}
	// Open every image before touching the repository: bad input changes nothing.
	ims, err := imagebackup.Open(images)
	if err != nil {
		return err
	}
	defer ims.Close()
	req := imagebackup.Request{VM: *vm, ForceRead: *forceRead, Workers: *workers, HaveChanged: *changedPath != ""}
	if req.HaveChanged {
		b, err := os.ReadFile(*changedPath)
		if err != nil {
			return fmt.Errorf("read --changed file: %w", err)
		}
		if req.Changed, err = imagebackup.ParseChanged(b, ims.Size(0)); err != nil {
			return fmt.Errorf("--changed %s: %w", *changedPath, err)
		}
	}

	r, err := rf.open(ctx, env)
	if err != nil {
		return err
	}
	defer r.Close()
	if *parentID != "" {
		if req.Parent, err = imagebackup.ResolveParent(ctx, r, *parentID); err != nil {
			if errors.Is(err, imagebackup.ErrPartialParent) {
				return err
			}
			return fmt.Errorf("--parent: %w", err) // err says "restore point ID"
		}
	}

	bar := newProgress(env, *asJSON)
	defer bar.Finish()
	req.Progress, req.ProgressEvery = imageProgress(bar, images), progress.Every
	req.Warn = func(w string) { fmt.Fprintf(env.stderr, "warning: %s\n", w) }
	out, err := imagebackup.Backup(ctx, r, ims, req)
	if err != nil {
		return err
	}
	bar.Finish()
	if *asJSON {
		return writeJSON(env.stdout, out)
	}
	for _, d := range out.Disks {
		fmt.Fprintf(env.stdout, "%s: %s %s, read %s, new %s, stored %s in %.2fs\n", d.Image, d.Mode,
			humanBytes(d.LogicalBytes), humanBytes(d.BytesRead), humanBytes(d.NewBytes), humanBytes(d.StoredBytes), d.Seconds)
	}
	fmt.Fprintln(env.stdout, out.RestorePoint)
	return nil
}

// imageProgress reports each image's backup on bar (nil when there is no bar).
func imageProgress(bar *progress.Bar, images []string) func(int, backup.Progress) {
	if bar == nil {
		return nil
	}
	return func(i int, p backup.Progress) {
		label := "back up " + filepath.Base(images[i])
		if len(images) > 1 {
			label = fmt.Sprintf("back up %d/%d %s", i+1, len(images), filepath.Base(images[i]))
		}
		bar.Update(label, p.Done, p.Size, true)
	}
}

func runImageRestore(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "image restore")
	rf := addRepoFlags(fs)
	pointID := fs.String("restore-point", "", "restore point id or unique prefix (required)")
	disk := fs.Int("disk", 0, "disk index within the restore point")
	force := fs.Bool("force", false, "replace OUT if it exists")
	doSync := fs.Bool("sync", false, "fsync OUT before reporting success (like restic and cp, the default leaves write-back to the kernel)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *pointID == "" {
		return fmt.Errorf("%w: --restore-point is required", errUsage)
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: give exactly one OUT file", errUsage)
	}
	outPath := pos[0]
	outputErr := func(err error) error {
		if errors.Is(err, imagebackup.ErrOutputExists) {
			return fmt.Errorf("%s already exists: give --force to replace it", outPath)
		}
		return err
	}
	// Refuse before opening the repository: a typo in OUT must not destroy a
	// file, and a refusal changes nothing.
	if err := imagebackup.CheckOutput(outPath, *force); err != nil {
		return outputErr(err)
	}
	r, err := rf.open(ctx, env)
	if err != nil {
		return err
	}
	defer r.Close()
	bar := newProgress(env, false)
	defer bar.Finish()
	req := imagebackup.RestoreRequest{Point: *pointID, Disk: *disk, Out: outPath, Force: *force, Sync: *doSync}
	if bar != nil {
		label := fmt.Sprintf("restore disk %d", *disk)
		req.Progress = func(done, total int64) { bar.Update(label, done, total, true) }
	}
	res, err := imagebackup.Restore(ctx, r, req)
	if nd := (*imagebackup.NoDiskError)(nil); errors.As(err, &nd) {
		return fmt.Errorf("%w: restore point %s has %d disk(s); --disk %d does not exist", errUsage, short(nd.Point), nd.Disks, nd.Disk)
	} else if err != nil {
		return outputErr(err)
	}
	bar.Finish()
	fmt.Fprintf(env.stdout, "restored disk %d of %s (%s) to %s in %.2fs\n", res.Disk, short(res.Point), humanBytes(res.Size), outPath, res.Seconds)
	return nil
}
