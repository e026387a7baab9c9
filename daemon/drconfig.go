package daemon

// Disaster recovery (service/drconfig): the daemon's configuration saved
// into every repository after each change, and imported by `appliance
// serve --import-config REPO` on a fresh state directory. Here only the
// wiring: what drconfig reads and writes of the daemon.

import (
	"github.com/vmvault/vmvault/service/drconfig"
)

// ImportConfig names the repository whose saved configuration a fresh
// daemon imports before it starts (appliance serve --import-config).
type ImportConfig = drconfig.ImportConfig

// drAppliance is the daemon as drconfig sees it: its job, copy job,
// settings and user stores, the configuration file's repositories and the
// open ones.
func (d *Daemon) drAppliance() *drconfig.Appliance {
	a := &drconfig.Appliance{Clock: d.clk, Jobs: d.db, CopyJobs: d.copyStore, Settings: d.settings,
		Open: d.openRepositories, Log: d.log, Stdout: d.opts.Stdout}
	if d.am != nil {
		a.Users = d.am
	}
	for _, rc := range d.cfg.Repositories {
		a.Configured = append(a.Configured, drconfig.SavedRepo{Name: rc.Name, Path: rc.Path})
	}
	return a
}
