package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/vmvault/vmvault/filerestore"
	"github.com/vmvault/vmvault/reposvc"
	"github.com/vmvault/vmvault/web"
)

// startFileRestore starts file-level restore for the daemon: the service
// the API browses and downloads through, and its background indexer, which
// catalogues new restore points (within a minute of their backup) and drops
// the catalogs of points retention or an administrator deleted. Catalogs
// live in <state_dir>/catalog (flr/catalog/FORMAT.md); they are a cache.
func startFileRestore(ctx context.Context, stateDir string, rs *reposvc.Set, log *slog.Logger, d *daemon) (web.FileService, error) {
	svc, err := filerestore.New(filerestore.Config{
		Source:     rs,
		CatalogDir: filepath.Join(stateDir, "catalog"),
		Logf:       func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) },
	})
	if err != nil {
		return nil, err
	}
	ictx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = svc.Run(ictx)
	}()
	d.onClose("file restore", func() error {
		stop()
		<-done
		return svc.Close()
	})
	return svc, nil
}
