package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/progress"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/instant"
	"github.com/vmvault/vmvault/service/instantvm"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/service/verify"
	"github.com/vmvault/vmvault/vsphere"
)

// InstantConfig is instant VM recovery's NFS export (instant section). The
// ESXi hosts mount it over NFS v3 (TCP): open Listen's port (and 111 for
// the portmapper) from their vmkernel addresses to the appliance.
type InstantConfig struct {
	// Listen is the NFS and MOUNT address, e.g. ":2049" (required).
	Listen string `json:"listen"`
	// Portmap is the portmapper's address ESXi asks for MOUNT's port;
	// default ":111"; "off" for none.
	Portmap string `json:"portmap"`
	// Advertise is the appliance's address as the hosts reach it (the NFS
	// datastore's remote host; required).
	Advertise string `json:"advertise"`
	// Allow lists the hosts' vmkernel networks (CIDRs or addresses); only
	// they get answers (required).
	Allow []string `json:"allow"`
	// OverlayLimitMiB caps what a recovered VM may write per disk before
	// its writes fail (default 1024).
	OverlayLimitMiB int64 `json:"overlay_limit_mib"`
}

func (c *InstantConfig) validate(bad func(field, format string, args ...any)) {
	if c == nil {
		return
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("instant.listen", "want host:port, e.g. :2049 (%v)", err)
	}
	if c.Portmap != "" && c.Portmap != "off" {
		if _, _, err := net.SplitHostPort(c.Portmap); err != nil {
			bad("instant.portmap", "want host:port or off (%v)", err)
		}
	}
	if _, err := netip.ParseAddr(c.Advertise); err != nil {
		bad("instant.advertise", "want the IP address the ESXi hosts reach the appliance at (%v)", err)
	}
	if len(c.Allow) == 0 {
		bad("instant.allow", "list the ESXi hosts' vmkernel networks (CIDRs): nothing else may mount an export")
	} else if _, err := instant.ParseAllow(c.Allow); err != nil {
		bad("instant.allow", "%v", err)
	}
	if c.OverlayLimitMiB < 0 {
		bad("instant.overlay_limit_mib", "must not be negative")
	}
}

// newInstant starts the NFS export and the session manager, and resumes
// the sessions a previous run left running.
func (d *Daemon) newInstant(cfg *InstantConfig, stateDir string, client *vsphere.Client, rs *repos.Set, clk clock.Clock, log *slog.Logger) (*instantvm.Manager, error) {
	allow, err := instant.ParseAllow(cfg.Allow)
	if err != nil {
		return nil, err
	}
	pm := cfg.Portmap
	switch pm {
	case "":
		pm = ":111"
	case "off":
		pm = ""
	}
	srv := instant.NewServer(instant.ServerOptions{Listen: cfg.Listen, Portmap: pm, Allow: allow})
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("instant recovery: %w", err)
	}
	limit := cfg.OverlayLimitMiB << 20
	m, err := instantvm.New(instantvm.Config{Dir: filepath.Join(stateDir, "instant"), Advertise: cfg.Advertise, OverlayLimit: limit, Clock: clk}, client, rs, srv)
	if err != nil {
		cancel()
		srv.Close()
		return nil, err
	}
	// Closed in reverse: sessions first (overlays kept for the next run),
	// then the server.
	d.onClose("instant recovery NFS server", func() error { cancel(); return srv.Close() })
	d.onClose("instant recovery sessions", m.Close)
	if err := m.Resume(context.Background()); err != nil {
		log.Error("instant recovery: some sessions could not be resumed", "err", err)
	}
	log.Info("instant recovery NFS export listening", "nfs", srv.Addr(), "portmap", srv.PortmapAddr(), "advertise", cfg.Advertise)
	return m, nil
}

// newVerification builds restore point verification: results in
// <state_dir>/verification; boot mode only when instant recovery runs
// (ivm and client set), walk mode always.
func (d *Daemon) newVerification(stateDir string, rs *repos.Set, ivm *instantvm.Manager, client *vsphere.Client, clk clock.Clock) (*verification.Manager, error) {
	walker, err := verify.New(rs, clk)
	if err != nil {
		return nil, err
	}
	cfg := verification.Config{Dir: filepath.Join(stateDir, "verification"), Points: rs, Walker: walker, Clock: clk}
	if ivm != nil && client != nil {
		cfg.Boot, cfg.Guest = ivm, client
	}
	return verification.New(cfg)
}

// Events of instant recovery's overlays.
const (
	EventOverlayHigh = "instant.overlay-high"
	EventOverlayFull = "instant.overlay-full"
)

// overlayEvery is how often the overlays' use is checked.
const overlayEvery = 30 * time.Second

// watchOverlays emits an event when a session's overlay passes 80% of its
// limit (migrate the VM before it fills) and when it is full (the guest's
// writes fail), until ctx ends.
func watchOverlays(ctx context.Context, m *instantvm.Manager, clk clock.Clock, emit func(policy.Event)) {
	for {
		for _, a := range m.OverlayAlerts() {
			r := a.Record
			e := policy.Event{Severity: policy.SeverityWarning, Kind: EventOverlayHigh, Subject: r.VM.Name, Repository: r.Repository,
				Message: fmt.Sprintf("instant recovery %s of %s: the overlay holds %s of its %s; migrate the VM to production storage before it fills (then its writes fail)",
					r.ID, r.VM.Name, progress.Bytes(r.OverlayUsed), progress.Bytes(r.OverlayLimit))}
			if a.Full {
				e.Severity, e.Kind = policy.SeverityError, EventOverlayFull
				e.Message = fmt.Sprintf("instant recovery %s of %s: the overlay is full (%s): the VM's writes fail until it is migrated or stopped",
					r.ID, r.VM.Name, progress.Bytes(r.OverlayLimit))
			}
			emit(e)
		}
		t := clk.NewTimer(overlayEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}
