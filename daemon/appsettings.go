package daemon

// Settings the console edits over the configuration file (web.ApplianceSettings)
// and repositories it adds (web.RepositoryAdder).
//
// Precedence: the configuration file (YAML) is the seed. A section saved
// from the console (vCenter connection, mail, maintenance window) wins
// over the YAML's from then on, at every start, until it is reset (DELETE
// /settings/{section}); GET /settings says per section which applies
// ("yaml", "console" or "none"). Mail and the maintenance window change
// live; a new vCenter connection is used from the next start. Passwords
// saved from the console are sealed in state.db with the key file
// <state_dir>/settings.key; repository passphrases are files
// <state_dir>/repositories/<name>.passphrase (0600), as the YAML's
// passphrase_file.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/backups"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/notify/feed"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/settings"
	"github.com/vmvault/vmvault/service/topology"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/web"
	"github.com/vmvault/vmvault/web/api"
)

// appSettings implements web.ApplianceSettings and web.RepositoryAdder.
type appSettings struct {
	d      *Daemon
	store  *settings.Bolt
	mail   *feed.MailSwitch
	src    *feed.Source
	rs     *repos.Set
	runner *backups.Runner         // nil without vCenter
	tester *topology.VCenterTester // tests "the configured connection"
	active *vsphere.Config         // the running connection; nil: none

	mu sync.Mutex // one save or add at a time
}

var (
	_ web.ApplianceSettings = (*appSettings)(nil)
	_ web.RepositoryAdder   = (*appSettings)(nil)
)

// vcenterEffective returns the vCenter section that applies at start: the
// console's when saved (the YAML's roles kept), else the YAML's; nil for
// none. The password is returned in clear, for vsphere.Connect only.
func (d *Daemon) vcenterEffective(ctx context.Context, st *settings.Bolt) (vc *VCenterConfig, pw, source string, err error) {
	saved, ok, err := st.VCenter(ctx)
	if err != nil {
		return nil, "", "", err
	}
	if ok {
		c := VCenterConfig{}
		if d.cfg.VCenter != nil {
			c = *d.cfg.VCenter
		}
		c.URL, c.Username, c.Thumbprint, c.Insecure = saved.URL, saved.Username, saved.Thumbprint, saved.Insecure
		c.PasswordFile, c.PasswordEnv = "", ""
		if saved.Thumbprint != "" || saved.Insecure {
			c.CAFile = ""
		}
		return &c, saved.Password, api.SourceConsole, nil
	}
	if d.cfg.VCenter == nil {
		return nil, "", api.SourceNone, nil
	}
	pw, err = readSecret(d.opts.Getenv, d.cfg.VCenter.PasswordFile, d.cfg.VCenter.PasswordEnv, "vCenter password")
	return d.cfg.VCenter, pw, api.SourceYAML, err
}

// smtpEffective returns the mail section that applies: the console's when
// saved (nil when it turned mail off), else the YAML's.
func (d *Daemon) smtpEffective(ctx context.Context, st *settings.Bolt) (sc *SMTPConfig, pw, source string, err error) {
	saved, ok, err := st.SMTP(ctx)
	if err != nil {
		return nil, "", "", err
	}
	if ok {
		if !saved.Enabled {
			return nil, "", api.SourceConsole, nil
		}
		sc, err := d.consoleSMTP(saved)
		return sc, saved.Password, api.SourceConsole, err
	}
	if d.cfg.SMTP == nil {
		return nil, "", api.SourceNone, nil
	}
	pw, err = readSecret(d.opts.Getenv, d.cfg.SMTP.PasswordFile, d.cfg.SMTP.PasswordEnv, "SMTP password")
	return d.cfg.SMTP, pw, api.SourceYAML, err
}

// maintenanceEffective returns the maintenance window that applies (nil:
// none) and the full check interval.
func (d *Daemon) maintenanceEffective(ctx context.Context, st *settings.Bolt) (w *policy.Window, fullCheck time.Duration, source string, err error) {
	saved, ok, err := st.Maintenance(ctx)
	if err != nil {
		return nil, 0, "", err
	}
	if ok {
		return saved.Window, time.Duration(saved.FullCheckDays) * 24 * time.Hour, api.SourceConsole, nil
	}
	m := d.cfg.Maintenance
	source = api.SourceNone
	if m.Window != nil {
		source = api.SourceYAML
	}
	return m.Window, time.Duration(m.FullCheckDays) * 24 * time.Hour, source, nil
}

// consoleSMTP turns the console's mail section into the configuration
// file's form and validates it by the same rules (the password is given
// directly, not by file). Bad fields are an api.InvalidError named as the
// API names them.
func (d *Daemon) consoleSMTP(m api.SMTPSettings) (*SMTPConfig, error) {
	at, alerts := m.DailyReportAt, m.Alerts
	sc := &SMTPConfig{Host: m.Host, Port: m.Port, TLS: m.TLS, Username: m.Username, From: m.From, To: append([]string(nil), m.To...),
		DailyReportAt: &at, Alerts: &alerts}
	if d.cfg.SMTP != nil {
		sc.RepeatAfter, sc.CAFile = d.cfg.SMTP.RepeatAfter, d.cfg.SMTP.CAFile
	}
	var bad []api.FieldProblem
	sc.validate(func(field, format string, args ...any) {
		if field == "smtp" {
			return // the password_file/password_env rules: the console gives the password itself
		}
		name := strings.TrimPrefix(field, "smtp.")
		switch name {
		case "daily_report_at":
			name = "dailyReportAt"
		case "repeat_after":
			name = "repeatAfter"
		}
		bad = append(bad, api.FieldProblem{Field: name, Message: fmt.Sprintf(format, args...)})
	})
	if m.Username != "" && m.Password == "" {
		bad = append(bad, api.FieldProblem{Field: "password", Message: "required with a username"})
	}
	if m.Username == "" && m.Password != "" {
		bad = append(bad, api.FieldProblem{Field: "username", Message: "required with a password"})
	}
	if len(bad) > 0 {
		return nil, &api.InvalidError{Fields: bad}
	}
	return sc, nil
}

func vcenterView(vc *VCenterConfig, pw, source string) api.VCenterSettings {
	if vc == nil {
		return api.VCenterSettings{Source: api.SourceNone}
	}
	return api.VCenterSettings{URL: vc.URL, Username: vc.Username, Thumbprint: vc.Thumbprint, Insecure: vc.Insecure, PasswordSet: pw != "", Source: source}
}

// Sections implements web.ApplianceSettings.
func (a *appSettings) Sections(ctx context.Context) (api.VCenterSettings, api.SMTPSettings, api.MaintenanceSettings, error) {
	d := a.d
	vc, vpw, vsrc, err := d.vcenterEffective(ctx, a.store)
	if err != nil && vsrc == "" {
		return api.VCenterSettings{}, api.SMTPSettings{}, api.MaintenanceSettings{}, err
	}
	v := vcenterView(vc, vpw, vsrc)
	if a.active != nil {
		v.Active = a.active.URL
	}
	v.RestartNeeded = !sameVCenter(vc, vpw, a.active)

	var m api.SMTPSettings
	saved, ok, err := a.store.SMTP(ctx)
	switch {
	case err != nil:
		return api.VCenterSettings{}, api.SMTPSettings{}, api.MaintenanceSettings{}, err
	case ok:
		m = saved
	case d.cfg.SMTP != nil:
		sc := d.cfg.SMTP
		m = api.SMTPSettings{Enabled: true, Host: sc.Host, Port: sc.Port, TLS: sc.TLS, Username: sc.Username, From: sc.From, To: sc.To,
			DailyReportAt: *sc.DailyReportAt, Alerts: *sc.Alerts, PasswordSet: sc.PasswordFile != "" || sc.PasswordEnv != "", Source: api.SourceYAML}
	default:
		m = api.SMTPSettings{TLS: string(notify.TLSStartTLS), DailyReportAt: "07:00", Alerts: true, Source: api.SourceNone}
	}
	m.Password = ""

	w, fc, msrc, err := d.maintenanceEffective(ctx, a.store)
	if err != nil {
		return api.VCenterSettings{}, api.SMTPSettings{}, api.MaintenanceSettings{}, err
	}
	mt := api.MaintenanceSettings{Window: w, FullCheckDays: int(fc / (24 * time.Hour)), Source: msrc}
	return v, m, mt, nil
}

// sameVCenter reports whether the connection vc would make is the running one.
func sameVCenter(vc *VCenterConfig, pw string, active *vsphere.Config) bool {
	if vc == nil || active == nil {
		return vc == nil && active == nil
	}
	return vc.URL == active.URL && vc.Username == active.Username && pw == active.Password &&
		vc.Thumbprint == active.Thumbprint && vc.Insecure == active.Insecure
}

// SaveVCenter implements web.ApplianceSettings: the connection is used
// from the next start (the vCenter session, inventory, backup engines and
// logins hang off it); the connection test uses it at once.
func (a *appSettings) SaveVCenter(ctx context.Context, v api.VCenterSettings) (api.SectionSaved, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v.Password == "" {
		// Keep the password that applies now: the console's, else the YAML's.
		_, pw, _, err := a.d.vcenterEffective(ctx, a.store)
		if err != nil {
			return api.SectionSaved{}, err
		}
		if pw == "" {
			return api.SectionSaved{}, api.Invalid("password", "required: no password is stored yet")
		}
		v.Password = pw
	}
	if err := a.store.PutVCenter(ctx, v); err != nil {
		return api.SectionSaved{}, err
	}
	if a.tester != nil {
		a.tester.SetConfigured(&vsphere.Config{URL: v.URL, Username: v.Username, Password: v.Password, Thumbprint: v.Thumbprint, Insecure: v.Insecure})
	}
	a.d.log.Info("vCenter connection saved from the console; used from the next start", "url", v.URL, "username", v.Username)
	if a.active != nil && sameVCenter(&VCenterConfig{URL: v.URL, Username: v.Username, Thumbprint: v.Thumbprint, Insecure: v.Insecure}, v.Password, a.active) {
		return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved. It is the connection the appliance uses now."}, nil
	}
	return api.SectionSaved{Applies: api.AppliesRestart, Message: "Saved. The appliance connects to this vCenter at its next start: restart the vmvault service to use it."}, nil
}

// withPassword fills an empty mail password with the one that applies now.
func (a *appSettings) withPassword(ctx context.Context, m *api.SMTPSettings) error {
	if m.Password != "" || m.Username == "" {
		return nil
	}
	_, pw, _, err := a.d.smtpEffective(ctx, a.store)
	if err != nil {
		return err
	}
	m.Password = pw
	return nil
}

// SaveSMTP implements web.ApplianceSettings: the notifier is rebuilt and
// replaced at once (the old one sends what it holds first).
func (a *appSettings) SaveSMTP(ctx context.Context, m api.SMTPSettings) (api.SectionSaved, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.withPassword(ctx, &m); err != nil {
		return api.SectionSaved{}, err
	}
	var nt *notify.Notifier
	var sc *SMTPConfig
	if m.Enabled {
		var err error
		if sc, err = a.d.consoleSMTP(m); err != nil {
			return api.SectionSaved{}, err
		}
		if nt, err = a.d.buildNotifier(sc, m.Password, a.src); err != nil {
			return api.SectionSaved{}, api.Invalid("host", err.Error())
		}
	}
	if err := a.store.PutSMTP(ctx, m); err != nil {
		return api.SectionSaved{}, err
	}
	a.mail.Swap(nt)
	if sc == nil {
		a.d.log.Info("email disabled from the console")
		return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved: no mail is sent."}, nil
	}
	a.d.logMail(sc)
	return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved and applied: alerts and the daily report use this server now."}, nil
}

// SaveMaintenance implements web.ApplianceSettings: the scheduler's window
// is replaced at once.
func (a *appSettings) SaveMaintenance(ctx context.Context, m api.MaintenanceSettings) (api.SectionSaved, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m.Window != nil && m.Window.Location == nil {
		m.Window.Location = a.d.loc
	}
	if err := a.store.PutMaintenance(ctx, m); err != nil {
		return api.SectionSaved{}, err
	}
	return a.applyMaintenance(ctx, m.Window, time.Duration(m.FullCheckDays)*24*time.Hour)
}

func (a *appSettings) applyMaintenance(ctx context.Context, w *policy.Window, fullCheck time.Duration) (api.SectionSaved, error) {
	if a.d.sched == nil {
		return api.SectionSaved{Applies: api.AppliesRestart, Message: "Saved. Maintenance runs with the scheduler, which needs a vCenter connection: it applies once one is connected."}, nil
	}
	var win policy.Window
	if w != nil {
		win = *w
	}
	if err := a.d.sched.SetMaintenance(ctx, win, fullCheck); err != nil {
		return api.SectionSaved{}, fmt.Errorf("apply the maintenance window: %w", err)
	}
	a.d.log.Info("maintenance window changed", "window", !win.IsEmpty())
	if win.IsEmpty() {
		return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved and applied: no maintenance runs by itself."}, nil
	}
	return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved and applied: maintenance runs in this window from now on."}, nil
}

// ResetSection implements web.ApplianceSettings.
func (a *appSettings) ResetSection(ctx context.Context, section string) (api.SectionSaved, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.store.DeleteSection(ctx, section); err != nil {
		return api.SectionSaved{}, err
	}
	d := a.d
	switch section {
	case settings.SectionSMTP:
		sc, pw, _, err := d.smtpEffective(ctx, a.store)
		if err != nil {
			return api.SectionSaved{}, err
		}
		var nt *notify.Notifier
		if sc != nil {
			if nt, err = d.buildNotifier(sc, pw, a.src); err != nil {
				return api.SectionSaved{}, err
			}
		}
		a.mail.Swap(nt)
		return api.SectionSaved{Applies: api.AppliesNow, Message: "The configuration file's mail settings apply again."}, nil
	case settings.SectionMaintenance:
		w, fc, _, err := d.maintenanceEffective(ctx, a.store)
		if err != nil {
			return api.SectionSaved{}, err
		}
		return a.applyMaintenance(ctx, w, fc)
	}
	return api.SectionSaved{Applies: api.AppliesRestart, Message: "The configuration file's vCenter connection applies from the next start."}, nil
}

// TestSMTP implements web.ApplianceSettings: one test mail through unsaved values.
func (a *appSettings) TestSMTP(ctx context.Context, m api.SMTPSettings, to string) error {
	if err := a.withPassword(ctx, &m); err != nil {
		return err
	}
	sc, err := a.d.consoleSMTP(m)
	if err != nil {
		return err
	}
	nt, err := a.d.buildNotifier(sc, m.Password, a.src)
	if err != nil {
		return api.Invalid("host", err.Error())
	}
	return nt.SendTest(ctx, to) // never started: nothing to stop
}

// passphraseDir holds the passphrase files of repositories added from the console.
func (d *Daemon) passphraseDir() string { return filepath.Join(d.cfg.StateDir, "repositories") }

// isRepository reports whether dir holds a repository: its config file
// (repository/FORMAT.md: a directory without config is not a repository).
func isRepository(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "config"))
	return err == nil && fi.Mode().IsRegular()
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// AddRepository implements web.RepositoryAdder.
func (a *appSettings) AddRepository(ctx context.Context, req api.AddRepository) (api.RepositoryInfo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.d
	if a.rs.Has(req.Name) {
		return api.RepositoryInfo{}, api.Invalid("name", fmt.Sprintf("a repository named %q exists: choose another name", req.Name))
	}
	path := filepath.Clean(req.Path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	for _, n := range a.rs.Names() {
		r, err := a.rs.Repo(n)
		if err != nil {
			continue
		}
		dir := r.Dir()
		if rd, err := filepath.EvalSymlinks(dir); err == nil {
			dir = rd
		}
		switch {
		case path == dir && req.Mode == api.RepoOpen:
			return api.RepositoryInfo{}, api.Invalid("path", fmt.Sprintf("repository %q is already open at this path", n))
		case within(path, dir):
			return api.RepositoryInfo{}, api.Invalid("path", fmt.Sprintf("inside repository %q (%s): choose a directory outside it", n, r.Dir()))
		case within(dir, path):
			return api.RepositoryInfo{}, api.Invalid("path", fmt.Sprintf("contains repository %q (%s): choose a directory of its own", n, r.Dir()))
		}
	}
	if within(path, d.cfg.StateDir) || within(d.cfg.StateDir, path) {
		return api.RepositoryInfo{}, api.Invalid("path", "overlaps the appliance's state directory "+d.cfg.StateDir)
	}
	entries, statErr := os.ReadDir(path)
	switch req.Mode {
	case api.RepoCreate:
		switch {
		case statErr == nil && isRepository(path):
			return api.RepositoryInfo{}, api.Invalid("path", "already holds a repository: choose \"open an existing repository\"")
		case statErr == nil && len(entries) > 0:
			return api.RepositoryInfo{}, api.Invalid("path", fmt.Sprintf("not empty and not a repository (%d entries): choose an empty or new directory", len(entries)))
		case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
			return api.RepositoryInfo{}, api.Invalid("path", statErr.Error())
		}
	case api.RepoOpen:
		switch {
		case errors.Is(statErr, fs.ErrNotExist):
			return api.RepositoryInfo{}, api.Invalid("path", "no such directory")
		case statErr != nil:
			return api.RepositoryInfo{}, api.Invalid("path", statErr.Error())
		case !isRepository(path):
			return api.RepositoryInfo{}, api.Invalid("path", "holds no repository (no config file): choose \"create a new repository\" for an empty directory")
		}
	}
	var pass []byte
	if req.Passphrase != "" {
		pass = []byte(req.Passphrase)
	}
	if req.Check && req.Mode == api.RepoCreate {
		return api.RepositoryInfo{Name: req.Name, Path: path, Encrypted: true}, nil
	}
	if req.Mode == api.RepoCreate {
		opts := d.opts.RepoInit
		if opts.Chunker.Algorithm == "" {
			// As `appliance repo init` does: content-defined chunks with a
			// random polynomial of this repository's own.
			p, err := dedup.DefaultParams()
			if err != nil {
				return api.RepositoryInfo{}, fmt.Errorf("create repository %s: chunker: %w", req.Name, err)
			}
			opts.Chunker = repository.ChunkerConfig{Algorithm: p.Algorithm, Polynomial: p.Polynomial, MinSize: p.MinSize, AvgSize: p.AvgSize, MaxSize: p.MaxSize}
		}
		if err := repository.Init(ctx, path, pass, opts); err != nil {
			if errors.Is(err, repository.ErrNotEmpty) {
				return api.RepositoryInfo{}, api.Invalid("path", "not empty and not a repository: choose an empty or new directory")
			}
			var pe *fs.PathError
			if errors.As(err, &pe) {
				// Permission denied, a file in the way, a read-only file system.
				return api.RepositoryInfo{}, api.Invalid("path", "cannot create the repository here: "+pe.Err.Error()+" ("+pe.Path+")")
			}
			return api.RepositoryInfo{}, fmt.Errorf("create repository %s: %w", req.Name, err)
		}
	}
	r, err := repository.Open(ctx, path, pass, repository.OpenOptions{Holder: "daemon (appliance serve)", Logger: d.log.With("repository", req.Name)})
	if err != nil {
		switch {
		case errors.Is(err, repository.ErrWrongPassword):
			return api.RepositoryInfo{}, api.Invalid("passphrase", "wrong passphrase for this repository")
		case errors.Is(err, repository.ErrLocked):
			return api.RepositoryInfo{}, api.Invalid("path", "the repository is in use by another daemon or command")
		case errors.Is(err, repository.ErrNewerFormat):
			return api.RepositoryInfo{}, api.Invalid("path", err.Error())
		}
		return api.RepositoryInfo{}, fmt.Errorf("open repository %s: %w", req.Name, err)
	}
	if req.Check {
		ri := api.RepositoryInfo{Name: req.Name, Path: path, Format: r.Config().Version.String(), Encrypted: r.Config().Encrypted}
		if pts, err := r.List(ctx); err == nil {
			ri.Points = len(pts)
		}
		if err := r.Close(); err != nil {
			return api.RepositoryInfo{}, fmt.Errorf("close repository %s after the check: %w", req.Name, err)
		}
		return ri, nil
	}
	pfile := ""
	if req.Passphrase != "" {
		if pfile, err = writePassphrase(d.passphraseDir(), req.Name, req.Passphrase); err != nil {
			r.Close()
			return api.RepositoryInfo{}, err
		}
	}
	if err := a.store.AddRepository(ctx, settings.Repo{Name: req.Name, Path: path, PassphraseFile: pfile}); err != nil {
		r.Close()
		return api.RepositoryInfo{}, err
	}
	d.addOpenRepository(req.Name, r)
	if err := a.rs.Add(req.Name, r); err != nil {
		return api.RepositoryInfo{}, err
	}
	if a.runner != nil {
		a.runner.Add(req.Name, r)
	}
	d.log.Info("repository added from the console", "name", req.Name, "path", path, "mode", req.Mode, "encrypted", r.Config().Encrypted)
	list, err := a.rs.Repositories(ctx)
	if err != nil {
		return api.RepositoryInfo{}, err
	}
	for _, ri := range list {
		if ri.Name == req.Name {
			return ri, nil
		}
	}
	return api.RepositoryInfo{Name: req.Name, Path: path}, nil
}

// writePassphrase stores a repository's passphrase as the configuration
// file's passphrase_file would: one line, mode 0600, in a 0700 directory.
func writePassphrase(dir, name, pass string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("passphrase directory: %w", err)
	}
	p := filepath.Join(dir, name+".passphrase")
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", fmt.Errorf("write passphrase file: %w", err)
	}
	_, werr := f.WriteString(pass + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("write passphrase file: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("write passphrase file: %w", err)
	}
	return p, nil
}

// addOpenRepository records a repository opened after New: it closes with the daemon.
func (d *Daemon) addOpenRepository(name string, r *repository.Repository) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.repos[name] = r
	d.onClose("repository "+name, r.Close)
}

// openConsoleRepositories opens the repositories added from the console,
// after the configuration file's. One that does not open is logged and
// left out (its jobs fail and say so) rather than keeping the appliance,
// and so the console, from starting; a name the configuration file now
// uses too is the file's.
func (d *Daemon) openConsoleRepositories(ctx context.Context, st *settings.Bolt) error {
	list, err := st.Repositories(ctx)
	if err != nil {
		return err
	}
	for _, rc := range list {
		if _, dup := d.repos[rc.Name]; dup {
			d.log.Warn("repository added from the console has the name of one in the configuration file; the file's is used", "name", rc.Name, "path", rc.Path)
			continue
		}
		pass, err := readSecret(d.opts.Getenv, rc.PassphraseFile, "", "passphrase of repository "+rc.Name)
		if err == nil {
			var pw []byte
			if pass != "" {
				pw = []byte(pass)
			}
			var r *repository.Repository
			r, err = repository.Open(ctx, rc.Path, pw, repository.OpenOptions{Holder: "daemon (appliance serve)", Logger: d.log.With("repository", rc.Name)})
			if err == nil {
				d.onClose("repository "+rc.Name, r.Close)
				d.repos[rc.Name] = r
				d.log.Info("repository opened", "name", rc.Name, "path", rc.Path, "encrypted", r.Config().Encrypted, "added", "console")
				continue
			}
		}
		d.log.Error("repository added from the console did not open; left out", "name", rc.Name, "path", rc.Path, "err", err)
	}
	return nil
}
