package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/vmvault/vmvault/daemon"
	"github.com/vmvault/vmvault/internal/state"
)

// The daemon's state.db (users, tokens, jobs, run history, events) cannot
// be rebuilt from the repositories, so the daemon keeps verified copies of
// it in STATE_DIR/state.db.backups (internal/state). `state backups` lists
// them; `serve --restore-state` starts from one.

func init() {
	register(&command{name: "state backups", summary: "list the daemon's copies of state.db, newest first, and whether each verifies", run: runStateBackups})
}

func runStateBackups(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "state backups")
	cfgPath := fs.String("config", "", "the daemon's YAML configuration (its state_dir)")
	stateDir := fs.String("state-dir", "", "the daemon's state directory (instead of --config)")
	asJSON := fs.Bool("json", false, "print a JSON array, newest first")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	dir := *stateDir
	switch {
	case (*cfgPath == "") == (dir == ""):
		return fmt.Errorf("%w: give --config FILE or --state-dir DIR", errUsage)
	case *cfgPath != "":
		cfg, err := daemon.LoadConfig(*cfgPath)
		if err != nil {
			return err
		}
		dir = cfg.StateDir
	}
	copiesDir, copies, err := daemon.StateCopies(dir)
	if err != nil {
		return err
	}
	if *asJSON {
		type copyJSON struct {
			Path     string    `json:"path"`
			Time     time.Time `json:"time"`
			Size     int64     `json:"size"`
			Verified bool      `json:"verified"`
			Error    string    `json:"error,omitempty"`
		}
		out := []copyJSON{}
		for _, c := range copies {
			j := copyJSON{Path: c.Path, Time: c.Time, Size: c.Size, Verified: c.Err == nil}
			if c.Err != nil {
				j.Error = c.Err.Error()
			}
			out = append(out, j)
		}
		return writeJSON(env.stdout, out)
	}
	if len(copies) == 0 {
		fmt.Fprintf(env.stdout, "no copies in %s\n", copiesDir)
		return nil
	}
	printCopies(env.stdout, copies)
	return nil
}

func printCopies(w io.Writer, copies []state.Copy) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSIZE\tSTATUS\tPATH")
	for _, c := range copies {
		status := "ok"
		if c.Err != nil {
			status = "DAMAGED: " + c.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", c.Time.Format(time.RFC3339), c.Size, status, c.Path)
	}
	tw.Flush()
}
