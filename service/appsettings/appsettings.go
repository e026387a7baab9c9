package appsettings

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
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/settings"
	"github.com/vmvault/vmvault/web/api"
)

// VCenter is a vCenter connection as the settings show and compare it
// (its password apart).
type VCenter struct {
	URL, Username, Thumbprint string
	Insecure                  bool
}

// Connection is a vCenter connection with its password: the fields of
// vsphere.Config the settings save and compare.
type Connection struct {
	URL, Username, Password, Thumbprint string
	Insecure                            bool
}

// Maintenance is the configuration file's maintenance section.
type Maintenance struct {
	Window        *policy.Window
	FullCheckDays int
}

// Repo is a repository of the configuration file.
type Repo struct{ Name, Path string }

// Mail is the daemon's side of the mail section: it knows the
// configuration file's form of it and the notifier it runs.
type Mail interface {
	// Password returns the mail password that applies now: the
	// console's, else the configuration file's.
	Password(ctx context.Context) (string, error)
	// Check validates the console's section by the configuration file's
	// rules (the password is given directly, not by file); bad fields are
	// an api.InvalidError named as the API names them.
	Check(m api.SMTPSettings) error
	// Build makes a notifier (not started) from a checked section.
	Build(m api.SMTPSettings) (*notify.Notifier, error)
	// Effective makes the notifier (not started) of the section that
	// applies now; nil: no mail.
	Effective(ctx context.Context) (*notify.Notifier, error)
	// Swap replaces the running notifier (nil: no mail); the old one
	// sends what it holds first.
	Swap(nt *notify.Notifier)
	// LogEnabled logs that mail is sent through m now.
	LogEnabled(m api.SMTPSettings)
}

// Scheduler takes a new maintenance window (policy.Scheduler).
type Scheduler interface {
	SetMaintenance(ctx context.Context, w policy.Window, fullCheck time.Duration) error
}

// JobLister lists the backup jobs (internal/state.DB).
type JobLister interface {
	Jobs(ctx context.Context) ([]policy.Job, error)
}

// CopyJobLister lists the copy jobs (copyjob.Store).
type CopyJobLister interface {
	Jobs(ctx context.Context) ([]copyjob.Job, error)
}

// TaskLister lists the tasks (task.Registry).
type TaskLister interface {
	List(ctx context.Context, limit int) ([]task.Info, error)
}

// Config is what the service reads and changes of the appliance.
type Config struct {
	Store    *settings.Bolt
	Repos    *repos.Set
	Log      *slog.Logger
	Location *time.Location // the appliance's time zone: a window's default
	StateDir string
	// RepoInit are the options of repositories created from the console
	// (daemon.Options.RepoInit).
	RepoInit repository.InitOptions

	// VCenter returns the vCenter section that applies at start (nil:
	// none), its password and its source; with the configuration file's
	// password unreadable it returns the section, api.SourceYAML and the
	// error.
	VCenter func(ctx context.Context) (vc *VCenter, pw, source string, err error)
	// Active is the running vCenter connection; nil: none.
	Active *Connection
	// SetConfigured tells the vCenter test of "the configured connection"
	// about a saved one; nil: no test.
	SetConfigured func(Connection)
	// YAMLSMTP is the configuration file's mail section as the API shows
	// it (source yaml); nil: none.
	YAMLSMTP *api.SMTPSettings
	// YAMLMaintenance is the configuration file's maintenance section.
	YAMLMaintenance Maintenance
	Mail            Mail
	Scheduler       Scheduler // nil without vCenter

	// Configured are the configuration file's repositories (never removed
	// from the console).
	Configured []Repo
	Jobs       JobLister
	CopyJobs   CopyJobLister
	Tasks      TaskLister
	// Opened records a repository added from the console with the daemon
	// (it closes with it); Forget drops a removed one.
	Opened func(name string, r *repository.Repository)
	Forget func(name string)
	// AddBackups and RemoveBackups give a repository its backup engine and
	// take it back; nil without vCenter.
	AddBackups    func(name string, r *repository.Repository)
	RemoveBackups func(name string)
	// Changed says the configuration changed (the saver into the
	// repositories).
	Changed func()
}

// Service implements web.ApplianceSettings, web.RepositoryAdder and
// web.RepositoryRemover.
type Service struct {
	cfg   Config
	store *settings.Bolt
	rs    *repos.Set
	log   *slog.Logger

	mu sync.Mutex // one save or add at a time
}

// New returns the service over cfg.
func New(cfg Config) *Service {
	return &Service{cfg: cfg, store: cfg.Store, rs: cfg.Repos, log: cfg.Log}
}

// MaintenanceEffective returns the maintenance window that applies (nil:
// none) and the full check interval: the console's section saved in st,
// else the configuration file's (yaml).
func MaintenanceEffective(ctx context.Context, st *settings.Bolt, yaml Maintenance) (w *policy.Window, fullCheck time.Duration, source string, err error) {
	saved, ok, err := st.Maintenance(ctx)
	if err != nil {
		return nil, 0, "", err
	}
	if ok {
		return saved.Window, time.Duration(saved.FullCheckDays) * 24 * time.Hour, api.SourceConsole, nil
	}
	m := yaml
	source = api.SourceNone
	if m.Window != nil {
		source = api.SourceYAML
	}
	return m.Window, time.Duration(m.FullCheckDays) * 24 * time.Hour, source, nil
}

func vcenterView(vc *VCenter, pw, source string) api.VCenterSettings {
	if vc == nil {
		return api.VCenterSettings{Source: api.SourceNone}
	}
	return api.VCenterSettings{URL: vc.URL, Username: vc.Username, Thumbprint: vc.Thumbprint, Insecure: vc.Insecure, PasswordSet: pw != "", Source: source}
}

// Sections implements web.ApplianceSettings.
func (a *Service) Sections(ctx context.Context) (api.VCenterSettings, api.SMTPSettings, api.MaintenanceSettings, error) {
	vc, vpw, vsrc, err := a.cfg.VCenter(ctx)
	if err != nil && vsrc == "" {
		return api.VCenterSettings{}, api.SMTPSettings{}, api.MaintenanceSettings{}, err
	}
	v := vcenterView(vc, vpw, vsrc)
	if a.cfg.Active != nil {
		v.Active = a.cfg.Active.URL
	}
	v.RestartNeeded = !sameVCenter(vc, vpw, a.cfg.Active)

	var m api.SMTPSettings
	saved, ok, err := a.store.SMTP(ctx)
	switch {
	case err != nil:
		return api.VCenterSettings{}, api.SMTPSettings{}, api.MaintenanceSettings{}, err
	case ok:
		m = saved
	case a.cfg.YAMLSMTP != nil:
		m = *a.cfg.YAMLSMTP
	default:
		m = api.SMTPSettings{TLS: string(notify.TLSStartTLS), DailyReportAt: "07:00", Alerts: true, Source: api.SourceNone}
	}
	m.Password = ""

	w, fc, msrc, err := MaintenanceEffective(ctx, a.store, a.cfg.YAMLMaintenance)
	if err != nil {
		return api.VCenterSettings{}, api.SMTPSettings{}, api.MaintenanceSettings{}, err
	}
	mt := api.MaintenanceSettings{Window: w, FullCheckDays: int(fc / (24 * time.Hour)), Source: msrc}
	return v, m, mt, nil
}

// sameVCenter reports whether the connection vc would make is the running one.
func sameVCenter(vc *VCenter, pw string, active *Connection) bool {
	if vc == nil || active == nil {
		return vc == nil && active == nil
	}
	return vc.URL == active.URL && vc.Username == active.Username && pw == active.Password &&
		vc.Thumbprint == active.Thumbprint && vc.Insecure == active.Insecure
}

// SaveVCenter implements web.ApplianceSettings: the connection is used
// from the next start (the vCenter session, inventory, backup engines and
// logins hang off it); the connection test uses it at once.
func (a *Service) SaveVCenter(ctx context.Context, v api.VCenterSettings) (api.SectionSaved, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v.Password == "" {
		// Keep the password that applies now: the console's, else the YAML's.
		_, pw, _, err := a.cfg.VCenter(ctx)
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
	if a.cfg.SetConfigured != nil {
		a.cfg.SetConfigured(Connection{URL: v.URL, Username: v.Username, Password: v.Password, Thumbprint: v.Thumbprint, Insecure: v.Insecure})
	}
	a.log.Info("vCenter connection saved from the console; used from the next start", "url", v.URL, "username", v.Username)
	if a.cfg.Active != nil && sameVCenter(&VCenter{URL: v.URL, Username: v.Username, Thumbprint: v.Thumbprint, Insecure: v.Insecure}, v.Password, a.cfg.Active) {
		return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved. It is the connection the appliance uses now."}, nil
	}
	return api.SectionSaved{Applies: api.AppliesRestart, Message: "Saved. The appliance connects to this vCenter at its next start: restart the vmvault service to use it."}, nil
}

// withPassword fills an empty mail password with the one that applies now.
func (a *Service) withPassword(ctx context.Context, m *api.SMTPSettings) error {
	if m.Password != "" || m.Username == "" {
		return nil
	}
	pw, err := a.cfg.Mail.Password(ctx)
	if err != nil {
		return err
	}
	m.Password = pw
	return nil
}

// SaveSMTP implements web.ApplianceSettings: the notifier is rebuilt and
// replaced at once (the old one sends what it holds first).
func (a *Service) SaveSMTP(ctx context.Context, m api.SMTPSettings) (api.SectionSaved, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.withPassword(ctx, &m); err != nil {
		return api.SectionSaved{}, err
	}
	var nt *notify.Notifier
	if m.Enabled {
		if err := a.cfg.Mail.Check(m); err != nil {
			return api.SectionSaved{}, err
		}
		var err error
		if nt, err = a.cfg.Mail.Build(m); err != nil {
			return api.SectionSaved{}, api.Invalid("host", err.Error())
		}
	}
	if err := a.store.PutSMTP(ctx, m); err != nil {
		return api.SectionSaved{}, err
	}
	a.cfg.Mail.Swap(nt)
	if !m.Enabled {
		a.log.Info("email disabled from the console")
		return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved: no mail is sent."}, nil
	}
	a.cfg.Mail.LogEnabled(m)
	return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved and applied: alerts and the daily report use this server now."}, nil
}

// SaveMaintenance implements web.ApplianceSettings: the scheduler's window
// is replaced at once.
func (a *Service) SaveMaintenance(ctx context.Context, m api.MaintenanceSettings) (api.SectionSaved, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m.Window != nil && m.Window.Location == nil {
		m.Window.Location = a.cfg.Location
	}
	if err := a.store.PutMaintenance(ctx, m); err != nil {
		return api.SectionSaved{}, err
	}
	return a.applyMaintenance(ctx, m.Window, time.Duration(m.FullCheckDays)*24*time.Hour)
}

func (a *Service) applyMaintenance(ctx context.Context, w *policy.Window, fullCheck time.Duration) (api.SectionSaved, error) {
	if a.cfg.Scheduler == nil {
		return api.SectionSaved{Applies: api.AppliesRestart, Message: "Saved. Maintenance runs with the scheduler, which needs a vCenter connection: it applies once one is connected."}, nil
	}
	var win policy.Window
	if w != nil {
		win = *w
	}
	if err := a.cfg.Scheduler.SetMaintenance(ctx, win, fullCheck); err != nil {
		return api.SectionSaved{}, fmt.Errorf("apply the maintenance window: %w", err)
	}
	a.log.Info("maintenance window changed", "window", !win.IsEmpty())
	if win.IsEmpty() {
		return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved and applied: no maintenance runs by itself."}, nil
	}
	return api.SectionSaved{Applies: api.AppliesNow, Message: "Saved and applied: maintenance runs in this window from now on."}, nil
}

// ResetSection implements web.ApplianceSettings.
func (a *Service) ResetSection(ctx context.Context, section string) (api.SectionSaved, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.store.DeleteSection(ctx, section); err != nil {
		return api.SectionSaved{}, err
	}
	switch section {
	case settings.SectionSMTP:
		nt, err := a.cfg.Mail.Effective(ctx)
		if err != nil {
			return api.SectionSaved{}, err
		}
		a.cfg.Mail.Swap(nt)
		return api.SectionSaved{Applies: api.AppliesNow, Message: "The configuration file's mail settings apply again."}, nil
	case settings.SectionMaintenance:
		w, fc, _, err := MaintenanceEffective(ctx, a.store, a.cfg.YAMLMaintenance)
		if err != nil {
			return api.SectionSaved{}, err
		}
		return a.applyMaintenance(ctx, w, fc)
	}
	return api.SectionSaved{Applies: api.AppliesRestart, Message: "The configuration file's vCenter connection applies from the next start."}, nil
}

// TestSMTP implements web.ApplianceSettings: one test mail through unsaved values.
func (a *Service) TestSMTP(ctx context.Context, m api.SMTPSettings, to string) error {
	if err := a.withPassword(ctx, &m); err != nil {
		return err
	}
	if err := a.cfg.Mail.Check(m); err != nil {
		return err
	}
	nt, err := a.cfg.Mail.Build(m)
	if err != nil {
		return api.Invalid("host", err.Error())
	}
	return nt.SendTest(ctx, to) // never started: nothing to stop
}

// passphraseDir holds the passphrase files of repositories added from the console.
func (a *Service) passphraseDir() string { return filepath.Join(a.cfg.StateDir, "repositories") }

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
func (a *Service) AddRepository(ctx context.Context, req api.AddRepository) (api.RepositoryInfo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
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
	if within(path, a.cfg.StateDir) || within(a.cfg.StateDir, path) {
		return api.RepositoryInfo{}, api.Invalid("path", "overlaps the appliance's state directory "+a.cfg.StateDir)
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
		opts := a.cfg.RepoInit
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
	r, err := repository.Open(ctx, path, pass, repository.OpenOptions{Holder: "daemon (appliance serve)", Logger: a.log.With("repository", req.Name)})
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
		if pfile, err = writePassphrase(a.passphraseDir(), req.Name, req.Passphrase); err != nil {
			r.Close()
			return api.RepositoryInfo{}, err
		}
	}
	if err := a.store.AddRepository(ctx, settings.Repo{Name: req.Name, Path: path, PassphraseFile: pfile}); err != nil {
		r.Close()
		return api.RepositoryInfo{}, err
	}
	a.cfg.Opened(req.Name, r)
	if err := a.rs.Add(req.Name, r); err != nil {
		return api.RepositoryInfo{}, err
	}
	if a.cfg.AddBackups != nil {
		a.cfg.AddBackups(req.Name, r)
	}
	a.log.Info("repository added from the console", "name", req.Name, "path", path, "mode", req.Mode, "encrypted", r.Config().Encrypted)
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
