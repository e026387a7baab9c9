// Package demo runs `appliance demo`: the product against an in-process
// vCenter lab (vcsim-tests/lab) with sample VMs, an encrypted repository,
// generated secrets kept in the state directory, the daemon (daemon.Serve)
// on a loopback address, and the demo job created and started through the
// daemon's own REST API, the path the console takes.
//
// It owns the demo's lifecycle and its secrets; the command line owns its
// flags and what it prints. It is the one package besides the tests that
// wires the lab to the daemon (internal/archtest: lab-tests-and-demo-only);
// only cmd/appliance imports it.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/daemon"
	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// Names the demo gives what it creates. The job id is stable so a demo
// restarted on its state directory finds its job again.
const (
	RepoName          = "demo"
	JobID             = "demo-vms"
	PassFile          = "repository-passphrase" // in the state directory, 0600
	AdminPasswordFile = "admin-password"        // in the state directory, 0600
	TagCategory       = "Environment"
	Tag               = "production"
	DefaultChurn      = 30 * time.Second

	vcPassEnv = "VMVAULT_DEMO_VCENTER_PASSWORD" // only ever seen by the daemon, through the demo's own getenv
)

// Options configures Run.
type Options struct {
	Listen   string        // the API's and console's address (loopback: the caller checks)
	StateDir string        // "" = a temporary directory removed on exit
	VMs      int           // sample VMs
	Churn    time.Duration // how often each sample VM writes; 0 disables
	DiskSize int64         // bytes per sample disk
	// Instant serves instant VM recovery: the daemon's NFS export on a
	// free loopback port (no portmapper), which the lab's hosts mount.
	Instant bool

	// The daemon's streams and environment. $VMVAULT_ADMIN_PASSWORD, when
	// set, is the administrator's password.
	Stdout, Stderr io.Writer
	Getenv         func(string) string

	// Ready is called once the demo job runs, with what a user needs to
	// log in; the sample VMs start writing after it returns.
	Ready func(Info)

	// Started, when set (tests), sees the lab once the sample VMs exist;
	// Stopped sees it after the daemon stopped, before the lab closes.
	Started func(*lab.Lab, []lab.Sample)
	Stopped func(*lab.Lab)
}

// Info is what Ready reports.
type Info struct {
	Addr               string // host:port the daemon listens on
	User, Password     string // the administrator's login
	RepoDir            string
	RepoPassphrase     string
	RepoPassphraseFile string
	StateDir           string
}

// Run runs the lab, prepares a repository and the daemon's state, starts
// the daemon on them, creates the demo job and runs it, then keeps the
// sample VMs writing until ctx ends.
func Run(ctx context.Context, o Options) (err error) {
	stateDir := o.StateDir
	if stateDir == "" {
		stateDir, err = os.MkdirTemp("", "vmvault-demo-")
		if err != nil {
			return fmt.Errorf("temporary state directory: %w", err)
		}
		defer os.RemoveAll(stateDir)
	} else {
		if stateDir, err = filepath.Abs(stateDir); err != nil {
			return err
		}
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
	}

	// The lab: a vCenter simulator with the sample VMs (the default VPX
	// model's four VMs stay, unprotected, with small empty disks).
	l, samples, err := lab.StartDemo(ctx, lab.DemoOptions{Dir: filepath.Join(stateDir, "lab"), VMs: o.VMs, DiskSize: o.DiskSize,
		Password: randomSecret(), TagCategory: TagCategory, Tag: Tag, Started: o.Started})
	if err != nil {
		return err
	}
	defer l.Close()
	dlog := daemon.NewLogger(o.Stderr, "info")
	for _, s := range samples {
		dlog.Info("demo: sample VM", "vm", s.Name, "fs", s.FS, "files", s.Files, "bytes", s.Bytes, "disk", o.DiskSize)
	}

	repoDir := filepath.Join(stateDir, "repository")
	passFile := filepath.Join(stateDir, PassFile)
	if err := initRepository(ctx, repoDir, passFile); err != nil {
		return err
	}
	repoPass, err := secretFile(passFile)
	if err != nil {
		return fmt.Errorf("repository passphrase: %w", err)
	}

	// The administrator's password: $VMVAULT_ADMIN_PASSWORD (the daemon
	// reads it when no file is named), else one generated and kept in the
	// state directory so a restarted demo prints the same login.
	adminPw := o.Getenv("VMVAULT_ADMIN_PASSWORD")
	adminFile := ""
	if adminPw == "" {
		adminFile = filepath.Join(stateDir, AdminPasswordFile)
		if adminPw, err = secretFile(adminFile); err != nil {
			return fmt.Errorf("administrator password: %w", err)
		}
	}

	cfg := &daemon.Config{
		Listen:   o.Listen,
		TLS:      daemon.TLSConfig{Disable: true},
		StateDir: filepath.Join(stateDir, "state"),
		TimeZone: "UTC",
		Admin:    daemon.AdminConfig{PasswordFile: adminFile},
		VCenter: &daemon.VCenterConfig{URL: l.URL().String(), Username: l.Username(), PasswordEnv: vcPassEnv,
			Thumbprint: l.Thumbprint()},
		Repositories: []daemon.RepoConfig{{Name: RepoName, Path: repoDir, PassphraseFile: passFile}},
		Maintenance:  daemon.MaintenanceConfig{Window: &policy.Window{Days: everyDay(policy.Range{Start: 3 * 60, End: 5 * 60}), Location: time.UTC}},
	}
	if o.Instant {
		nfs, err := freeLoopbackPort()
		if err != nil {
			return fmt.Errorf("instant recovery: %w", err)
		}
		// The lab has no portmapper on port 111: its hosts mount at the
		// NFS port SetNFSServer names.
		cfg.Instant = &daemon.InstantConfig{Listen: nfs, Portmap: "off", Advertise: "127.0.0.1", Allow: []string{"127.0.0.1/32"}}
		l.SetNFSServer(nfs)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	ready := make(chan string, 1)
	cfg.OnReady = func(addr string) { ready <- addr }
	getenv := func(k string) string {
		if k == vcPassEnv {
			return l.Password()
		}
		return o.Getenv(k)
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- daemon.Serve(sctx, cfg, daemon.Options{Stdout: o.Stdout, Stderr: o.Stderr, Getenv: getenv})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		return err
	}
	var churn sync.WaitGroup
	defer churn.Wait() // before the lab closes (deferred earlier)
	if err := setupJob(sctx, addr, cfg.Admin.User, adminPw, samples); err != nil {
		stop()
		<-served
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if o.Ready != nil {
		o.Ready(Info{Addr: addr, User: cfg.Admin.User, Password: adminPw, RepoDir: repoDir, RepoPassphrase: repoPass,
			RepoPassphraseFile: passFile, StateDir: stateDir})
	}
	if o.Churn > 0 {
		churn.Add(1)
		go func() {
			defer churn.Done()
			l.ChurnEvery(sctx, samples, o.Churn, daemon.NewLogger(o.Stderr, cfg.LogLevel))
		}()
	}
	err = <-served
	stop()
	churn.Wait()
	if o.Stopped != nil {
		o.Stopped(l)
	}
	return err
}

// freeLoopbackPort returns a loopback address with a port free now: the
// lab must know the NFS port before the daemon listens on it.
func freeLoopbackPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

func everyDay(r policy.Range) [7][]policy.Range {
	var d [7][]policy.Range
	for i := range d {
		d[i] = []policy.Range{r}
	}
	return d
}

func randomSecret() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// secretFile returns the secret stored in path, creating it (0600) with a
// random one on first use.
func secretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	s := randomSecret()
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", err
	}
	return s, nil
}

// initRepository creates the demo's encrypted repository with a generated
// passphrase (0600 file next to it), or checks the one a previous run made.
func initRepository(ctx context.Context, repoDir, passFile string) error {
	_, statErr := os.Stat(filepath.Join(repoDir, "config"))
	if statErr == nil {
		if _, err := os.Stat(passFile); err != nil {
			return fmt.Errorf("repository %s exists but its passphrase file is missing: %w", repoDir, err)
		}
		return nil
	}
	pass, err := secretFile(passFile)
	if err != nil {
		return fmt.Errorf("repository passphrase: %w", err)
	}
	if _, err := repos.Init(ctx, repoDir, []byte(pass), repos.InitRequest{Algorithm: dedup.AlgorithmCDC}); err != nil {
		return fmt.Errorf("init demo repository: %w", err)
	}
	return nil
}
