package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/repos"
)

// newFileRestore builds file-level restore for the daemon: the service the
// API browses and downloads through, whose background indexer (run by Run)
// catalogues new restore points (within a minute of their backup) and
// drops the catalogs of points retention or an administrator deleted.
// Catalogs live in <state_dir>/catalog (service/filerestore/catalog/FORMAT.md); they are a
// cache. Close closes the service.
func (d *Daemon) newFileRestore(rs *repos.Set) (*filerestore.Service, error) {
	svc, err := filerestore.New(filerestore.Config{
		Source:     rs,
		CatalogDir: filepath.Join(d.cfg.StateDir, "catalog"),
		Logf:       func(f string, a ...any) { d.log.Warn(fmt.Sprintf(f, a...)) },
	})
	if err != nil {
		return nil, err
	}
	d.onClose("file restore", svc.Close)
	return svc, nil
}
