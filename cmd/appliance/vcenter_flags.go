package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vsphere"
)

// vcenterFlags are the flags of every command that talks to vCenter. The
// password is never a flag value (it would show in ps): it comes from a file
// or VMVAULT_VCENTER_PASSWORD.
type vcenterFlags struct {
	url          string
	username     string
	passwordFile string
	thumbprint   string
	caFile       string
	insecure     bool
}

// The vCenter password file is --vcenter-password-file everywhere; commands
// without a repository also accept --password-file for it. Commands with a
// repository keep --password-file for the repository passphrase, so they must
// add the repository flags first.
func addVCenterFlags(fs *flag.FlagSet) *vcenterFlags {
	f := &vcenterFlags{}
	fs.StringVar(&f.url, "vcenter", "", "vCenter URL, e.g. https://vc.example.com (default: $VMVAULT_VCENTER_URL)")
	fs.StringVar(&f.username, "username", "", "vCenter user (default: $VMVAULT_VCENTER_USERNAME)")
	const pwUsage = "read the vCenter password from this file (default: $VMVAULT_VCENTER_PASSWORD)"
	fs.StringVar(&f.passwordFile, "vcenter-password-file", "", pwUsage)
	if fs.Lookup("password-file") == nil {
		fs.StringVar(&f.passwordFile, "password-file", "", pwUsage+"; same as --vcenter-password-file")
	}
	fs.StringVar(&f.thumbprint, "thumbprint", "", "pin the vCenter certificate by its SHA-256 or SHA-1 thumbprint")
	fs.StringVar(&f.caFile, "ca-file", "", "trust the CA certificates in this PEM file")
	fs.BoolVar(&f.insecure, "insecure", false, "do not verify the vCenter certificate (also $VMVAULT_VCENTER_INSECURE=1)")
	return f
}

// config resolves flags and environment into a vsphere.Config.
func (f *vcenterFlags) config(env *cliEnv) (vsphere.Config, error) {
	cfg := vsphere.Config{URL: f.url, Username: f.username, Thumbprint: f.thumbprint, CAFile: f.caFile, Insecure: f.insecure}
	if cfg.URL == "" {
		cfg.URL = env.getenv("VMVAULT_VCENTER_URL")
	}
	if cfg.Username == "" {
		cfg.Username = env.getenv("VMVAULT_VCENTER_USERNAME")
	}
	if !cfg.Insecure {
		switch env.getenv("VMVAULT_VCENTER_INSECURE") {
		case "1", "true", "yes":
			cfg.Insecure = true
		}
	}
	if f.passwordFile != "" {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return cfg, fmt.Errorf("read vCenter password file: %w", err)
		}
		cfg.Password = string(bytes.TrimRight(b, "\r\n"))
		if cfg.Password == "" {
			return cfg, fmt.Errorf("vCenter password file %s is empty", f.passwordFile)
		}
	} else {
		cfg.Password = env.getenv("VMVAULT_VCENTER_PASSWORD")
	}
	switch {
	case cfg.URL == "":
		return cfg, fmt.Errorf("%w: --vcenter (or VMVAULT_VCENTER_URL) is required", errUsage)
	case cfg.Username == "":
		return cfg, fmt.Errorf("%w: --username (or VMVAULT_VCENTER_USERNAME) is required", errUsage)
	case cfg.Password == "":
		return cfg, fmt.Errorf("%w: a vCenter password is required: --vcenter-password-file or VMVAULT_VCENTER_PASSWORD", errUsage)
	case cfg.Insecure && (cfg.Thumbprint != "" || cfg.CAFile != ""):
		return cfg, fmt.Errorf("%w: --insecure contradicts --thumbprint/--ca-file", errUsage)
	}
	return cfg, nil
}

// connect logs in to the vCenter named by the flags.
func (f *vcenterFlags) connect(ctx context.Context, env *cliEnv) (*vsphere.Client, error) {
	cfg, err := f.config(env)
	if err != nil {
		return nil, err
	}
	c, err := vsphere.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// openRepoAndVCenter opens the repository, then logs in to vCenter; the
// returned function closes both.
func openRepoAndVCenter(ctx context.Context, env *cliEnv, rf *repoFlags, cfg vsphere.Config) (*repository.Repository, *vsphere.Client, func(), error) {
	r, err := rf.open(ctx, env)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := vsphere.Connect(ctx, cfg)
	if err != nil {
		r.Close()
		return nil, nil, nil, err
	}
	return r, c, func() {
		c.Close(context.WithoutCancel(ctx))
		r.Close()
	}, nil
}
