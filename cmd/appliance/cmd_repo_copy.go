package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/vmvault/vmvault/repository"
)

// runRepoCopy is `appliance repo copy --from R1 --to R2`: restore points
// are copied with only the blobs R2 lacks (repository.Copy). The source's
// passphrase comes from --password-file or VMVAULT_PASSWORD, the
// target's from --to-password-file or VMVAULT_TO_PASSWORD: never flags.
func runRepoCopy(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo copy")
	from := &repoFlags{command: fs.Name()}
	fs.StringVar(&from.dir, "from", "", "source repository (directory or s3:…; required)")
	fs.StringVar(&from.passwordFile, "password-file", "", "read the source passphrase from this file (default: $VMVAULT_PASSWORD)")
	to := fs.String("to", "", "target repository (directory or s3:…; required)")
	fs.StringVar(&from.passwordCommand, "password-command", "", "run this shell command and take the first line it prints as the source passphrase")
	toPasswordFile := fs.String("to-password-file", "", "read the target passphrase from this file (default: $VMVAULT_TO_PASSWORD)")
	toPasswordCommand := fs.String("to-password-command", "", "run this shell command and take the first line it prints as the target passphrase")
	var points, vms stringList
	fs.Var(&points, "restore-point", "copy this restore point (id or unique prefix; repeatable; default: all)")
	fs.Var(&vms, "vm", "copy the points of this VM (repeatable; default: all)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.BoolVar(&from.noFsync, "unsafe-no-fsync", false, "skip fsync (tests and benchmarks only: a crash may lose data)")
	fs.DurationVar(&from.retryLock, "retry-lock", 0, "wait up to this long for a repository locked by another process (default: fail at once)")
	// The copy reads from the source and writes to the target: the
	// download limit is the source's, the upload limit the target's.
	from.addLimitFlags(fs, "the target (--limit-upload) or from the source (--limit-download)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: repo copy takes no arguments (got %q)", errUsage, pos)
	}
	if from.dir == "" || *to == "" {
		return fmt.Errorf("%w: --from and --to are required", errUsage)
	}
	toPW, err := (&repoFlags{passwordFile: *toPasswordFile, passwordCommand: *toPasswordCommand}).passwordFrom(env, "VMVAULT_TO_PASSWORD")
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	dstOpts, err := (&repoFlags{limitUpload: from.limitUpload}).limits(repository.OpenOptions{
		NoFsync:   from.noFsync,
		RetryLock: from.retryLock,
		Holder:    "CLI (repo copy, target)",
		Logger:    slog.New(slog.NewTextHandler(env.stderr, nil)),
	})
	if err != nil {
		return err
	}
	from.limitUpload = 0 // the source is only read
	src, err := from.open(ctx, env)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	dst, err := repository.Open(ctx, *to, toPW, dstOpts)
	if err != nil {
		if errors.Is(err, repository.ErrWrongPassword) && toPW == nil {
			return fmt.Errorf("target: open repository %s: it is encrypted: give the passphrase with --to-password-file, --to-password-command or VMVAULT_TO_PASSWORD: %w", *to, err)
		}
		return fmt.Errorf("target: %w", err)
	}
	defer dst.Close()
	bar := newProgress(env, *asJSON)
	defer bar.Finish()
	opts := repository.CopyOptions{Points: points, VMs: vms}
	if bar != nil {
		opts.Progress = func(p repository.CopyProgress) {
			bar.Update(fmt.Sprintf("copy %s (%s), %s sent", short(p.Point), p.VM, humanBytes(p.BytesSent)), int64(p.PointsDone), int64(p.PointsTotal), false)
		}
	}
	res, err := repository.Copy(ctx, src, dst, opts)
	bar.Finish()
	if res != nil && !*asJSON {
		printCopy(env, res)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.stdout, res)
	}
	return nil
}

func printCopy(env *cliEnv, res *repository.CopyResult) {
	for _, p := range res.Points {
		if p.Skipped {
			fmt.Fprintf(env.stdout, "%s  %-20s %s  already in the target as %s\n", short(p.Source), p.VM, p.Time.Format("2006-01-02 15:04"), short(p.Target))
			continue
		}
		fmt.Fprintf(env.stdout, "%s  %-20s %s  copied as %s: %d blobs sent (%s), %d already there\n",
			short(p.Source), p.VM, p.Time.Format("2006-01-02 15:04"), short(p.Target), p.BlobsSent, humanBytes(p.BytesSent), p.BlobsReused)
	}
	fmt.Fprintf(env.stdout, "%d points copied, %d already in the target; %d blobs sent (%s), %d verified\n",
		res.PointsCopied, res.PointsSkipped, res.BlobsSent, humanBytes(res.BytesSent), res.BlobsVerified)
}
