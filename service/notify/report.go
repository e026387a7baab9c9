package notify

import (
	"context"
	"fmt"
	"html"
	"sort"
	"strings"
	"time"

	"github.com/vmvault/vmvault/internal/progress"
	"github.com/vmvault/vmvault/policy"
)

// Source is what the daily report reads. The daemon implements it over its
// state database, repositories and inventory. Each method is one short read.
type Source interface {
	// Jobs returns the configured jobs (for their names).
	Jobs(ctx context.Context) ([]policy.Job, error)
	// Runs returns the job runs open at some time in [from, to).
	Runs(ctx context.Context, from, to time.Time) ([]policy.JobRun, error)
	// VMs returns every VM the appliance knows (inventory, jobs, restore
	// points) with its protection state.
	VMs(ctx context.Context) ([]VMStatus, error)
	// Events returns the warnings and errors recorded in [from, to), oldest first.
	Events(ctx context.Context, from, to time.Time) ([]policy.Event, error)
	// Repositories returns each repository's space usage.
	Repositories(ctx context.Context) ([]RepoUsage, error)
}

// VMStatus is one VM as the daily report counts it.
type VMStatus struct {
	ID   string   // instance UUID
	Name string   // display name
	Jobs []string // names of the jobs that select it
	// LastPoint is the time of its newest complete restore point (zero: none).
	LastPoint time.Time
	// LastError is the error of its last backup attempt, "" when that
	// attempt succeeded or none was made.
	LastError string
	// AdHoc: its points are all it has, no enabled job selects it
	// (vmstatus): a point does not make it protected.
	AdHoc bool
}

// State classifies the VM: "failed" when its last backup attempt failed,
// "protected" when a job covers it (a complete restore point, not ad hoc),
// "unprotected" otherwise.
func (v VMStatus) State() string {
	switch {
	case v.LastError != "":
		return "failed"
	case !v.LastPoint.IsZero() && !v.AdHoc:
		return "protected"
	}
	return "unprotected"
}

// RepoUsage is one repository's space usage.
type RepoUsage struct {
	Name         string
	Points       int
	LogicalBytes int64  // sum of the disks' sizes over every point
	StoredBytes  int64  // bytes on disk after deduplication and compression
	Err          string // why the figures are missing, if they are
}

// Failure is one failed operation that deserves an alert.
type Failure struct {
	Time       time.Time
	Operation  string // "backup", "restore", "check", "maintenance", ...
	Job        string // job id ("" for an ad-hoc operation)
	JobName    string // filled from Source.Jobs when empty
	VM         string // VM name ("" when not about one VM)
	Repository string
	Message    string

	// Set when the failure is mailed and continues a streak (see
	// Config.RepeatAfter): failures in the streak, this one included, since
	// its first, and how many of them were not mailed.
	count    int
	since    time.Time
	unmailed int
}

// FailureFromEvent turns an error event of the scheduler into a Failure;
// false for events that are not failures.
func FailureFromEvent(e policy.Event) (Failure, bool) {
	if e.Severity != policy.SeverityError {
		return Failure{}, false
	}
	f := Failure{Time: e.Time, Job: e.Job, Repository: e.Repository, Message: e.Message}
	switch e.Kind {
	case policy.EventVMFailed:
		f.Operation, f.VM = "backup", e.Subject
	case policy.EventSelectionFailed:
		f.Operation, f.JobName = "backup", e.Subject
		f.Message = "selecting the job's VMs failed: " + e.Message
	case policy.EventCheckDamage:
		f.Operation = "check"
	case policy.EventMaintenanceFailed:
		f.Operation = "maintenance"
	default:
		f.Operation, _, _ = strings.Cut(e.Kind, ".")
		if f.Operation == "" {
			f.Operation = "operation"
		}
	}
	if f.Repository == "" && f.VM == "" && f.JobName == "" && f.Job == "" {
		f.Repository = e.Subject
	}
	return f, true
}

// names lists up to three names and how many more there are.
func names(list []string) string {
	if len(list) <= 3 {
		return strings.Join(list, ", ")
	}
	return strings.Join(list[:3], ", ") + fmt.Sprintf(" and %d more", len(list)-3)
}

func uniq(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// alertMessage renders one mail for a batch of failures (dropped: how many
// more arrived than are listed).
func alertMessage(fs []Failure, dropped int, appliance string, loc *time.Location) Message {
	var ops, jobs, vms, repos []string
	for _, f := range fs {
		ops = append(ops, f.Operation)
		jobs = append(jobs, f.jobLabel())
		vms = append(vms, f.VM)
		repos = append(repos, f.Repository)
	}
	ops, jobs, vms, repos = uniq(ops), uniq(jobs), uniq(vms), uniq(repos)
	var parts []string
	switch len(jobs) {
	case 0:
	case 1:
		parts = append(parts, "job "+jobs[0])
	default:
		parts = append(parts, "jobs "+names(jobs))
	}
	switch len(vms) {
	case 0:
		switch len(repos) {
		case 0:
		case 1:
			parts = append(parts, "repository "+repos[0])
		default:
			parts = append(parts, "repositories "+names(repos))
		}
	case 1:
		parts = append(parts, "VM "+vms[0])
	default:
		parts = append(parts, fmt.Sprintf("%d VMs (%s)", len(vms), names(vms)))
	}
	verb := "FAILED "
	if allRepeats(fs) {
		verb = "STILL FAILING "
	}
	subject := "[vmvault] " + verb + strings.Join(ops, ", ")
	if len(parts) > 0 {
		subject += ": " + strings.Join(parts, ", ")
	}

	var t, h strings.Builder
	n := len(fs) + dropped
	fmt.Fprintf(&t, "vmvault appliance %s: %d failure(s).\n\n", appliance, n)
	fmt.Fprintf(&h, "<html><body style=\"font-family:sans-serif\"><h2>vmvault appliance %s: %d failure(s)</h2>\n", esc(appliance), n)
	h.WriteString("<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\"><tr><th>Time</th><th>Operation</th><th>Job</th><th>VM</th><th>Repository</th><th>Error</th></tr>\n")
	for _, f := range fs {
		when := f.Time.In(loc).Format("2006-01-02 15:04:05 MST")
		fmt.Fprintf(&t, "%s  %s FAILED", when, f.Operation)
		if j := f.jobLabel(); j != "" {
			fmt.Fprintf(&t, "  job %s", j)
		}
		if f.VM != "" {
			fmt.Fprintf(&t, "  VM %s", f.VM)
		}
		if f.Repository != "" {
			fmt.Fprintf(&t, "  repository %s", f.Repository)
		}
		fmt.Fprintf(&t, "\n    %s\n", f.Message)
		msg := esc(f.Message)
		if r := f.repeatLabel(loc); r != "" {
			fmt.Fprintf(&t, "    %s\n", r)
			msg += "<br><i>" + esc(r) + "</i>"
		}
		t.WriteString("\n")
		fmt.Fprintf(&h, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			esc(when), esc(f.Operation), esc(f.jobLabel()), esc(f.VM), esc(f.Repository), msg)
	}
	h.WriteString("</table>\n")
	if dropped > 0 {
		fmt.Fprintf(&t, "... and %d more failures not listed; see the event log.\n", dropped)
		fmt.Fprintf(&h, "<p>... and %d more failures not listed; see the event log.</p>\n", dropped)
	}
	t.WriteString("The appliance's event log (GET /api/v1/events) has the details.\n")
	h.WriteString("<p>The appliance's event log (GET /api/v1/events) has the details.</p></body></html>\n")
	return Message{Subject: subject, Text: t.String(), HTML: h.String(), Kind: "alert"}
}

// repeatLabel says how often the failure's streak failed ("" for its
// first failure).
func (f Failure) repeatLabel(loc *time.Location) string {
	if f.count < 2 {
		return ""
	}
	r := fmt.Sprintf("failed %d times since %s", f.count, sinceLabel(f.since, f.Time, loc))
	if f.unmailed > 0 {
		r += fmt.Sprintf(" (%d of them not mailed)", f.unmailed)
	}
	return r
}

func allRepeats(fs []Failure) bool {
	for _, f := range fs {
		if f.count < 2 {
			return false
		}
	}
	return len(fs) > 0
}

func (f Failure) jobLabel() string {
	if f.JobName != "" {
		return f.JobName
	}
	return f.Job
}

func esc(s string) string { return html.EscapeString(s) }

// JobRuns is one job's runs in the report's period.
type JobRuns struct {
	ID, Name string
	Runs     []policy.JobRun // oldest first
}

// CopySource is implemented by a Source whose appliance has copy jobs: the
// report lists their runs.
type CopySource interface {
	// CopyRuns returns the copy runs that started in [from, to), oldest first.
	CopyRuns(ctx context.Context, from, to time.Time) ([]CopyRun, error)
}

// CopyRun is one run of a copy job as the report lists it.
type CopyRun struct {
	Job, Name      string // the copy job's id and name
	Source, Target string // repositories
	State          string // succeeded, failed, cancelled, interrupted, running
	Start, End     time.Time
	PointsCopied   int
	PointsRemoved  int // by the target's retention
	BytesSent      int64
	Error          string
}

// DailyReport is the content of the daily summary.
type DailyReport struct {
	From, To     time.Time
	VMs          []VMStatus // by state (failed, unprotected, protected), then name
	Protected    int
	Failed       int
	Unprotected  int
	Jobs         []JobRuns // jobs with runs in the period, by name
	CopyRuns     []CopyRun // copy jobs' runs in the period, oldest first (when the Source is a CopySource)
	Repositories []RepoUsage
	Events       []policy.Event // warnings and errors in the period
	// Repeated lists the failure streaks with failures that were not
	// mailed (Config.RepeatAfter); the notifier fills it, not the Source.
	Repeated []Streak
	// DueAt is set when the report is sent late (the daemon was down when
	// it fell due).
	DueAt time.Time
	// Missing lists what could not be read; the report is sent anyway.
	Missing []string
}

// maxReportEvents bounds the events listed in one report.
const maxReportEvents = 200

// BuildDailyReport reads the period [from, to) from src. A part that cannot
// be read is named in Missing rather than failing the whole report.
func BuildDailyReport(ctx context.Context, src Source, from, to time.Time) DailyReport {
	r := DailyReport{From: from, To: to}
	miss := func(what string, err error) { r.Missing = append(r.Missing, fmt.Sprintf("%s: %v", what, err)) }
	jobs, err := src.Jobs(ctx)
	if err != nil {
		miss("jobs", err)
	}
	jobName := map[string]string{}
	for _, j := range jobs {
		jobName[j.ID] = j.Name
	}
	if vms, err := src.VMs(ctx); err != nil {
		miss("VMs", err)
	} else {
		rank := map[string]int{"failed": 0, "unprotected": 1, "protected": 2}
		sort.SliceStable(vms, func(i, j int) bool {
			ri, rj := rank[vms[i].State()], rank[vms[j].State()]
			if ri != rj {
				return ri < rj
			}
			return vms[i].Name < vms[j].Name
		})
		r.VMs = vms
		for _, v := range vms {
			switch v.State() {
			case "failed":
				r.Failed++
			case "protected":
				r.Protected++
			default:
				r.Unprotected++
			}
		}
	}
	if runs, err := src.Runs(ctx, from, to); err != nil {
		miss("job runs", err)
	} else {
		by := map[string]*JobRuns{}
		for _, run := range runs {
			jr := by[run.Job]
			if jr == nil {
				name := jobName[run.Job]
				if name == "" {
					name = run.Job
				}
				jr = &JobRuns{ID: run.Job, Name: name}
				by[run.Job] = jr
			}
			jr.Runs = append(jr.Runs, run)
		}
		for _, jr := range by {
			sort.Slice(jr.Runs, func(i, j int) bool { return jr.Runs[i].Start.Before(jr.Runs[j].Start) })
			r.Jobs = append(r.Jobs, *jr)
		}
		sort.Slice(r.Jobs, func(i, j int) bool { return r.Jobs[i].Name < r.Jobs[j].Name })
	}
	if cs, ok := src.(CopySource); ok {
		if runs, err := cs.CopyRuns(ctx, from, to); err != nil {
			miss("copy runs", err)
		} else {
			r.CopyRuns = runs
		}
	}
	if repos, err := src.Repositories(ctx); err != nil {
		miss("repositories", err)
	} else {
		r.Repositories = repos
	}
	if evs, err := src.Events(ctx, from, to); err != nil {
		miss("events", err)
	} else {
		for _, e := range evs {
			if e.Severity.Rank() >= policy.SeverityWarning.Rank() {
				r.Events = append(r.Events, e)
			}
		}
	}
	return r
}

// Message renders the report as a mail (times in loc).
func (r DailyReport) Message(appliance string, loc *time.Location) Message {
	subject := fmt.Sprintf("[vmvault] daily report: %d protected, %d failed", r.Protected, r.Failed)
	if r.Unprotected > 0 {
		subject += fmt.Sprintf(", %d unprotected", r.Unprotected)
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(loc).Format("2006-01-02 15:04 MST")
	}
	var t, h strings.Builder
	fmt.Fprintf(&t, "vmvault appliance %s: daily report for %s to %s\n\n", appliance, ts(r.From), ts(r.To))
	fmt.Fprintf(&h, "<html><body style=\"font-family:sans-serif\"><h2>vmvault appliance %s: daily report</h2><p>%s to %s</p>\n", esc(appliance), esc(ts(r.From)), esc(ts(r.To)))
	if !r.DueAt.IsZero() {
		late := fmt.Sprintf("This report is late: it fell due at %s while the appliance was not running.", ts(r.DueAt))
		fmt.Fprintf(&t, "%s\n\n", late)
		fmt.Fprintf(&h, "<p><i>%s</i></p>\n", esc(late))
	}
	fmt.Fprintf(&t, "VMs: %d protected, %d failed, %d unprotected\n", r.Protected, r.Failed, r.Unprotected)
	fmt.Fprintf(&h, "<h3>VMs: %d protected, %d failed, %d unprotected</h3>\n", r.Protected, r.Failed, r.Unprotected)
	if len(r.VMs) > 0 {
		h.WriteString("<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\"><tr><th>VM</th><th>State</th><th>Jobs</th><th>Last restore point</th><th>Last error</th></tr>\n")
		for _, v := range r.VMs {
			fmt.Fprintf(&t, "  %-12s %s  jobs: %s  last point: %s", v.State(), v.Name, strings.Join(v.Jobs, ", "), ts(v.LastPoint))
			if v.LastError != "" {
				fmt.Fprintf(&t, "  error: %s", v.LastError)
			}
			t.WriteString("\n")
			fmt.Fprintf(&h, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				esc(v.Name), esc(v.State()), esc(strings.Join(v.Jobs, ", ")), esc(ts(v.LastPoint)), esc(v.LastError))
		}
		h.WriteString("</table>\n")
	}

	t.WriteString("\nJob runs since the last report:\n")
	h.WriteString("<h3>Job runs since the last report</h3>\n")
	if len(r.Jobs) == 0 {
		t.WriteString("  none\n")
		h.WriteString("<p>none</p>\n")
	}
	for _, j := range r.Jobs {
		fmt.Fprintf(&t, "  job %s:\n", j.Name)
		fmt.Fprintf(&h, "<h4>job %s</h4>\n", esc(j.Name))
		for _, run := range j.Runs {
			kind := "scheduled"
			switch {
			case run.Missed:
				kind = "missed window"
			case run.Manual:
				kind = "run now"
			}
			end := "still running"
			if !run.End.IsZero() {
				end = "ended " + ts(run.End)
			}
			var read, stored int64
			for _, o := range run.VMs {
				read += o.Bytes
				stored += o.Stored
			}
			fmt.Fprintf(&t, "    run %s (%s) started %s, %s: %d VMs, %s read, %s new\n", run.ID, kind, ts(run.Start), end, len(run.VMs), humanBytes(read), humanBytes(stored))
			fmt.Fprintf(&h, "<p>run %s (%s) started %s, %s: %d VMs, %s read, %s new</p>\n", esc(run.ID), esc(kind), esc(ts(run.Start)), esc(end), len(run.VMs), humanBytes(read), humanBytes(stored))
			if len(run.VMs) == 0 {
				continue
			}
			h.WriteString("<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\"><tr><th>VM</th><th>Outcome</th><th>Attempts</th><th>Read</th><th>New</th><th>Error</th></tr>\n")
			for _, o := range run.VMs {
				fmt.Fprintf(&t, "      %-12s %s  attempts %d, %s read, %s new", o.Status, o.Name, o.Attempts, humanBytes(o.Bytes), humanBytes(o.Stored))
				if o.Error != "" {
					fmt.Fprintf(&t, "  error: %s", o.Error)
				}
				t.WriteString("\n")
				fmt.Fprintf(&h, "<tr><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
					esc(o.Name), esc(string(o.Status)), o.Attempts, humanBytes(o.Bytes), humanBytes(o.Stored), esc(o.Error))
			}
			h.WriteString("</table>\n")
		}
	}

	if len(r.CopyRuns) > 0 {
		r.copyRuns(&t, &h, ts)
	}

	t.WriteString("\nRepositories:\n")
	h.WriteString("<h3>Repositories</h3>\n<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\"><tr><th>Repository</th><th>Restore points</th><th>Logical</th><th>Stored</th></tr>\n")
	for _, rp := range r.Repositories {
		if rp.Err != "" {
			fmt.Fprintf(&t, "  %s: figures unavailable: %s\n", rp.Name, rp.Err)
			fmt.Fprintf(&h, "<tr><td>%s</td><td colspan=\"3\">figures unavailable: %s</td></tr>\n", esc(rp.Name), esc(rp.Err))
			continue
		}
		fmt.Fprintf(&t, "  %s: %d restore points, %s logical, %s stored\n", rp.Name, rp.Points, humanBytes(rp.LogicalBytes), humanBytes(rp.StoredBytes))
		fmt.Fprintf(&h, "<tr><td>%s</td><td>%d</td><td>%s</td><td>%s</td></tr>\n", esc(rp.Name), rp.Points, humanBytes(rp.LogicalBytes), humanBytes(rp.StoredBytes))
	}
	h.WriteString("</table>\n")

	if len(r.Repeated) > 0 {
		t.WriteString("\nRepeated failures (alert mails held back):\n")
		h.WriteString("<h3>Repeated failures (alert mails held back)</h3>\n<ul>\n")
		for _, s := range r.Repeated {
			what := s.Last.Operation
			if j := s.Last.jobLabel(); j != "" {
				what += " job " + j
			}
			if s.Last.VM != "" {
				what += " VM " + s.Last.VM
			} else if s.Last.Repository != "" {
				what += " repository " + s.Last.Repository
			}
			line := fmt.Sprintf("%s: failed %d times since %s, last at %s (%d not mailed): %s",
				what, s.Count, ts(s.Since), ts(s.Last.Time), s.Unmailed, s.Last.Message)
			fmt.Fprintf(&t, "  %s\n", line)
			fmt.Fprintf(&h, "<li>%s</li>\n", esc(line))
		}
		h.WriteString("</ul>\n")
	}

	t.WriteString("\nFailures and warnings:\n")
	h.WriteString("<h3>Failures and warnings</h3>\n")
	if len(r.Events) == 0 {
		t.WriteString("  none\n")
		h.WriteString("<p>none</p>\n")
	} else {
		h.WriteString("<ul>\n")
	}
	for i, e := range r.Events {
		if i == maxReportEvents {
			fmt.Fprintf(&t, "  ... and %d more in the event log\n", len(r.Events)-i)
			fmt.Fprintf(&h, "<li>... and %d more in the event log</li>\n", len(r.Events)-i)
			break
		}
		fmt.Fprintf(&t, "  %s %-7s %s %s: %s\n", ts(e.Time), e.Severity, e.Kind, e.Subject, e.Message)
		fmt.Fprintf(&h, "<li>%s <b>%s</b> %s %s: %s</li>\n", esc(ts(e.Time)), esc(string(e.Severity)), esc(e.Kind), esc(e.Subject), esc(e.Message))
	}
	if len(r.Events) > 0 {
		h.WriteString("</ul>\n")
	}
	if len(r.Missing) > 0 {
		t.WriteString("\nNot included (could not be read):\n")
		h.WriteString("<h3>Not included (could not be read)</h3><ul>\n")
		for _, m := range r.Missing {
			fmt.Fprintf(&t, "  %s\n", m)
			fmt.Fprintf(&h, "<li>%s</li>\n", esc(m))
		}
		h.WriteString("</ul>\n")
	}
	h.WriteString("</body></html>\n")
	return Message{Subject: subject, Text: t.String(), HTML: h.String(), Kind: "daily"}
}

// copyRuns renders the copy runs section.
func (r DailyReport) copyRuns(t, h *strings.Builder, ts func(time.Time) string) {
	t.WriteString("\nCopy runs since the last report:\n")
	h.WriteString("<h3>Copy runs since the last report</h3>\n<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\"><tr><th>Copy job</th><th>From</th><th>To</th><th>Started</th><th>State</th><th>Points copied</th><th>Sent</th><th>Removed by retention</th><th>Error</th></tr>\n")
	for _, c := range r.CopyRuns {
		name := c.Name
		if name == "" {
			name = c.Job
		}
		fmt.Fprintf(t, "  %-11s copy job %s (%s -> %s) started %s: %d points copied, %s sent, %d removed by retention", c.State, name, c.Source, c.Target, ts(c.Start), c.PointsCopied, humanBytes(c.BytesSent), c.PointsRemoved)
		if c.Error != "" {
			fmt.Fprintf(t, "  error: %s", c.Error)
		}
		t.WriteString("\n")
		fmt.Fprintf(h, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%d</td><td>%s</td></tr>\n",
			esc(name), esc(c.Source), esc(c.Target), esc(ts(c.Start)), esc(c.State), c.PointsCopied, humanBytes(c.BytesSent), c.PointsRemoved, esc(c.Error))
	}
	h.WriteString("</table>\n")
}

// humanBytes says a size in IEC units.
func humanBytes(n int64) string { return progress.Bytes(n) }
