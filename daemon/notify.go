package daemon

// Email: the notifier built from the smtp section, fed by the scheduler's
// events and by the API's backups, restores and checks, and the source its
// daily report reads (state database, repositories, inventory).

import (
	"context"
	"crypto/x509"
	"fmt"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/vmstatus"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/notify"
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
func (d *Daemon) startNotifier(sc *SMTPConfig, pw string, src *notifySource, wcfg *web.Config) (*mailSwitch, error) {
	ms := &mailSwitch{}
	if sc != nil {
		nt, err := d.buildNotifier(sc, pw, src)
		if err != nil {
			return nil, err
		}
		ms.swap(nt)
		d.logMail(sc)
	}
	d.onClose("notifier", func() error { ms.swap(nil); return nil })
	wcfg.Mailer = ms
	if wcfg.Backups != nil {
		wcfg.Backups = alertingBackups{wcfg.Backups, ms}
	}
	if wcfg.Restores != nil {
		wcfg.Restores = alertingRestores{wcfg.Restores, ms, src.rs}
	}
	if wcfg.Repositories != nil {
		wcfg.Repositories = alertingRepositories{wcfg.Repositories, ms}
	}
	return ms, nil
}

func (d *Daemon) logMail(sc *SMTPConfig) {
	d.log.Info("email enabled", "smtp", sc.Host, "tls", sc.TLS, "to", strings.Join(sc.To, ","), "alerts", *sc.Alerts, "daily_report_at", *sc.DailyReportAt, "repeat_after", *sc.RepeatAfter)
}

// buildNotifier makes a notifier (not started) from a validated smtp
// section and its password.
func (d *Daemon) buildNotifier(sc *SMTPConfig, pw string, src *notifySource) (*notify.Notifier, error) {
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
	mlog := src.log
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

// alerter is what the API's wrappers tell the notifier.
type alerter interface {
	Fail(notify.Failure)
	Succeeded(notify.Failure)
}

// mailSwitch is the daemon's notifier, replaced live when the console
// saves new mail settings: the old one stops (sending what it holds) and
// the new one starts. Without one every call is a no-op and SendTest
// answers web.ErrSMTPNotConfigured.
type mailSwitch struct {
	mu     sync.Mutex
	cur    *notify.Notifier
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *mailSwitch) get() *notify.Notifier {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

func (m *mailSwitch) Fail(f notify.Failure)       { m.get().Fail(f) }
func (m *mailSwitch) Succeeded(f notify.Failure)  { m.get().Succeeded(f) }
func (m *mailSwitch) ObserveEvent(e policy.Event) { m.get().ObserveEvent(e) }

// SendTest implements web.Mailer.
func (m *mailSwitch) SendTest(ctx context.Context, to string) error {
	n := m.get()
	if n == nil {
		return web.ErrSMTPNotConfigured
	}
	return n.SendTest(ctx, to)
}

// swap starts n (nil: no mail) in place of the current notifier, then
// stops that one, which sends its pending alerts first.
func (m *mailSwitch) swap(n *notify.Notifier) {
	m.mu.Lock()
	oldCancel, oldDone := m.cancel, m.done
	m.cur, m.cancel, m.done = n, nil, nil
	if n != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = n.Run(ctx)
		}()
		m.cancel, m.done = cancel, done
	}
	m.mu.Unlock()
	if oldCancel != nil {
		oldCancel()
		<-oldDone
	}
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

// notifyObserve returns an OnEvent observer that feeds nt, then next.
func notifyObserve(nt *mailSwitch, next func(policy.Event)) func(policy.Event) {
	return func(e policy.Event) {
		nt.ObserveEvent(e)
		if next != nil {
			next(e)
		}
	}
}

// alertingBackups alerts on the failed VMs of POST /backups (the
// scheduler's own backups alert through its events).
type alertingBackups struct {
	web.Backups
	nt alerter
}

func (a alertingBackups) Backup(ctx context.Context, req web.BackupRequest, rep web.Reporter) ([]web.BackupOutcome, error) {
	res, err := a.Backups.Backup(ctx, req, rep)
	outs := res
	for _, o := range outs {
		if o.Error == "" && o.RestorePoint != "" { // backed up: ends the VM's streak
			a.nt.Succeeded(notify.Failure{Operation: "backup", Job: req.Job, VM: outcomeLabel(o)})
		}
	}
	if err == nil || ctx.Err() != nil {
		return res, err // a cancelled backup is not a failure to alert on
	}
	listed := false
	for _, o := range outs {
		if o.Error == "" {
			continue
		}
		a.nt.Fail(notify.Failure{Operation: "backup", Job: req.Job, VM: outcomeLabel(o), Repository: req.Repository, Message: o.Error})
		listed = true
	}
	if !listed {
		a.nt.Fail(notify.Failure{Operation: "backup", Job: req.Job, VM: strings.Join(req.VMs, ", "), Repository: req.Repository, Message: err.Error()})
	}
	return res, err
}

// outcomeLabel names the VM as alerts do: its name, else its id.
func outcomeLabel(o web.BackupOutcome) string {
	if o.Name != "" {
		return o.Name
	}
	return o.VM
}

// alertingRestores alerts on failed restores.
type alertingRestores struct {
	web.Restores
	nt alerter
	rs *repos.Set
}

func (a alertingRestores) fail(ctx context.Context, point, what string, err error) {
	f := notify.Failure{Operation: "restore", Message: what + " from restore point " + point + ": " + err.Error()}
	if p, perr := a.rs.Point(context.WithoutCancel(ctx), point); perr == nil {
		f.VM, f.Repository = p.VM.Name, p.Repository
	}
	a.nt.Fail(f)
}

// succeeded ends the VM's restore streak.
func (a alertingRestores) succeeded(ctx context.Context, point string) {
	if p, err := a.rs.Point(context.WithoutCancel(ctx), point); err == nil {
		a.nt.Succeeded(notify.Failure{Operation: "restore", VM: p.VM.Name, Repository: p.Repository})
	}
}

func (a alertingRestores) Restore(ctx context.Context, req web.RestoreRequest, rep web.Reporter) (*web.RestoreResult, error) {
	res, err := a.Restores.Restore(ctx, req, rep)
	switch {
	case err == nil:
		a.succeeded(ctx, req.Point)
	case ctx.Err() == nil:
		a.fail(ctx, req.Point, "restore ("+req.Mode+")", err)
	}
	return res, err
}

func (a alertingRestores) RestoreDisk(ctx context.Context, req web.DiskRestoreRequest, rep web.Reporter) (*web.RestoreResult, error) {
	res, err := a.Restores.RestoreDisk(ctx, req, rep)
	switch {
	case err == nil:
		a.succeeded(ctx, req.Point)
	case ctx.Err() == nil:
		a.fail(ctx, req.Point, fmt.Sprintf("disk %d restore", req.Disk), err)
	}
	return res, err
}

// alertingRepositories alerts when a check started through the API fails
// or finds damage.
type alertingRepositories struct {
	inner web.Repositories
	nt    alerter
}

func (a alertingRepositories) Repositories(ctx context.Context) ([]web.RepositoryInfo, error) {
	return a.inner.Repositories(ctx)
}

func (a alertingRepositories) Repository(ctx context.Context, name string) (web.RepositoryInfo, error) {
	return a.inner.Repository(ctx, name)
}

func (a alertingRepositories) Reclaim(ctx context.Context, name string, rep web.Reporter) (any, error) {
	return a.inner.Reclaim(ctx, name, rep)
}

func (a alertingRepositories) Check(ctx context.Context, name string, full bool, rep web.Reporter) (any, error) {
	res, err := a.inner.Check(ctx, name, full, rep)
	switch {
	case err != nil && ctx.Err() == nil:
		a.nt.Fail(notify.Failure{Operation: "check", Repository: name, Message: err.Error()})
	case err == nil:
		r, ok := res.(*repository.CheckReport)
		if !ok || len(r.Problems) == 0 {
			a.nt.Succeeded(notify.Failure{Operation: "check", Repository: name})
		}
		if ok && len(r.Problems) > 0 {
			msg := fmt.Sprintf("check found %d problems", len(r.Problems))
			for i, p := range r.Problems {
				if i == 5 {
					msg += "; ..."
					break
				}
				msg += "; " + p.String()
			}
			a.nt.Fail(notify.Failure{Operation: "check", Repository: name, Message: msg})
		}
	}
	return res, err
}

// notifySource is the daily report's view of the appliance.
type notifySource struct {
	db     *state.DB
	rs     *repos.Set
	inv    policy.Inventory
	log    *slog.Logger
	copies *copyjob.Store // nil: no copy runs listed
}

// runsPerJob bounds the runs read per job (a job runs about once a day;
// manual runs add a few).
const runsPerJob = 100

func (s *notifySource) Jobs(ctx context.Context) ([]policy.Job, error) { return s.db.Jobs(ctx) }

func (s *notifySource) Runs(ctx context.Context, from, to time.Time) ([]policy.JobRun, error) {
	jobs, err := s.db.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []policy.JobRun
	for _, j := range jobs {
		runs, err := s.db.Runs(ctx, j.ID, runsPerJob)
		if err != nil {
			return nil, fmt.Errorf("runs of job %s: %w", j.ID, err)
		}
		for _, r := range runs {
			if r.Start.Before(to) && (r.End.IsZero() || !r.End.Before(from)) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func (s *notifySource) Events(ctx context.Context, from, to time.Time) ([]policy.Event, error) {
	return s.db.Events(ctx, state.EventQuery{From: from, To: to, MinSeverity: policy.SeverityWarning, Limit: 1000})
}

func (s *notifySource) Repositories(ctx context.Context) ([]notify.RepoUsage, error) {
	var out []notify.RepoUsage
	for _, n := range s.rs.Names() {
		u := notify.RepoUsage{Name: n}
		ri, err := s.rs.Repository(ctx, n)
		switch {
		case err != nil:
			u.Err = err.Error()
		case ri.Stats == nil:
			u.Points = ri.Points
		default:
			u.Points, u.LogicalBytes, u.StoredBytes = ri.Stats.Points, ri.Stats.LogicalBytes, ri.Stats.StoredBytes
		}
		out = append(out, u)
	}
	return out, nil
}

// VMs: the statuses of vmstatus (the API's VM list and dashboard read the
// same rules), with the report's one choice: with a vCenter, only the
// inventory's VMs count (a VM removed from vCenter no longer does); without
// one, the VMs known from restore points and job states. Jobs are named,
// enabled ones only.
func (s *notifySource) VMs(ctx context.Context) ([]notify.VMStatus, error) {
	in := vmstatus.Input{}
	var err error
	if in.Jobs, err = s.db.Jobs(ctx); err != nil {
		return nil, err
	}
	jobName := map[string]string{}
	for _, j := range in.Jobs {
		jobName[j.ID] = j.Name
	}
	if s.inv != nil {
		vms, err := s.inv.VMs(ctx)
		if err != nil {
			s.log.Warn("daily report: inventory unavailable, counting VMs from restore points", "err", err)
		} else {
			in.Inventory, in.HaveInventory = vms, true
		}
	}
	pts, err := s.rs.Points(ctx, web.PointFilter{})
	if err != nil {
		return nil, err
	}
	list := make([]vmstatus.Point, len(pts))
	for i, p := range pts {
		list[i] = vmstatus.Point{InstanceUUID: p.VM.InstanceUUID, Name: p.VM.Name, MoRef: p.VM.MoRef, Time: p.Time, Partial: p.Partial}
	}
	in.Points = vmstatus.Summarize(list)
	if in.States, err = s.db.VMStates(ctx); err != nil {
		return nil, err
	}
	// Without an inventory, a VM's jobs are the ones whose state names it.
	stateJobs := map[string][]string{}
	if !in.HaveInventory {
		for _, st := range in.States {
			if st.Selected && jobName[st.Job] != "" && !slices.Contains(stateJobs[st.VM], jobName[st.Job]) {
				stateJobs[st.VM] = append(stateJobs[st.VM], jobName[st.Job])
			}
		}
	}
	var out []notify.VMStatus
	for _, st := range vmstatus.Compute(in) {
		if in.HaveInventory && !st.InInventory {
			continue
		}
		v := notify.VMStatus{ID: st.Key, Name: st.Name, LastError: st.LastError}
		for _, id := range st.EnabledJobs {
			v.Jobs = append(v.Jobs, jobName[id])
		}
		if !in.HaveInventory {
			v.Jobs = stateJobs[st.Key]
		}
		if st.LastPoint >= 0 {
			v.LastPoint = in.Points[st.LastPoint].LastComplete
		}
		out = append(out, v)
	}
	return out, nil
}
