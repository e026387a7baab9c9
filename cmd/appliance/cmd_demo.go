package main

import (
	"context"
	"fmt"
	"net"

	"github.com/vmvault/vmvault/daemon/demo"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

func init() {
	register(&command{name: "demo", summary: "try vmvault with no configuration: a lab vCenter with sample VMs, a repository, a job, the console (--listen, --state, --vms)", run: runDemo})
}

// demoHooks, set by tests in cliEnv, see the lab once the sample VMs
// exist, and again after the daemon stopped, before the lab closes.
type demoHooks struct {
	started func(l *lab.Lab, samples []lab.Sample)
	stopped func(l *lab.Lab)
}

func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "demo")
	o := demo.Options{Stdout: env.stdout, Stderr: env.stderr, Getenv: env.getenv, Started: env.demo.started, Stopped: env.demo.stopped}
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address of the API and console (plain HTTP, loopback only; port 0 picks a free port)")
	fs.StringVar(&o.StateDir, "state", "", "keep the demo's repository and database in `DIR` (default: a temporary directory removed on exit)")
	fs.IntVar(&o.VMs, "vms", 3, "number of sample VMs (web-01, db-01, files-01, then app-01 on GPT+LVM+XFS and win-01 on GPT+NTFS, which need root, web-02, ...)")
	fs.DurationVar(&o.Churn, "churn", demo.DefaultChurn, "how often each sample VM writes a little data (0 disables)")
	fs.BoolVar(&o.Instant, "instant", true, "serve instant VM recovery (the NFS export on a free loopback port, mounted by the lab's hosts)")
	diskMiB := fs.Int("disk-mib", 64, "size of each sample VM's disk in MiB")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, pos)
	}
	if o.VMs < 1 || o.VMs > 50 {
		return fmt.Errorf("%w: --vms %d: want 1 to 50", errUsage, o.VMs)
	}
	if *diskMiB < 8 || *diskMiB > 4096 {
		return fmt.Errorf("%w: --disk-mib %d: want 8 to 4096", errUsage, *diskMiB)
	}
	if o.Churn < 0 {
		return fmt.Errorf("%w: --churn must not be negative", errUsage)
	}
	o.DiskSize = int64(*diskMiB) << 20
	if err := checkDemoListen(o.Listen); err != nil {
		return err
	}
	o.Ready = func(i demo.Info) { printDemo(env, i) }
	err = demo.Run(ctx, o)
	if err != nil && ctx.Err() != nil {
		// Interrupted while starting: what failed was cut short on purpose.
		return nil
	}
	return err
}

// checkDemoListen refuses anything but a loopback address: the demo serves
// plain HTTP and has a password printed on the terminal.
func checkDemoListen(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("%w: --listen %q: want host:port (%v)", errUsage, listen, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("%w: --listen %s: the demo serves plain HTTP without TLS, so only on a loopback address (127.0.0.1, ::1, localhost); "+
		"to serve other machines, run `appliance serve` with TLS", errUsage, listen)
}

// printDemo tells the user how to reach what the demo made.
func printDemo(env *cliEnv, i demo.Info) {
	fmt.Fprintf(env.stdout, "console: http://%s/\n", i.Addr)
	fmt.Fprintf(env.stdout, "login: %s / %s\n", i.User, i.Password)
	// The repository is a real one: the command-line tools open it with its
	// passphrase (once the demo has stopped, or with --retry-lock).
	fmt.Fprintf(env.stdout, "repository: %s\n", i.RepoDir)
	fmt.Fprintf(env.stdout, "repository passphrase: %s (in %s; export VMVAULT_PASSWORD or give --password-file)\n", i.RepoPassphrase, i.RepoPassphraseFile)
	fmt.Fprintf(env.stdout, "state: %s\n", i.StateDir)
}
