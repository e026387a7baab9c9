package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/vmvault/vmvault/repository"
)

func init() {
	register(&command{name: "repo key list", summary: "list the repository's keys (passphrases) and the one in use", run: runRepoKeyList})
	register(&command{name: "repo key add", summary: "add a key: another passphrase that opens the repository", run: runRepoKeyAdd})
	register(&command{name: "repo key remove", summary: "remove a key (never the last, nor the one in use)", run: runRepoKeyRemove})
	register(&command{name: "repo passwd", summary: "change the passphrase: add a new key (new salt and KDF), then remove the one in use", run: runRepoPasswd})
}

// newKeyFlags are the flags of a command that adds a key. The new
// passphrase, like the current one, is never a flag value.
type newKeyFlags struct {
	passwordFile string
	label        string
	kdfMem       uint
	kdfTime      uint
}

func addNewKeyFlags(fs *flag.FlagSet) *newKeyFlags {
	f := &newKeyFlags{}
	fs.StringVar(&f.passwordFile, "new-password-file", "", "read the new passphrase from this file (default: $VMVAULT_NEW_PASSWORD)")
	fs.StringVar(&f.label, "label", "", "a label for the new key (shown by repo key list)")
	fs.UintVar(&f.kdfMem, "kdf-memory", 0, "Argon2id memory of the new key in KiB (default chosen by the repository)")
	fs.UintVar(&f.kdfTime, "kdf-time", 0, "Argon2id passes of the new key (default chosen by the repository)")
	return f
}

func (f *newKeyFlags) options() repository.KeyOptions {
	o := repository.KeyOptions{Label: f.label}
	if f.kdfMem != 0 || f.kdfTime != 0 {
		o.KDF = repository.DefaultKDF
		if f.kdfMem != 0 {
			o.KDF.MemoryKiB = uint32(f.kdfMem)
		}
		if f.kdfTime != 0 {
			o.KDF.Time = uint32(f.kdfTime)
		}
	}
	return o
}

// password reads the new passphrase: --new-password-file, else
// $VMVAULT_NEW_PASSWORD.
func (f *newKeyFlags) password(env *cliEnv) ([]byte, error) {
	if f.passwordFile != "" {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return nil, fmt.Errorf("read new password file: %w", err)
		}
		b = bytes.TrimRight(b, "\r\n")
		if len(b) == 0 {
			return nil, fmt.Errorf("new password file %s is empty", f.passwordFile)
		}
		return b, nil
	}
	if p := env.getenv("VMVAULT_NEW_PASSWORD"); p != "" {
		return []byte(p), nil
	}
	return nil, fmt.Errorf("%w: a new passphrase is required (--new-password-file or VMVAULT_NEW_PASSWORD)", errUsage)
}

func runRepoKeyList(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo key list")
	rf := addRepoFlags(fs)
	asJSON := fs.Bool("json", false, "print the keys as JSON")
	r, pos, err := rf.parseAndOpen(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer r.Close()
	if len(pos) != 0 {
		return fmt.Errorf("%w: repo key list takes no arguments (got %q)", errUsage, pos)
	}
	keys, err := r.Keys(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.stdout, keys)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCURRENT\tCONFIG\tLABEL\tHOST\tCREATED\tKDF")
	for _, k := range keys {
		if k.Err != "" {
			fmt.Fprintf(tw, "%s\t\t\tdamaged: %s\t\t\t\n", k.ID, k.Err)
			continue
		}
		cur, inCfg := "", ""
		if k.Current {
			cur = "*"
		}
		if k.InConfig {
			inCfg = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\targon2id t=%d m=%dKiB p=%d\n", k.ID, cur, inCfg, k.Label, k.Host,
			k.Created.Format("2006-01-02 15:04:05"), k.KDF.Time, k.KDF.MemoryKiB, k.KDF.Threads)
	}
	return tw.Flush()
}

// openWithNewKey parses a command that makes a key (key add, passwd): the
// repository flags, the new passphrase's flags, no arguments; it reads the
// new passphrase before opening, so a missing one costs no KDF.
func openWithNewKey(ctx context.Context, env *cliEnv, name string, args []string) (*repository.Repository, []byte, *newKeyFlags, error) {
	fs := newFlagSet(env, name)
	rf := addRepoFlags(fs)
	nk := addNewKeyFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(pos) != 0 {
		return nil, nil, nil, fmt.Errorf("%w: %s takes no arguments (got %q)", errUsage, name, pos)
	}
	newPW, err := nk.password(env)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := rf.open(ctx, env)
	if err != nil {
		return nil, nil, nil, err
	}
	return r, newPW, nk, nil
}

func runRepoKeyAdd(ctx context.Context, env *cliEnv, args []string) error {
	r, newPW, nk, err := openWithNewKey(ctx, env, "repo key add", args)
	if err != nil {
		return err
	}
	defer r.Close()
	k, err := r.AddKey(ctx, newPW, nk.options())
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "added key %s\n", k.ID)
	return r.Close()
}

func runRepoKeyRemove(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo key remove")
	rf := addRepoFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: repo key remove takes one key id (see repo key list)", errUsage)
	}
	r, err := rf.open(ctx, env)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.RemoveKey(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "removed key %s\n", pos[0])
	return r.Close()
}

func runRepoPasswd(ctx context.Context, env *cliEnv, args []string) error {
	r, newPW, nk, err := openWithNewKey(ctx, env, "repo passwd", args)
	if err != nil {
		return err
	}
	defer r.Close()
	added, removed, err := r.ChangePassword(ctx, newPW, nk.options())
	if err != nil {
		if errors.Is(err, repository.ErrNotEncrypted) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	}
	fmt.Fprintf(env.stdout, "passphrase changed: added key %s, removed key %s (a new key-encryption key; the data and id keys are unchanged)\n", added.ID, removed)
	return r.Close()
}
