package daemon

// Email: the notifier built from the smtp section, fed by the scheduler's
// events and by the API's backups, restores and checks, and the source its
// daily report reads (state database, repositories, inventory); the
// switch, the alerting wrappers and the source are service/notify/feed's,
// the smtp configuration and its wiring the daemon's.

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/notify/feed"
	"github.com/vmvault/vmvault/web"
)

// startNotifier builds the daemon's mail switch over the effective smtp
// settings (the console's when saved, else the configuration file's; sc
// nil: no mail) and starts it. It sets wcfg.Mailer and wraps wcfg's
// Backups, Restores and Repositories so that failures of operations
// started through the API alert too; call it after those are set and
// before web.New. The switch is always there, so that mail configured
// later from the console alerts the same way. Close stops it: pending
// alerts are sent within notify.FlushTimeout.
func (d *Daemon) startNotifier(sc *SMTPConfig, pw string, src *feed.Source, wcfg *web.Config) (*feed.MailSwitch, error) {
	ms := &feed.MailSwitch{}
	if sc != nil {
		nt, err := d.buildNotifier(sc, pw, src)
		if err != nil {
			return nil, err
		}
		ms.Swap(nt)
		d.logMail(sc)
	}
	d.onClose("notifier", func() error { ms.Swap(nil); return nil })
	wcfg.Mailer = ms
	if wcfg.Backups != nil {
		wcfg.Backups = feed.AlertingBackups{Backups: wcfg.Backups, Alerter: ms}
	}
	if wcfg.Restores != nil {
		wcfg.Restores = feed.AlertingRestores{Restores: wcfg.Restores, Alerter: ms, Repos: src.Repos}
	}
	if wcfg.Repositories != nil {
		wcfg.Repositories = feed.AlertingRepositories{Inner: wcfg.Repositories, Alerter: ms}
	}
	return ms, nil
}

func (d *Daemon) logMail(sc *SMTPConfig) {
	d.log.Info("email enabled", "smtp", sc.Host, "tls", sc.TLS, "to", strings.Join(sc.To, ","), "alerts", *sc.Alerts, "daily_report_at", *sc.DailyReportAt, "repeat_after", *sc.RepeatAfter)
}

// buildNotifier makes a notifier (not started) from a validated smtp
// section and its password.
func (d *Daemon) buildNotifier(sc *SMTPConfig, pw string, src *feed.Source) (*notify.Notifier, error) {
	var pool *x509.CertPool
	if sc.CAFile != "" {
		pem, err := os.ReadFile(sc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("smtp.ca_file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("smtp.ca_file: no PEM certificate in %s", sc.CAFile)
		}
	}
	mlog := src.Log
	sender, err := notify.NewSender(notify.SMTPConfig{
		Host: sc.Host, Port: sc.Port, TLS: notify.TLSMode(sc.TLS), Username: sc.Username, Password: pw,
		From: sc.From, To: sc.To, RootCAs: pool, Clock: d.clk, Logger: mlog,
	})
	if err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	ncfg := notify.Config{Sender: sender, Source: src, Clock: d.clk, Location: d.loc, Alerts: *sc.Alerts, Debounce: d.opts.AlertDebounce,
		RepeatAfter: repeatAfter(sc), ReportLog: d.db, Logger: mlog}
	if at := *sc.DailyReportAt; at != "off" {
		tod, err := notify.ParseTimeOfDay(at)
		if err != nil {
			return nil, fmt.Errorf("smtp.daily_report_at: %w", err)
		}
		ncfg.DailyAt = &tod
	}
	return notify.New(ncfg)
}

// Bounds of smtp.repeat_after: below a minute it would not quiet the
// scheduler's retries; above a week a failing VM would go unmentioned
// between two daily reports' worth of mails for too long.
const (
	minRepeatAfter = time.Minute
	maxRepeatAfter = 7 * 24 * time.Hour
)

// validateRepeatAfter checks smtp.repeat_after and sets its default.
func (s *SMTPConfig) validateRepeatAfter(bad func(field, format string, args ...any)) {
	if s.RepeatAfter == nil {
		d := notify.DefaultRepeatAfter.String()
		s.RepeatAfter = &d
	}
	if *s.RepeatAfter == "off" {
		return
	}
	if d, err := time.ParseDuration(*s.RepeatAfter); err != nil || d < minRepeatAfter || d > maxRepeatAfter {
		bad("smtp.repeat_after", "%q: a duration from 1m to 168h (e.g. 6h), or off", *s.RepeatAfter)
	}
}

// repeatAfter is the validated smtp.repeat_after as notify.Config wants it.
func repeatAfter(sc *SMTPConfig) time.Duration {
	if sc.RepeatAfter == nil {
		return 0 // notify's default
	}
	if *sc.RepeatAfter == "off" {
		return -1
	}
	d, _ := time.ParseDuration(*sc.RepeatAfter)
	return d
}
