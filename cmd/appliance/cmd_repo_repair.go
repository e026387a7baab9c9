package main

import (
	"context"
	"fmt"
)

func init() {
	register(&command{name: "repo repair", summary: "rewrite missing or damaged commit records from the catalog and the verified manifests", run: runRepoRepair})
}

// runRepoRepair rewrites the commit records check reports missing or
// unreadable, for points the catalog lists and whose manifest verifies
// (repository.Repair); the others are reported. Exit 0 only when every
// record is sound afterwards.
func runRepoRepair(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "repo repair")
	rf := addRepoFlags(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	r, _, err := rf.parseAndOpen(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := r.Repair(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(env.stdout, rep); err != nil {
			return err
		}
	} else {
		for _, x := range rep.Results {
			fmt.Fprintf(env.stdout, "%s %s: %s\n", x.Action, x.Point, x.Message)
		}
		fmt.Fprintf(env.stdout, "%d commit record(s) rewritten, %d left as they are\n", rep.Rewritten(), rep.Unrepaired())
	}
	if n := rep.Unrepaired(); n > 0 {
		return fmt.Errorf("%d commit record(s) could not be repaired (see above)", n)
	}
	return nil
}
