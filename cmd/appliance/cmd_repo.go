package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/progress"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/repos"
)

func init() {
	register(&command{name: "repo init", summary: "create a repository", run: runRepoInit})
	register(&command{name: "repo list", summary: "list restore points", run: runRepoList})
	register(&command{name: "repo stats", summary: "repository usage, dedup and compression ratios", run: runRepoStats})
	register(&command{name: "repo check", summary: "verify the repository (--read-data: every blob)", run: runRepoCheck})
	register(&command{name: "repo reclaim", summary: "remove data no restore point references", run: runRepoReclaim})
	register(&command{name: "repo extend-locks", summary: "keep every pack of an immutable repository locked as long as the points that need it", run: runRepoExtendLocks})
	register(&command{name: "repo recatalog", summary: "rebuild the catalog (index.db) from the packs", run: runRepoRecatalog})
	register(&command{name: "repo delete", summary: "delete a restore point", run: pointCmd("delete", (*repository.Repository).Delete)})
	register(&command{name: "repo lock", summary: "lock a restore point against deletion", run: pointCmd("lock", (*repository.Repository).Lock)})
	register(&command{name: "repo unlock", summary: "unlock a restore point", run: pointCmd("unlock", (*repository.Repository).Unlock)})
	register(&command{name: "repo copy", summary: "copy restore points to another repository (only the blobs it lacks)", run: runRepoCopy})
}

func runRepoInit(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo init")
	rf := addRepoFlags(fs)
	noEnc := fs.Bool("no-encryption", false, "create an unencrypted repository (encryption is on by default)")
	algo := fs.String("chunker", "cdc", "chunking: cdc (content-defined) or fixed")
	avg := fs.Int("chunk-size", 0, "average (cdc) or fixed chunk size in bytes (default 1 MiB)")
	pol := fs.String("chunker-polynomial", "", "CDC polynomial in hex (default: random); give another repository's to cut the same chunks, like restic's --copy-chunker-params")
	packSize := fs.Int("pack-size", 0, "target pack size in bytes (default chosen by the repository)")
	level := fs.String("compression", "", "zstd level: fastest, default or better (default chosen by the repository)")
	kdfMem := fs.Uint("kdf-memory", 0, "Argon2id memory in KiB (default chosen by the repository)")
	kdfTime := fs.Uint("kdf-time", 0, "Argon2id passes (default chosen by the repository)")
	immutable := fs.Int("immutable", 0, "s3: only: write packs and commit records with an Object Lock retention of this many days; nothing is deleted before it ends")
	lockMode := fs.String("lock-mode", "governance", "Object Lock mode with --immutable: governance or compliance")
	multiWriter := fs.Bool("multi-writer", false, "let several appliances back up into this repository at once (format 2.0: vmvault before it cannot open the repository)")
	createBucket := fs.Bool("create-bucket", false, "s3: only: create the bucket when it does not exist (with Object Lock under --immutable); without it a missing bucket is an error")
	idFn := fs.String("id-function", "", "blob id function of an encrypted repository: blake3-keyed (default) or hmac-sha256 (readable by vmvault before repository format 1.3)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := rf.validate(); err != nil {
		return err
	}
	pw, err := rf.password(env)
	if err != nil {
		return err
	}
	if pw == nil && !*noEnc {
		return fmt.Errorf("%w: a passphrase is required (--password-file or VMVAULT_PASSWORD); use --no-encryption to create an unencrypted repository", errUsage)
	}
	if pw != nil && *noEnc {
		return fmt.Errorf("%w: --no-encryption and a passphrase exclude each other", errUsage)
	}
	if *idFn != "" && !repository.ValidIDMAC(*idFn) {
		return fmt.Errorf("%w: --id-function %q: want %s or %s", errUsage, *idFn, repository.IDMACBLAKE3, repository.IDMACHMACSHA256)
	}
	if *idFn != "" && *noEnc {
		return fmt.Errorf("%w: --id-function is for encrypted repositories (an unencrypted one uses SHA-256)", errUsage)
	}
	req := repos.InitRequest{NoEncryption: *noEnc, Algorithm: *algo, ChunkSize: *avg, PackSize: *packSize,
		CompressionLevel: *level, KDFTime: uint32(*kdfTime), KDFMemoryKiB: uint32(*kdfMem), IDFunction: *idFn, CreateBucket: *createBucket, MultiWriter: *multiWriter}
	if *pol != "" {
		v, err := strconv.ParseUint(strings.TrimPrefix(*pol, "0x"), 16, 64)
		if err != nil {
			return fmt.Errorf("%w: --chunker-polynomial %q is not a hex number", errUsage, *pol)
		}
		req.Polynomial = &v
	}
	if *immutable != 0 {
		req.ObjectLock = &repository.ObjectLock{Mode: *lockMode, Days: *immutable}
	}
	p, err := repos.Init(ctx, rf.dir, pw, req)
	if errors.Is(err, dedup.ErrInvalidParams) {
		return fmt.Errorf("%w: %v", errUsage, err) // it says "chunker: ..."
	} else if err != nil {
		return err // it says "init DIR"
	}
	enc := "encrypted"
	if *noEnc {
		enc = "unencrypted"
	}
	if req.ObjectLock != nil {
		enc = fmt.Sprintf("immutable (object lock %s, %d days) %s", req.ObjectLock.Mode, req.ObjectLock.Days, enc)
	}
	fmt.Fprintf(env.stdout, "created %s repository at %s (chunker %s, average chunk %d bytes)\n", enc, rf.dir, p.Algorithm, p.AvgSize)
	return nil
}

// pointJSON is the documented `repo list --json` shape (README: "The command line").
type pointJSON struct {
	ID           string         `json:"id"`
	VM           string         `json:"vm"`
	VMIdentity   vmIdentityJSON `json:"vmIdentity"`
	Time         time.Time      `json:"time"`
	Parent       string         `json:"parent"`
	Disks        []diskJSON     `json:"disks"`
	LogicalBytes int64          `json:"logicalBytes"`
	Locked       bool           `json:"locked"`
	LockedUntil  *time.Time     `json:"lockedUntil,omitempty"` // a running time lock's end
	Partial      bool           `json:"partial"`
	Consistency  string         `json:"consistency,omitempty"`
	Warnings     []string       `json:"warnings,omitempty"`
	Writer       string         `json:"writer,omitempty"` // the appliance that wrote it (shared repositories)
}

// vmIdentityJSON is repository.VMIdentity in the CLI's camelCase (the
// manifest's own snake_case tags are an on-disk format and stay).
type vmIdentityJSON struct {
	Name         string `json:"name"`
	MoRef        string `json:"moref,omitempty"`
	InstanceUUID string `json:"instanceUuid,omitempty"`
	VCenter      string `json:"vcenter,omitempty"`
}

type diskJSON struct {
	Label    string `json:"label"`
	Capacity int64  `json:"capacity"`
	ChangeID string `json:"changeId,omitempty"`
	Map      string `json:"map"`
}

func toPointJSON(p repository.Point) pointJSON {
	out := pointJSON{ID: p.ID, VM: p.VM.Name, VMIdentity: vmIdentityJSON(p.VM), Time: p.Time, Parent: p.Parent,
		LogicalBytes: p.LogicalBytes, Locked: p.Locked, Partial: p.Partial, Consistency: p.Consistency,
		Warnings: p.Warnings, Disks: []diskJSON{}, Writer: p.Writer.Appliance}
	for _, d := range p.Disks {
		out.Disks = append(out.Disks, diskJSON{Label: d.Label, Capacity: d.Capacity, ChangeID: d.ChangeID, Map: d.Map.String()})
	}
	if !p.LockedUntil.IsZero() {
		u := p.LockedUntil.UTC()
		out.LockedUntil = &u
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runRepoList(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo list")
	rf := addRepoFlags(fs)
	asJSON := fs.Bool("json", false, "print a JSON array, oldest first")
	r, _, err := rf.parseAndOpen(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer r.Close()
	points, err := r.List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]pointJSON, 0, len(points))
		for _, p := range points {
			out = append(out, toPointJSON(p))
		}
		return writeJSON(env.stdout, out)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	multi := r.MultiWriter() // a shared repository: each point's appliance
	head := "ID\tVM\tTIME\tDISKS\tSIZE\tPARENT\tFLAGS"
	if multi {
		head = "ID\tVM\tTIME\tDISKS\tSIZE\tPARENT\tWRITER\tFLAGS"
	}
	fmt.Fprintln(tw, head)
	for _, p := range points {
		flags := ""
		switch {
		case !p.LockedUntil.IsZero():
			flags += "locked until " + p.LockedUntil.Local().Format(time.DateTime) + " "
		case p.Locked:
			flags += "locked "
		}
		if p.Partial {
			flags += "partial"
		}
		if multi {
			w := p.Writer.Appliance
			if w == "" {
				w = "-" // written before the repository had several writers
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", short(p.ID), p.VM.Name, p.Time.Local().Format(time.DateTime),
				len(p.Disks), humanBytes(p.LogicalBytes), short(p.Parent), w, flags)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", short(p.ID), p.VM.Name, p.Time.Local().Format(time.DateTime),
			len(p.Disks), humanBytes(p.LogicalBytes), short(p.Parent), flags)
	}
	return tw.Flush()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func humanBytes(n int64) string { return progress.Bytes(n) }

func runRepoStats(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo stats")
	rf := addRepoFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	r, _, err := rf.parseAndOpen(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer r.Close()
	st, err := r.Stats(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.stdout, st)
	}
	fmt.Fprintf(env.stdout, "restore points:    %d\nlogical bytes:     %s\nunique bytes:      %s\nstored bytes:      %s\nbytes on disk:     %s\ndedup ratio:       %.2f\ncompression ratio: %.2f\n",
		st.Points, humanBytes(st.LogicalBytes), humanBytes(st.UniqueBytes), humanBytes(st.StoredBytes),
		humanBytes(st.DiskBytes), st.DedupRatio, st.CompressionRatio)
	return nil
}

func runRepoCheck(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo check")
	rf := addRepoFlags(fs)
	readData := fs.Bool("read-data", false, "read, decrypt and verify every blob")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	r, _, err := rf.parseAndOpen(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer r.Close()
	bar := newProgress(env, *asJSON)
	defer bar.Finish()
	rep, err := r.Check(ctx, repository.CheckOptions{ReadData: *readData}, repoProgress(bar, "check"))
	bar.Finish()
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(env.stdout, rep); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintf(env.stdout, "problem: %s\n", p)
		}
	}
	if !rep.Clean() {
		for _, p := range rep.Problems {
			if p.Kind == repository.ProblemMissingRecord || (p.Kind == repository.ProblemBadPoint && strings.Contains(p.Message, "commit record")) {
				fmt.Fprintf(env.stderr, "to rewrite the damaged commit records from the catalog and the manifests: appliance repo repair --repo %s\n", rf.dir)
				break
			}
		}
		return fmt.Errorf("repository is damaged: %d problem(s); damaged restore points: %v", len(rep.Problems), rep.DamagedPoints())
	}
	if !*asJSON {
		fmt.Fprintln(env.stdout, "no errors were found")
	}
	return nil
}

func runRepoReclaim(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo reclaim")
	rf := addRepoFlags(fs)
	r, _, err := rf.parseAndOpen(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer r.Close()
	bar := newProgress(env, false)
	defer bar.Finish()
	rep, err := r.Reclaim(ctx, repoProgress(bar, "reclaim"))
	bar.Finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "reclaimed %s: %d packs deleted, %d repacked, %d orphan files removed; %d live blobs kept, %d dead removed, %d dead left in mostly-live packs\n",
		humanBytes(rep.BytesFreed), rep.PacksDeleted, rep.PacksRepacked, rep.OrphanFiles, rep.LiveBlobs, rep.DeadBlobs, rep.DeadBlobsKept)
	if n := len(rep.Held); n > 0 {
		fmt.Fprintf(env.stdout, "%d packs are under object lock and kept, the first until %s, the last until %s\n",
			n, rep.Held[0].Until.Format(time.RFC3339), rep.Held[n-1].Until.Format(time.RFC3339))
	}
	return nil
}

func runRepoExtendLocks(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo extend-locks")
	rf := addRepoFlags(fs)
	r, _, err := rf.parseAndOpen(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer r.Close()
	if r.Config().ObjectLock == nil {
		return fmt.Errorf("%w: repo extend-locks: the repository has no object lock (made without --immutable)", errUsage)
	}
	bar := newProgress(env, false)
	defer bar.Finish()
	rep, err := r.ExtendLocks(ctx, repoProgress(bar, "extend-locks"))
	bar.Finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "%d restore points, %d packs they need; object lock extended on %d\n", rep.Points, rep.Packs, rep.Extended)
	return nil
}

func runRepoRecatalog(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo recatalog")
	rf := addRepoFlags(fs)
	r, _, err := rf.parseAndOpen(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer r.Close()
	bar := newProgress(env, false)
	defer bar.Finish()
	err = r.Recatalog(ctx, repoProgress(bar, "recatalog"))
	bar.Finish()
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "catalog rebuilt from packs")
	return nil
}

// repoProgress shows a repository operation's phases (counts of packs,
// points, blobs) on bar; nil without a bar.
func repoProgress(bar *progress.Bar, op string) func(repository.Progress) {
	if bar == nil {
		return nil
	}
	return func(p repository.Progress) { bar.Update(op+" "+p.Phase, p.Done, p.Total, false) }
}

// pointCmd builds the delete/lock/unlock commands, which differ only in the
// repository method they call.
func pointCmd(verb string, op func(*repository.Repository, context.Context, string) error) func(context.Context, *cliEnv, []string) error {
	return func(ctx context.Context, env *cliEnv, args []string) error {
		fs := newFlagSet(env, "repo "+verb)
		rf := addRepoFlags(fs)
		r, pos, err := rf.parseAndOpen(ctx, env, fs, args)
		if err != nil {
			return err
		}
		defer r.Close()
		if len(pos) != 1 {
			return fmt.Errorf("%w: repo %s takes exactly one restore point id", errUsage, verb)
		}
		p, err := r.Point(ctx, pos[0])
		if err != nil {
			return err
		}
		if err := op(r, ctx, p.ID); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "%s: %s\n", verb, p.ID)
		return nil
	}
}
