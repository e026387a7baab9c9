package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
)

// TimeOfDay is a wall-clock time ("07:00") in the notifier's location.
type TimeOfDay struct{ Hour, Minute int }

// ParseTimeOfDay parses "HH:MM" (24-hour clock).
func ParseTimeOfDay(s string) (TimeOfDay, error) {
	h, m, ok := strings.Cut(s, ":")
	digits := func(s string) bool { return len(s) == 2 && s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' }
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || !digits(h) || !digits(m) || err1 != nil || err2 != nil || hh > 23 || mm > 59 {
		return TimeOfDay{}, fmt.Errorf("%q is not a time of day HH:MM (00:00 to 23:59)", s)
	}
	return TimeOfDay{hh, mm}, nil
}

func (t TimeOfDay) String() string { return fmt.Sprintf("%02d:%02d", t.Hour, t.Minute) }

// Config configures a Notifier.
type Config struct {
	Sender *Sender // required
	// Source feeds the daily report and job names in alerts; required when
	// DailyAt is set.
	Source Source
	Clock  clock.Clock // default clock.Real()
	// Location is the time zone of DailyAt and of the times in the mails;
	// default UTC.
	Location *time.Location
	// DailyAt is when the daily report is sent; nil sends none.
	DailyAt *TimeOfDay
	// Alerts enables failure alerts.
	Alerts bool
	// Debounce is how long failures gather before one alert is sent
	// (measured from the first); default one minute.
	Debounce time.Duration
	// MaxListed bounds the failures listed in one alert (the rest are
	// counted); default 50. It also bounds the memory pending alerts hold.
	MaxListed int
	// RepeatAfter is the quiet period of a failure streak (the failures
	// of one operation — job, VM, operation — without a success between
	// them): its first failure is mailed, later ones within RepeatAfter of
	// the last mailed one are only counted, and the next mail or daily
	// report says "failed N times since HH:MM". Default DefaultRepeatAfter;
	// negative mails every failure. Streaks live in memory only: after a
	// restart the next failure of a streak is mailed again.
	RepeatAfter time.Duration
	// ReportLog remembers the last daily report sent, so that one that fell
	// due while the daemon was down is sent once at start; nil: no catch-up.
	ReportLog ReportLog
	// FlushTimeout bounds the sending of pending alerts when Run stops;
	// default FlushTimeout.
	FlushTimeout time.Duration
	// Appliance names the appliance in the mails; default the host name.
	Appliance string
	Logger    *slog.Logger // default: discard
}

// FlushTimeout is how long Run may take, after its context ends, to send
// alerts still gathering (so that a failure just before a stop is not lost).
const FlushTimeout = 15 * time.Second

// maxSleep bounds the daily report's timer so that a wall clock that jumps
// (NTP step, suspend) delays the report by at most this much.
const maxSleep = time.Hour

// Notifier sends failure alerts and the daily report. ObserveEvent and Fail
// never block; Run does the sending.
type Notifier struct {
	cfg  Config
	log  *slog.Logger
	clk  clock.Clock
	wake chan struct{}
	// settleReq: settle's requests (tests; see settle).
	settleReq chan chan struct{}
	mu        sync.Mutex
	queue     []Failure
	lost      int // failures beyond MaxListed in the gathering batch
	// streaks of failures (see Config.RepeatAfter), by operation.
	streaks map[streakKey]*streak
}

// New validates cfg and returns a Notifier; call Run to start it.
func New(cfg Config) (*Notifier, error) {
	if cfg.Sender == nil {
		return nil, fmt.Errorf("%w: no SMTP sender", ErrConfig)
	}
	if cfg.DailyAt != nil {
		if cfg.Source == nil {
			return nil, fmt.Errorf("%w: the daily report needs a Source", ErrConfig)
		}
		if _, err := ParseTimeOfDay(cfg.DailyAt.String()); err != nil {
			return nil, fmt.Errorf("%w: daily_report_at: %v", ErrConfig, err)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = time.Minute
	}
	if cfg.MaxListed <= 0 {
		cfg.MaxListed = 50
	}
	if cfg.RepeatAfter == 0 {
		cfg.RepeatAfter = DefaultRepeatAfter
	}
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = FlushTimeout
	}
	if cfg.Appliance == "" {
		cfg.Appliance, _ = os.Hostname()
		if cfg.Appliance == "" {
			cfg.Appliance = "vmvault"
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{cfg: cfg, log: cfg.Logger, clk: cfg.Clock, wake: make(chan struct{}, 1), settleReq: make(chan chan struct{}),
		streaks: map[streakKey]*streak{}}, nil
}

// ObserveEvent takes the scheduler's events (wire it to policy.Config.OnEvent);
// error events become alerts when alerts are enabled, and success events
// end failure streaks (see Config.RepeatAfter).
func (n *Notifier) ObserveEvent(e policy.Event) {
	if n == nil || !n.cfg.Alerts {
		return
	}
	if f, ok := FailureFromEvent(e); ok {
		n.Fail(f)
		return
	}
	for _, f := range successesFromEvent(e) {
		n.Succeeded(f)
	}
}

// Fail records a failure for the next alert (operations the scheduler does
// not see: backups and restores started through the API, checks). A later
// failure of the same streak within Config.RepeatAfter is only counted. It
// does nothing when alerts are disabled.
func (n *Notifier) Fail(f Failure) {
	if n == nil || !n.cfg.Alerts {
		return
	}
	if f.Time.IsZero() {
		f.Time = n.clk.Now()
	}
	n.mu.Lock()
	if !n.track(&f) {
		n.mu.Unlock()
		n.log.Debug("repeated failure not mailed", "operation", f.Operation, "job", f.Job, "vm", f.VM, "repository", f.Repository)
		return
	}
	if len(n.queue) < n.cfg.MaxListed {
		n.queue = append(n.queue, f)
	} else {
		n.lost++
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Notifier) pending() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queue) > 0 || n.lost > 0
}

// Run sends alerts and daily reports until ctx ends, then sends the alerts
// still gathering (within Config.FlushTimeout) and returns nil.
func (n *Notifier) Run(ctx context.Context) error {
	var alertT, dailyT clock.Timer
	var alertC, dailyC <-chan time.Time
	var next time.Time // the daily report's next due time
	var lastDay string // local date of the last daily report, so a repeated wall-clock hour never sends two
	armDaily := func() {
		now := n.clk.Now()
		if next.IsZero() {
			next = n.nextDaily(now, lastDay)
		}
		d := min(next.Sub(now), maxSleep)
		dailyT = n.clk.NewTimer(d)
		dailyC = dailyT.C()
	}
	armAlert := func() {
		if alertT == nil && n.pending() {
			alertT = n.clk.NewTimer(n.cfg.Debounce)
			alertC = alertT.C()
		}
	}
	if n.cfg.DailyAt != nil {
		n.log.Info("daily mail report scheduled", "at", n.cfg.DailyAt.String(), "time_zone", n.cfg.Location.String())
		lastDay = n.catchUp(ctx)
		armDaily()
	}
	armAlert()
	var settled []chan struct{} // settle calls waiting for Run to be idle
	for {
		// Idle: no wake-up and no fired timer left to handle. A fake clock's
		// timers fire into buffered channels, so len sees them.
		if len(settled) > 0 && len(n.wake) == 0 && len(alertC) == 0 && len(dailyC) == 0 {
			for _, ack := range settled {
				close(ack)
			}
			settled = nil
		}
		select {
		case ack := <-n.settleReq:
			settled = append(settled, ack)
		case <-ctx.Done():
			if alertT != nil {
				alertT.Stop()
			}
			if dailyT != nil {
				dailyT.Stop()
			}
			if n.pending() {
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.FlushTimeout)
				n.sendAlerts(fctx)
				cancel()
			}
			return nil
		case <-n.wake:
			armAlert()
		case <-alertC:
			alertT, alertC = nil, nil
			n.sendAlerts(ctx)
			armAlert()
		case <-dailyC:
			if !n.clk.Now().Before(next) {
				n.sendDaily(ctx, next)
				lastDay = next.In(n.cfg.Location).Format(time.DateOnly)
				next = time.Time{}
			}
			armDaily()
		}
	}
}

// settle returns once Run has handled every failure given and every timer
// fired before the call, with what they mailed sent. It lets tests on a
// fake clock (whose timers fire synchronously, into buffered channels) say
// "nothing was mailed" without waiting on the wall clock; on the real clock
// it only waits for one turn of Run.
func (n *Notifier) settle(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case n.settleReq <- ack:
	case <-ctx.Done():
		return fmt.Errorf("settle: Run is not running: %w", ctx.Err())
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("settle: Run is busy: %w", ctx.Err())
	}
}

// nextDaily returns the first DailyAt after now in the location whose local
// date is not lastDay. On the day clocks spring forward a time that does
// not exist is taken an hour later (time.Date's normalisation); on the day
// they fall back the report is sent once.
func (n *Notifier) nextDaily(now time.Time, lastDay string) time.Time {
	l := now.In(n.cfg.Location)
	at := n.cfg.DailyAt
	for d := 0; ; d++ {
		t := time.Date(l.Year(), l.Month(), l.Day()+d, at.Hour, at.Minute, 0, 0, n.cfg.Location)
		if t.After(now) && t.In(n.cfg.Location).Format(time.DateOnly) != lastDay {
			return t
		}
	}
}

func (n *Notifier) sendAlerts(ctx context.Context) {
	n.mu.Lock()
	batch, lost := n.queue, n.lost
	n.queue, n.lost = nil, 0
	n.mu.Unlock()
	if len(batch) == 0 && lost == 0 {
		return
	}
	if n.cfg.Source != nil {
		if jobs, err := n.cfg.Source.Jobs(ctx); err == nil {
			byID := map[string]string{}
			for _, j := range jobs {
				byID[j.ID] = j.Name
			}
			for i := range batch {
				if batch[i].JobName == "" {
					batch[i].JobName = byID[batch[i].Job]
				}
			}
		}
	}
	m := alertMessage(batch, lost, n.cfg.Appliance, n.cfg.Location)
	if err := n.cfg.Sender.Send(ctx, m); err != nil {
		if ctx.Err() == nil {
			n.untrack(batch)
		} else {
			// Stopping: give the batch back for Run's final flush.
			n.mu.Lock()
			n.queue = append(batch, n.queue...)
			if len(n.queue) > n.cfg.MaxListed {
				n.lost += len(n.queue) - n.cfg.MaxListed
				n.queue = n.queue[:n.cfg.MaxListed]
			}
			n.lost += lost
			n.mu.Unlock()
		}
		n.log.Error("alert mail not sent", "subject", m.Subject, "err", err)
	}
}

func (n *Notifier) sendDaily(ctx context.Context, at time.Time) {
	if err := n.SendDailyReport(ctx, at); err != nil {
		n.log.Error("daily report mail not sent", "err", err)
		return
	}
	n.recordReport(ctx, at)
}

func (n *Notifier) recordReport(ctx context.Context, at time.Time) {
	if n.cfg.ReportLog == nil {
		return
	}
	if err := n.cfg.ReportLog.SetLastReport(context.WithoutCancel(ctx), at); err != nil {
		n.log.Warn("daily report: cannot record it as sent (it may be sent again after a restart)", "err", err)
	}
}

// maxCatchUp bounds the period of a late daily report.
const maxCatchUp = 7 * 24 * time.Hour

// catchUp sends, once, the daily report that fell due while the daemon
// was down: when the last one recorded in Config.ReportLog is older than
// the newest due time. The late report covers from the last one (at most
// maxCatchUp before) to that due time, so that the next regular report
// follows it without a gap. Nothing recorded (a first start) sends
// nothing. It returns the local date of the last report sent.
func (n *Notifier) catchUp(ctx context.Context) string {
	if n.cfg.ReportLog == nil {
		return ""
	}
	last, err := n.cfg.ReportLog.LastReport(ctx)
	if err != nil {
		n.log.Warn("daily report: cannot read when the last one was sent; no catch-up", "err", err)
		return ""
	}
	if last.IsZero() {
		return ""
	}
	lastDay := last.In(n.cfg.Location).Format(time.DateOnly)
	due := n.prevDaily(n.clk.Now())
	if !last.Before(due) {
		return lastDay
	}
	from := n.dayBefore(due)
	if last.Before(from) {
		from = last
		if oldest := due.Add(-maxCatchUp); from.Before(oldest) {
			from = oldest
		}
	}
	n.log.Info("daily report: sending the one that fell due while the appliance was down", "due", due, "last_sent", last)
	if err := n.sendReport(ctx, from, due, true); err != nil {
		n.log.Error("daily report mail not sent", "err", err)
		return lastDay
	}
	n.recordReport(ctx, due)
	return due.In(n.cfg.Location).Format(time.DateOnly)
}

// prevDaily returns the newest DailyAt at or before now.
func (n *Notifier) prevDaily(now time.Time) time.Time {
	l := now.In(n.cfg.Location)
	at := n.cfg.DailyAt
	for d := 0; ; d-- {
		t := time.Date(l.Year(), l.Month(), l.Day()+d, at.Hour, at.Minute, 0, 0, n.cfg.Location)
		if !t.After(now) {
			return t
		}
	}
}

// dayBefore returns the same wall-clock time the day before t.
func (n *Notifier) dayBefore(t time.Time) time.Time {
	l := t.In(n.cfg.Location)
	return time.Date(l.Year(), l.Month(), l.Day()-1, l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), n.cfg.Location)
}

// SendDailyReport builds the report of the day before to (from the same
// wall-clock time the previous day, so 23 or 25 hours across a DST change:
// consecutive reports neither overlap nor leave a gap) and sends it.
func (n *Notifier) SendDailyReport(ctx context.Context, to time.Time) error {
	if n.cfg.Source == nil {
		return fmt.Errorf("%w: the daily report needs a Source", ErrConfig)
	}
	return n.sendReport(ctx, n.dayBefore(to), to, false)
}

func (n *Notifier) sendReport(ctx context.Context, from, to time.Time, late bool) error {
	if n.cfg.Source == nil {
		return fmt.Errorf("%w: the daily report needs a Source", ErrConfig)
	}
	r := BuildDailyReport(ctx, n.cfg.Source, from, to)
	for _, m := range r.Missing {
		n.log.Warn("daily report: part missing", "what", m)
	}
	if late {
		r.DueAt = to
	}
	r.Repeated = n.Streaks()
	if len(r.Repeated) > 0 {
		names := map[string]string{}
		for _, j := range r.Jobs {
			names[j.ID] = j.Name
		}
		if jobs, err := n.cfg.Source.Jobs(ctx); err == nil {
			for _, j := range jobs {
				names[j.ID] = j.Name
			}
		}
		for i := range r.Repeated {
			if f := &r.Repeated[i].Last; f.JobName == "" {
				f.JobName = names[f.Job]
			}
		}
	}
	return n.cfg.Sender.Send(ctx, r.Message(n.cfg.Appliance, n.cfg.Location))
}

// SendTest sends a test mail to to ("" for the configured recipients) in one
// attempt, so that a person waiting on the settings page gets the server's
// answer at once. The error says what failed (connection, TLS, login,
// recipient); it never contains the password.
func (n *Notifier) SendTest(ctx context.Context, to string) error {
	if n == nil {
		return errors.New("email is not configured (no smtp section)")
	}
	m := Message{
		Subject: "[vmvault] test mail from " + n.cfg.Appliance,
		Kind:    "test",
		Text: fmt.Sprintf("This is a test mail from the vmvault appliance %s, sent at %s.\n\nAlerts: %v. Daily report: %s.\n",
			n.cfg.Appliance, n.clk.Now().In(n.cfg.Location).Format("2006-01-02 15:04:05 MST"), n.cfg.Alerts, n.dailyLabel()),
	}
	var paras []string
	for _, p := range strings.Split(strings.TrimSpace(m.Text), "\n\n") {
		paras = append(paras, "<p>"+esc(p)+"</p>")
	}
	m.HTML = "<html><body style=\"font-family:sans-serif\">" + strings.Join(paras, "") + "</body></html>\n"
	if to != "" {
		if _, err := parseAddress(to); err != nil {
			return fmt.Errorf("test mail: %w", err)
		}
		m.To = []string{to}
	}
	return n.cfg.Sender.send(ctx, m, 1)
}

func (n *Notifier) dailyLabel() string {
	if n.cfg.DailyAt == nil {
		return "off"
	}
	return "every day at " + n.cfg.DailyAt.String() + " " + n.cfg.Location.String()
}
