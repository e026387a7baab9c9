package main

import "github.com/vmvault/vmvault/internal/progress"

// newProgress returns a bar on env's stderr when it is a terminal and the
// command's output is for people (quiet is --json or an explicit
// line-by-line --progress), or nil (see progress.New).
func newProgress(env *cliEnv, quiet bool) *progress.Bar {
	return progress.New(env.stderr, env.getenv, quiet)
}
