package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/filerestore/mount"
)

func init() {
	register(&command{name: "files volumes", summary: "list the volumes (partitions, LVs) of a restore point and their file systems", run: runFilesVolumes})
	register(&command{name: "files ls", summary: "list a directory inside a restore point's volume", run: runFilesLs})
	register(&command{name: "files get", summary: "restore files from a restore point's volume to a file, directory, .tar or .zip", run: runFilesGet})
	register(&command{name: "files mount", summary: "mount a restore point's volumes read-only through FUSE (until interrupted)", run: runFilesMount})
}

type filesFlags struct {
	rf     *repoFlags
	point  *string
	volume *string
}

func addFilesFlags(fs interface {
	String(name, value, usage string) *string
}, rf *repoFlags, needVolume bool) filesFlags {
	f := filesFlags{rf: rf, point: fs.String("restore-point", "", "restore point id or unique prefix (required)")}
	if needVolume {
		f.volume = fs.String("volume", "", "volume id, as `files volumes` lists it (required)")
	}
	return f
}

// open checks the flags, opens the repository and the file-level restore
// service the daemon's API uses, and resolves --restore-point; the returned
// func closes the service, then the repository.
func (f filesFlags) open(ctx context.Context, env *cliEnv) (*filerestore.Service, repository.Point, func(), error) {
	if *f.point == "" {
		return nil, repository.Point{}, nil, fmt.Errorf("%w: --restore-point is required", errUsage)
	}
	if f.volume != nil && *f.volume == "" {
		return nil, repository.Point{}, nil, fmt.Errorf("%w: --volume is required (see `appliance files volumes`)", errUsage)
	}
	r, err := f.rf.open(ctx, env)
	if err != nil {
		return nil, repository.Point{}, nil, err
	}
	p, err := r.Point(ctx, *f.point)
	if err != nil {
		r.Close()
		return nil, repository.Point{}, nil, err
	}
	svc, err := filerestore.New(filerestore.Config{Source: filerestore.Single("repo", r)})
	if err != nil {
		r.Close()
		return nil, repository.Point{}, nil, err
	}
	return svc, p, func() { svc.Close(); r.Close() }, nil
}

// volumeErr reports an unknown --volume as a usage error.
func volumeErr(err error) error {
	if errors.Is(err, guestfs.ErrNoVolume) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return err
}

func runFilesVolumes(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files volumes")
	rf := addRepoFlags(fs)
	ff := addFilesFlags(fs, rf, false)
	asJSON := fs.Bool("json", false, "print a JSON list")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, pos)
	}
	svc, p, done, err := ff.open(ctx, env)
	if err != nil {
		return err
	}
	defer done()
	vols, err := svc.Volumes(ctx, p.ID)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.stdout, vols)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDISK\tPART\tFS\tLABEL\tLV\tSIZE\tNOTE")
	for _, v := range vols {
		p := "-"
		if v.Partition != nil {
			p = fmt.Sprint(*v.Partition)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Disk, p, v.FS, v.Label, v.LV, humanBytes(v.Size), v.Reason)
	}
	return tw.Flush()
}

func runFilesLs(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files ls")
	rf := addRepoFlags(fs)
	ff := addFilesFlags(fs, rf, true)
	asJSON := fs.Bool("json", false, "print a JSON list")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return fmt.Errorf("%w: give at most one PATH", errUsage)
	}
	name := "/"
	if len(pos) == 1 {
		name = pos[0]
	}
	if _, err := guestfs.CleanPath(name); err != nil {
		return fmt.Errorf("%w: %q: %v", errUsage, name, err)
	}
	svc, p, done, err := ff.open(ctx, env)
	if err != nil {
		return err
	}
	defer done()
	ents, skipped, err := svc.List(ctx, p.ID, *ff.volume, name)
	if err != nil {
		return volumeErr(err)
	}
	// Entries of a hostile image that no path can name are not listed;
	// stderr says which and why (stdout stays the listing, JSON or not).
	for _, sk := range skipped {
		fmt.Fprintf(env.stderr, "skipped %s: %s\n", quoteName(sk.Dir, sk.Name), sk.Reason)
	}
	if *asJSON {
		return writeJSON(env.stdout, ents)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 1, ' ', tabwriter.AlignRight)
	for _, e := range ents {
		n := e.Name
		if e.Type == "symlink" {
			n += " -> " + e.Target
		} else if e.Type == "dir" {
			n += "/"
		}
		fmt.Fprintf(tw, "%s\t %d\t %s\t %s\n", e.Mode.String(), e.Size, e.Mtime.Format("2006-01-02 15:04:05"), sanitize(n))
	}
	return tw.Flush()
}

// quoteName shows a skipped entry: its directory and its name quoted as Go
// does (a NUL or a "/" in the name stays visible and unambiguous).
func quoteName(dir, name string) string {
	return path.Join(dir) + " " + strconv.Quote(name)
}

// sanitize keeps control characters in file names off the terminal.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func runFilesGet(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files get")
	rf := addRepoFlags(fs)
	ff := addFilesFlags(fs, rf, true)
	out := fs.String("output", "", "OUT: a file (one regular file), a .tar or .zip, or a new directory (required)")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("%w: give at least one PATH", errUsage)
	}
	if *out == "" {
		return fmt.Errorf("%w: --output is required", errUsage)
	}
	if _, err := os.Lstat(*out); err == nil {
		return fmt.Errorf("%w: %s exists: files get never overwrites", errUsage, *out)
	}
	for _, p := range paths {
		if _, err := guestfs.CleanPath(p); err != nil {
			return fmt.Errorf("%w: %q: %v", errUsage, p, err)
		}
	}
	svc, p, done, err := ff.open(ctx, env)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	st, err := svc.Extract(ctx, p.ID, *ff.volume, paths, *out)
	if errors.Is(err, filerestore.ErrDuplicateName) || errors.Is(err, filerestore.ErrOutputExists) {
		return fmt.Errorf("%w: %v", errUsage, err)
	} else if err != nil {
		return volumeErr(err)
	}
	fmt.Fprintf(env.stdout, "restored %d file(s), %d dir(s), %d link(s), %s to %s in %.2fs\n",
		st.Files, st.Dirs, st.Links, humanBytes(st.Bytes), *out, time.Since(start).Seconds())
	if n := len(st.Skipped); n > 0 {
		fmt.Fprintf(env.stdout, "skipped %d entr%s whose name no path can name (a hostile or damaged file system):\n", n, map[bool]string{true: "y", false: "ies"}[n == 1])
		for _, sk := range st.Skipped {
			fmt.Fprintf(env.stdout, "  %s: %s\n", quoteName(sk.Dir, sk.Name), sk.Reason)
		}
	}
	return nil
}

func runFilesMount(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files mount")
	rf := addRepoFlags(fs)
	ff := addFilesFlags(fs, rf, false)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: give exactly one MOUNTPOINT", errUsage)
	}
	svc, p, done, err := ff.open(ctx, env)
	if err != nil {
		return err
	}
	defer done()
	open, unheld, release, err := svc.HoldAll(ctx, p.ID)
	if err != nil {
		return err
	}
	defer release()
	for _, u := range unheld {
		fmt.Fprintf(env.stderr, "%s (%s): not mounted: %s\n", u.Volume.ID, u.Volume.FS, u.Reason)
	}
	srv, err := mount.Mount(pos[0], open)
	if err != nil {
		return fmt.Errorf("mount %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.stdout, "mounted %d volume(s) of %s read-only at %s; interrupt to unmount\n", len(open), short(p.ID), pos[0])
	<-ctx.Done()
	if err := srv.Unmount(); err != nil {
		return fmt.Errorf("unmount %s: %w", pos[0], err)
	}
	srv.Wait()
	return nil
}
