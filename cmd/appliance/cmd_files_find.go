package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/filerestore/catalog"
)

func init() {
	register(&command{name: "files find", summary: "find files across the restore points of a repository (file catalog)", run: runFilesFind})
}

// findHitJSON is one row of `files find --json`: one path in one point.
type findHitJSON struct {
	RestorePoint string    `json:"restorePoint"`
	VM           string    `json:"vm"`
	Time         time.Time `json:"time"`
	Volume       string    `json:"volume"`
	Path         string    `json:"path"`
	Type         string    `json:"type"`
	Size         int64     `json:"size"`
	Mtime        time.Time `json:"mtime"`
}

// defaultCatalogDir is where the CLI keeps catalogs: the user's cache
// directory ($XDG_CACHE_HOME/vmvault/catalog, ~/.cache/vmvault/catalog).
func defaultCatalogDir(env *cliEnv) string {
	if x := env.getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "vmvault", "catalog")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "vmvault", "catalog")
	}
	return filepath.Join(os.TempDir(), "vmvault-catalog")
}

func runFilesFind(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "files find")
	rf := addRepoFlags(fs)
	vm := fs.String("vm", "", "only restore points of this VM (name or instance UUID)")
	since := fs.String("since", "", "only restore points taken at or after this time (RFC 3339 or YYYY-MM-DD)")
	catDir := fs.String("catalog", "", "catalog directory (default $XDG_CACHE_HOME/vmvault/catalog)")
	limit := fs.Int("limit", 1000, "at most this many paths")
	asJSON := fs.Bool("json", false, "print a JSON list, one object per path and restore point")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: give exactly one PATTERN (a substring of the path, or a glob: '*.conf', '/home/*/report.docx')", errUsage)
	}
	q := catalog.Query{Pattern: pos[0], VM: *vm, Limit: *limit}
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			if t, err = time.ParseInLocation("2006-01-02", *since, time.Local); err != nil {
				return fmt.Errorf("%w: --since %q: want RFC 3339 or YYYY-MM-DD", errUsage, *since)
			}
		}
		q.Since = t
	}
	if *catDir == "" {
		*catDir = defaultCatalogDir(env)
	}
	r, err := rf.open(ctx, env)
	if err != nil {
		return err
	}
	defer r.Close()
	svc, err := filerestore.New(filerestore.Config{Source: filerestore.Single("repo", r), CatalogDir: *catDir,
		Logf: func(f string, a ...any) { fmt.Fprintf(env.stderr, "warning: "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer svc.Close()
	// Points without a catalog are indexed now; later runs find them at once.
	last := ""
	if err := svc.IndexPending(ctx, func(_, point string, n int64) {
		if point != last {
			fmt.Fprintf(env.stderr, "indexing restore point %s…\n", short(point))
			last = point
		}
	}); err != nil {
		return err
	}
	res, err := svc.Search(ctx, q)
	if err != nil {
		return err
	}
	rows := []findHitJSON{}
	for _, h := range res.Hits {
		for _, v := range h.Versions {
			rows = append(rows, findHitJSON{RestorePoint: v.RestorePoint, VM: h.VM, Time: v.Time, Volume: h.Volume, Path: h.Path, Type: h.Type, Size: v.Size, Mtime: v.Mtime})
		}
	}
	for _, pp := range res.Partial {
		fmt.Fprintf(env.stderr, "warning: the catalog of restore point %s is partial (%s); files it did not reach are not found: browse the point with `files ls`\n", short(pp.RestorePoint), pp.Reason)
	}
	if res.Truncated {
		fmt.Fprintf(env.stderr, "warning: more than %d paths match; showing the first (narrow the pattern or raise --limit)\n", *limit)
	}
	if *asJSON {
		return writeJSON(env.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(env.stderr, "no match")
		return nil
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESTORE POINT\tVM\tTIME\tVOLUME\tPATH\tSIZE\tMTIME")
	for _, x := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", short(x.RestorePoint), x.VM, x.Time.Local().Format("2006-01-02 15:04"),
			x.Volume, x.Path, humanBytes(x.Size), x.Mtime.Local().Format("2006-01-02 15:04:05"))
	}
	return tw.Flush()
}
