package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/vmvault/vmvault/internal/state"
)

// StatePath is the daemon's state.db in its state directory.
func StatePath(stateDir string) string { return filepath.Join(stateDir, "state.db") }

// StateCopies lists the daemon's copies of state.db kept under stateDir
// (`appliance state backups`), newest first, each verified; it returns the
// directory that holds them too.
func StateCopies(stateDir string) (dir string, copies []state.Copy, err error) {
	dir = state.CopiesDir(StatePath(stateDir))
	copies, err = state.ListCopies(dir, true)
	return dir, copies, err
}

// restoreStateCopy installs a copy of state.db before the daemon opens it
// (serve --restore-state): from is a copy's path or "newest". The file it
// replaces is kept beside it and named in the log.
func restoreStateCopy(dbPath, from string, now time.Time, log *slog.Logger) error {
	copyPath := from
	var taken time.Time
	if from == "newest" {
		c, ok, err := state.NewestGoodCopy(state.CopiesDir(dbPath))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("--restore-state newest: no copy in %s verifies", state.CopiesDir(dbPath))
		}
		copyPath, taken = c.Path, c.Time
	}
	aside, err := state.InstallCopy(dbPath, copyPath, now)
	if err != nil {
		return fmt.Errorf("--restore-state: %w", err)
	}
	attrs := []any{"copy", copyPath, "state", dbPath}
	if !taken.IsZero() {
		attrs = append(attrs, "copy_time", taken.Format(time.RFC3339))
	}
	if aside != "" {
		attrs = append(attrs, "replaced_file_kept_as", aside)
	}
	log.Warn("state database restored from a copy: changes made after the copy was taken are gone", attrs...)
	return nil
}
