package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/vmvault/vmvault/daemon"
	"github.com/vmvault/vmvault/internal/state"
)

func init() {
	register(&command{name: "serve", summary: "run the appliance daemon: REST API, repositories, scheduler (--config FILE)", run: runServe})
}

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (required)")
	var opts daemon.Options
	fs.StringVar(&opts.RestoreState, "restore-state", "", "before starting, install this copy of state.db (a path, or \"newest\": the newest copy that verifies); the file it replaces is kept as state.db.replaced-TIME")
	fs.IntVar(&opts.StateBackups, "state-backups", state.DefaultKeep, "verified copies of state.db to keep in STATE_DIR/state.db.backups")
	fs.DurationVar(&opts.StateBackupEvery, "state-backup-every", state.DefaultEvery, "interval between copies of state.db (one is also taken at every start)")
	importFrom := fs.String("import-config", "", "disaster recovery: before starting, import the jobs, copy jobs and settings saved in this repository (a configured repository's name, or a location: directory or s3:...) into an empty state directory")
	importPass := fs.String("password-file", "", "with --import-config REPO naming a location that is not configured: read its passphrase from this file (default: $VMVAULT_PASSWORD)")
	importPassCmd := fs.String("password-command", "", "with --import-config: run this shell command and take the first line it prints as the passphrase (instead of --password-file)")
	importForce := fs.Bool("force", false, "with --import-config: import even if the state directory already has jobs, copy jobs or settings (jobs of the same id are replaced)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		return fmt.Errorf("%w: --config is required", errUsage)
	}
	if (*importPass != "" || *importPassCmd != "" || *importForce) && *importFrom == "" {
		return fmt.Errorf("%w: --password-file, --password-command and --force go with --import-config", errUsage)
	}
	if opts.StateBackups < 1 || opts.StateBackupEvery < time.Minute {
		return fmt.Errorf("%w: --state-backups must be at least 1 and --state-backup-every at least 1m", errUsage)
	}
	cfg, err := daemon.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *importFrom != "" {
		rf := repoFlags{passwordFile: *importPass, passwordCommand: *importPassCmd}
		pw, err := rf.password(env)
		if err != nil {
			return err
		}
		opts.Import = &daemon.ImportConfig{Repository: *importFrom, Passphrase: pw, Force: *importForce}
	}
	opts.Stdout, opts.Stderr, opts.Getenv, opts.Ready = env.stdout, env.stderr, env.getenv, env.serveReady
	return daemon.Serve(ctx, cfg, opts)
}
