package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/ratelimit"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/repository/storage"
)

// repoFlags are the flags every repository command shares. The passphrase is
// never a flag value (it would show in ps): it comes from a file or the
// environment.
type repoFlags struct {
	dir          string
	passwordFile string
	// passwordCommand prints the passphrase on its first line (run by
	// /bin/sh -c; never logged).
	passwordCommand string
	noFsync         bool
	retryLock       time.Duration
	readOnly        bool
	command         string // "appliance repo check": names this process in the lock file
	// limitUpload and limitDownload cap the bytes sent to and read from
	// the repository's storage, in MB/s (0: unlimited).
	limitUpload, limitDownload float64
}

// addLimitFlags registers --limit-upload and --limit-download (restic's
// names; restic counts KiB/s, these MB/s like the configuration file).
func (f *repoFlags) addLimitFlags(fs *flag.FlagSet, what string) {
	fs.Float64Var(&f.limitUpload, "limit-upload", 0, "limit uploads to "+what+" to this many MB/s (10^6 bytes per second; default: unlimited)")
	fs.Float64Var(&f.limitDownload, "limit-download", 0, "limit downloads from "+what+" to this many MB/s (default: unlimited)")
}

// limits applies --limit-upload and --limit-download to o.
func (f *repoFlags) limits(o repository.OpenOptions) (repository.OpenOptions, error) {
	for _, l := range []struct {
		flag string
		v    float64
		dst  *storage.Limiter
	}{{"--limit-upload", f.limitUpload, &o.Upload}, {"--limit-download", f.limitDownload, &o.Download}} {
		if err := policy.ValidateMBps(l.v); err != nil {
			return o, fmt.Errorf("%w: %s %v", errUsage, l.flag, err)
		}
		if l.v > 0 {
			*l.dst = ratelimit.New(clock.Real(), ratelimit.MBps(l.v))
		}
	}
	return o, nil
}

func addRepoFlags(fs *flag.FlagSet) *repoFlags {
	f := &repoFlags{command: fs.Name()}
	fs.StringVar(&f.dir, "repo", "", "repository directory (required)")
	fs.StringVar(&f.passwordFile, "password-file", "", "read the repository passphrase from this file (default: $VMVAULT_PASSWORD)")
	fs.StringVar(&f.passwordCommand, "password-command", "", "run this shell command (/bin/sh -c) and take the first line it prints as the repository passphrase (instead of --password-file)")
	fs.BoolVar(&f.noFsync, "unsafe-no-fsync", false, "skip fsync (tests and benchmarks only: a crash may lose data)")
	fs.DurationVar(&f.retryLock, "retry-lock", 0, "wait up to this long (e.g. 5m) for a repository locked by another process (default: fail at once)")
	fs.BoolVar(&f.readOnly, "read-only", false, "open without the lock, to list and restore while another appliance owns the repository and writes to it (writes are refused)")
	f.addLimitFlags(fs, "the repository")
	return f
}

// password returns the passphrase, or nil when none is configured.
func (f *repoFlags) password(env *cliEnv) ([]byte, error) {
	return f.passwordFrom(env, "VMVAULT_PASSWORD")
}

// passwordFrom is password with another environment variable: the file,
// else the command, else the variable.
func (f *repoFlags) passwordFrom(env *cliEnv, variable string) ([]byte, error) {
	if f.passwordFile != "" && f.passwordCommand != "" {
		return nil, fmt.Errorf("%w: give the passphrase with a password file or a password command, not both", errUsage)
	}
	if f.passwordCommand != "" {
		return runPasswordCommand(env, f.passwordCommand)
	}
	if f.passwordFile != "" {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return nil, fmt.Errorf("read password file: %w", err)
		}
		// A trailing newline from `echo pw > file` is not part of the passphrase.
		b = bytes.TrimRight(b, "\r\n")
		if len(b) == 0 {
			return nil, fmt.Errorf("password file %s is empty", f.passwordFile)
		}
		return b, nil
	}
	if p := env.getenv(variable); p != "" {
		return []byte(p), nil
	}
	return nil, nil
}

// passwordCommandTimeout bounds a --password-command (a secret manager
// that asks for a touch or a network round trip has time; a hung one does
// not hang the command).
var passwordCommandTimeout = time.Minute

// runPasswordCommand runs command with /bin/sh -c: its first line of
// standard output is the passphrase, its standard error goes to the user,
// a non-zero exit or a timeout is an error. Neither the command nor what it
// printed is ever part of an error or a log line (the command line may
// carry a secret manager's token).
func runPasswordCommand(env *cliEnv, command string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), passwordCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, env.stderr, nil
	cmd.WaitDelay = 2 * time.Second // a child left holding stdout does not hang us
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("password command: did not finish within %s", passwordCommandTimeout)
	}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return nil, fmt.Errorf("password command failed (%s); its standard error is above", ee.ProcessState)
	} else if err != nil {
		return nil, fmt.Errorf("password command: %w", err)
	}
	line, _, _ := bytes.Cut(out.b, []byte("\n"))
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return nil, errors.New("password command printed no passphrase (its first line of output is empty)")
	}
	return line, nil
}

// limitedBuffer keeps the first 64 KiB written to it (a passphrase is one
// line; the rest is discarded, not buffered without bound).
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (f *repoFlags) validate() error {
	if f.dir == "" {
		return fmt.Errorf("%w: --repo is required", errUsage)
	}
	return nil
}

// open opens the repository named by the flags.
func (f *repoFlags) open(ctx context.Context, env *cliEnv) (*repository.Repository, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	pw, err := f.password(env)
	if err != nil {
		return nil, err
	}
	if f.retryLock < 0 {
		return nil, fmt.Errorf("%w: --retry-lock must not be negative", errUsage)
	}
	opts, err := f.limits(repository.OpenOptions{
		NoFsync:   f.noFsync,
		RetryLock: f.retryLock,
		ReadOnly:  f.readOnly,
		Holder:    "CLI (" + f.command + ")",
		// Warnings (a catalog rebuilt after corruption) go to the user.
		Logger: slog.New(slog.NewTextHandler(env.stderr, nil)),
	})
	if err != nil {
		return nil, err
	}
	r, err := repository.Open(ctx, f.dir, pw, opts)
	if err != nil {
		// repository.Open's errors already say "open repository DIR": this
		// layer adds only what it knows, the flags that give a passphrase.
		if errors.Is(err, repository.ErrWrongPassword) && pw == nil {
			return nil, noPassphraseError{f.dir}
		}
		return nil, err
	}
	return r, nil
}

// parseAndOpen parses args with fs (which holds f) and opens the repository;
// it returns the positional arguments.
func (f *repoFlags) parseAndOpen(ctx context.Context, env *cliEnv, fs *flag.FlagSet, args []string) (*repository.Repository, []string, error) {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, nil, err
	}
	r, err := f.open(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	return r, pos, nil
}

// noPassphraseError is ErrWrongPassword when no passphrase was given: it says
// how to give one instead of calling the missing one wrong.
type noPassphraseError struct{ dir string }

func (e noPassphraseError) Error() string {
	return "open repository " + e.dir + ": it is encrypted: give the passphrase with --password-file, --password-command or VMVAULT_PASSWORD"
}

func (e noPassphraseError) Unwrap() error { return repository.ErrWrongPassword }
