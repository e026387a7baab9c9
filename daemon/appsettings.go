package daemon

// The console's settings over the configuration file's (service/appsettings):
// here the configuration file's side of them, which the daemon reads at
// start too (the sections that apply, the repositories added from the
// console), and the service's wiring.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/appsettings"
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

var (
	_ web.ApplianceSettings = (*appsettings.Service)(nil)
	_ web.RepositoryAdder   = (*appsettings.Service)(nil)
	_ web.RepositoryRemover = (*appsettings.Service)(nil)
)

// newAppSettings builds the console's settings service over the daemon.
func (d *Daemon) newAppSettings(st *settings.Bolt, mail *feed.MailSwitch, src *feed.Source, rs *repos.Set, runner *backups.Runner, tester *topology.VCenterTester, active *vsphere.Config) *appsettings.Service {
	cfg := appsettings.Config{
		Store: st, Repos: rs, Log: d.log, Location: d.loc, StateDir: d.cfg.StateDir, RepoInit: d.opts.RepoInit,
		VCenter: func(ctx context.Context) (*appsettings.VCenter, string, string, error) {
			vc, pw, source, err := d.vcenterEffective(ctx, st)
			if vc == nil {
				return nil, pw, source, err
			}
			return &appsettings.VCenter{URL: vc.URL, Username: vc.Username, Thumbprint: vc.Thumbprint, Insecure: vc.Insecure}, pw, source, err
		},
		YAMLMaintenance: appsettings.Maintenance{Window: d.cfg.Maintenance.Window, FullCheckDays: d.cfg.Maintenance.FullCheckDays},
		Mail:            appMail{d: d, st: st, mail: mail, src: src},
		Jobs:            d.db, CopyJobs: d.copyStore, Tasks: d.tasks,
		Opened: d.addOpenRepository, Forget: d.forgetRepository, Changed: d.saver.Changed,
	}
	if active != nil {
		cfg.Active = &appsettings.Connection{URL: active.URL, Username: active.Username, Password: active.Password, Thumbprint: active.Thumbprint, Insecure: active.Insecure}
	}
	if tester != nil {
		cfg.SetConfigured = func(c appsettings.Connection) {
			tester.SetConfigured(&vsphere.Config{URL: c.URL, Username: c.Username, Password: c.Password, Thumbprint: c.Thumbprint, Insecure: c.Insecure})
		}
	}
	if sc := d.cfg.SMTP; sc != nil {
		cfg.YAMLSMTP = &api.SMTPSettings{Enabled: true, Host: sc.Host, Port: sc.Port, TLS: sc.TLS, Username: sc.Username, From: sc.From, To: sc.To,
			DailyReportAt: *sc.DailyReportAt, Alerts: *sc.Alerts, PasswordSet: sc.PasswordFile != "" || sc.PasswordEnv != "", Source: api.SourceYAML}
	}
	if d.sched != nil {
		cfg.Scheduler = d.sched
	}
	if runner != nil {
		cfg.AddBackups, cfg.RemoveBackups = runner.Add, runner.Remove
	}
	for _, rc := range d.cfg.Repositories {
		cfg.Configured = append(cfg.Configured, appsettings.Repo{Name: rc.Name, Path: rc.Path})
	}
	return appsettings.New(cfg)
}

// appMail is the mail section's daemon side: the configuration file's
// form (SMTPConfig) and the notifier behind the mail switch.
type appMail struct {
	d    *Daemon
	st   *settings.Bolt
	mail *feed.MailSwitch
	src  *feed.Source
}

func (m appMail) Password(ctx context.Context) (string, error) {
	_, pw, _, err := m.d.smtpEffective(ctx, m.st)
	return pw, err
}

func (m appMail) Check(s api.SMTPSettings) error {
	_, err := m.d.consoleSMTP(s)
	return err
}

func (m appMail) Build(s api.SMTPSettings) (*notify.Notifier, error) {
	sc, err := m.d.consoleSMTP(s)
	if err != nil {
		return nil, err
	}
	return m.d.buildNotifier(sc, s.Password, m.src)
}

func (m appMail) Effective(ctx context.Context) (*notify.Notifier, error) {
	sc, pw, _, err := m.d.smtpEffective(ctx, m.st)
	if err != nil || sc == nil {
		return nil, err
	}
	return m.d.buildNotifier(sc, pw, m.src)
}

func (m appMail) Swap(nt *notify.Notifier) { m.mail.Swap(nt) }

func (m appMail) LogEnabled(s api.SMTPSettings) {
	if sc, err := m.d.consoleSMTP(s); err == nil {
		m.d.logMail(sc)
	}
}

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
	return appsettings.MaintenanceEffective(ctx, st, appsettings.Maintenance{Window: d.cfg.Maintenance.Window, FullCheckDays: d.cfg.Maintenance.FullCheckDays})
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

// forgetRepository drops a removed repository from the daemon's own map
// (the configuration saver, the space watch).
func (d *Daemon) forgetRepository(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.repos, name)
}

// openRepositories returns the open repositories now (a copy).
func (d *Daemon) openRepositories() map[string]*repository.Repository {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]*repository.Repository, len(d.repos))
	for n, r := range d.repos {
		out[n] = r
	}
	return out
}
