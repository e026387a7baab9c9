package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/vmvault/vmvault/daemon"
	"github.com/vmvault/vmvault/internal/state"
)

func init() {
	register(&command{name: "serve", summary: "run the appliance daemon: REST API, repositories, scheduler (--config FILE)", run: runServe})
}

// serveReady, when set (tests of the command), is called with the
// listening address once the daemon accepts connections.
var serveReady func(addr string)

// shutdownGrace bounds how long running requests and tasks may take to end
// after SIGTERM.
const shutdownGrace = daemon.ShutdownGrace

// The daemon's configuration types, under the names the demo's literal
// configuration uses (cmd_demo.go).
type (
	serveConfig    = daemon.Config
	tlsConfig      = daemon.TLSConfig
	adminConfig    = daemon.AdminConfig
	vcenterConfig  = daemon.VCenterConfig
	repoConfig     = daemon.RepoConfig
	maintenanceCfg = daemon.MaintenanceConfig
)

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (required)")
	var opts serveOptions
	fs.StringVar(&opts.restoreState, "restore-state", "", "before starting, install this copy of state.db (a path, or \"newest\": the newest copy that verifies); the file it replaces is kept as state.db.replaced-TIME")
	fs.IntVar(&opts.stateBackups, "state-backups", state.DefaultKeep, "verified copies of state.db to keep in STATE_DIR/state.db.backups")
	fs.DurationVar(&opts.stateBackupEvery, "state-backup-every", state.DefaultEvery, "interval between copies of state.db (one is also taken at every start)")
	fs.StringVar(&opts.importConfig, "import-config", "", "disaster recovery: before starting, import the jobs, copy jobs and settings saved in this repository (a configured repository's name, or a location: directory or s3:...) into an empty state directory")
	fs.StringVar(&opts.importPasswordFile, "password-file", "", "with --import-config REPO naming a location that is not configured: read its passphrase from this file (default: $VMVAULT_PASSWORD)")
	fs.BoolVar(&opts.importForce, "force", false, "with --import-config: import even if the state directory already has jobs, copy jobs or settings (jobs of the same id are replaced)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		return fmt.Errorf("%w: --config is required", errUsage)
	}
	if (opts.importPasswordFile != "" || opts.importForce) && opts.importConfig == "" {
		return fmt.Errorf("%w: --password-file and --force go with --import-config", errUsage)
	}
	if opts.stateBackups < 1 || opts.stateBackupEvery < time.Minute {
		return fmt.Errorf("%w: --state-backups must be at least 1 and --state-backup-every at least 1m", errUsage)
	}
	cfg, err := daemon.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	return serveWith(ctx, env, cfg, opts)
}

// serveOptions are the daemon's command-line settings beside its
// configuration file (they concern one start, or the state directory).
type serveOptions struct {
	restoreState     string        // a copy of state.db to install first ("newest": the newest good one)
	stateBackups     int           // copies kept; 0: state.DefaultKeep
	stateBackupEvery time.Duration // 0: state.DefaultEvery

	importConfig       string // a repository whose saved configuration is imported first
	importPasswordFile string // its passphrase, when it is not configured
	importForce        bool
}

func newLogger(env *cliEnv, level string) *slog.Logger { return daemon.NewLogger(env.stderr, level) }

// serve runs the daemon on cfg (validated) until ctx ends.
func serve(ctx context.Context, env *cliEnv, cfg *daemon.Config) error {
	return serveWith(ctx, env, cfg, serveOptions{})
}

func serveWith(ctx context.Context, env *cliEnv, cfg *daemon.Config, opts serveOptions) error {
	dopts := daemon.Options{
		Stdout: env.stdout, Stderr: env.stderr, Getenv: env.getenv,
		RestoreState: opts.restoreState, StateBackups: opts.stateBackups, StateBackupEvery: opts.stateBackupEvery,
		Ready: serveReady,
	}
	if opts.importConfig != "" {
		rf := repoFlags{passwordFile: opts.importPasswordFile}
		pw, err := rf.password(env)
		if err != nil {
			return err
		}
		dopts.Import = &daemon.ImportConfig{Repository: opts.importConfig, Passphrase: pw, Force: opts.importForce}
	}
	return daemon.Serve(ctx, cfg, dopts)
}
