package notify

import (
	"context"
	"sort"
	"time"

	"github.com/vmvault/vmvault/policy"
)

// DefaultRepeatAfter is how long the later failures of one streak stay
// unmailed when Config.RepeatAfter is zero: a VM the scheduler retries
// (15 minutes doubling to 2 hours) mails about once a night, not six times.
const DefaultRepeatAfter = 6 * time.Hour

// maxStreaks bounds the streaks held in memory; failures of operations
// beyond it are mailed every time (they are never silently dropped).
const maxStreaks = 10000

// streakIdle is how long a streak without a new failure is remembered: long
// enough that a VM failing once a night keeps its count for a week.
const streakIdle = 8 * 24 * time.Hour

// streakKey names one operation: a failure of the same key continues the
// streak, a success of it ends the streak. The repository only tells apart
// operations that are not about a VM (checks, maintenance), so that a
// scheduled backup's failure and an API backup's success of the same VM in
// the same job meet.
type streakKey struct{ op, job, vm, repo string }

func keyOf(f Failure) streakKey {
	k := streakKey{op: f.Operation, job: f.Job, vm: f.VM}
	if f.VM == "" {
		k.repo = f.Repository
	}
	return k
}

type streak struct {
	since    time.Time // the streak's first failure
	count    int       // failures in the streak
	last     Failure   // the newest failure
	mailedAt time.Time // time of the failure mailed last; zero: none, or its mail failed
	unmailed int       // failures since mailedAt not mailed
}

// Streak is a failure that keeps recurring without a success in between,
// as the daily report lists it.
type Streak struct {
	Last     Failure   // the newest failure
	Since    time.Time // the first failure of the streak
	Count    int       // failures in the streak
	Unmailed int       // failures since the last alert mail that were not mailed
}

// successesFromEvent returns the operations whose streaks an event of the
// scheduler ends: a backed-up VM ends its backup streak, a started run (its
// selection was evaluated) ends the job's selection streak, a clean check
// ends the repository's check and maintenance streaks, a reclaim ends its
// maintenance streak.
func successesFromEvent(e policy.Event) []Failure {
	switch e.Kind {
	case policy.EventVMBackedUp:
		return []Failure{{Operation: "backup", Job: e.Job, VM: e.Subject}}
	case policy.EventJobStarted:
		return []Failure{{Operation: "backup", Job: e.Job}}
	case policy.EventCheckClean:
		return []Failure{{Operation: "check", Repository: e.Repository}, {Operation: "maintenance", Repository: e.Repository}}
	case policy.EventReclaimDone:
		return []Failure{{Operation: "maintenance", Repository: e.Repository}}
	}
	return nil
}

// Succeeded ends the failure streak of the operation f names (Operation,
// Job, VM, and Repository when VM is empty; Time and Message are ignored):
// its next failure is mailed at once. For operations the scheduler does not
// see (API backups, restores, checks); ObserveEvent does it for the
// scheduler's.
func (n *Notifier) Succeeded(f Failure) {
	if n == nil || !n.cfg.Alerts {
		return
	}
	n.mu.Lock()
	delete(n.streaks, keyOf(f))
	n.mu.Unlock()
}

// track counts f in its streak and reports whether it is to be mailed;
// when it is, f carries the streak's count for the mail. Call with n.mu held.
func (n *Notifier) track(f *Failure) bool {
	if n.cfg.RepeatAfter < 0 {
		return true
	}
	if len(n.streaks) >= maxStreaks {
		n.pruneStreaks(f.Time)
	}
	k := keyOf(*f)
	s := n.streaks[k]
	if s == nil {
		if len(n.streaks) >= maxStreaks {
			return true
		}
		s = &streak{since: f.Time}
		n.streaks[k] = s
	}
	s.count++
	s.last = *f
	if !s.mailedAt.IsZero() && f.Time.Sub(s.mailedAt) < n.cfg.RepeatAfter {
		s.unmailed++
		return false
	}
	f.count, f.since, f.unmailed = s.count, s.since, s.unmailed
	s.mailedAt, s.unmailed = f.Time, 0
	return true
}

// untrack undoes the "mailed" mark of failures whose mail was not sent, so
// that the next failure of their streaks is mailed.
func (n *Notifier) untrack(batch []Failure) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, f := range batch {
		if s := n.streaks[keyOf(f)]; s != nil && s.mailedAt.Equal(f.Time) {
			s.mailedAt = time.Time{}
			s.unmailed += f.unmailed + 1 // it was not mailed either
		}
	}
}

// pruneStreaks forgets streaks idle for streakIdle. Call with n.mu held.
func (n *Notifier) pruneStreaks(now time.Time) {
	for k, s := range n.streaks {
		if now.Sub(s.last.Time) > streakIdle {
			delete(n.streaks, k)
		}
	}
}

// Streaks returns the streaks with failures that were not mailed, oldest
// first (for the daily report).
func (n *Notifier) Streaks() []Streak {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pruneStreaks(n.clk.Now())
	var out []Streak
	for _, s := range n.streaks {
		if s.unmailed > 0 {
			out = append(out, Streak{Last: s.last, Since: s.since, Count: s.count, Unmailed: s.unmailed})
		}
	}
	sortStreaks(out)
	return out
}

func sortStreaks(s []Streak) {
	sort.Slice(s, func(i, j int) bool {
		if !s[i].Since.Equal(s[j].Since) {
			return s[i].Since.Before(s[j].Since)
		}
		return s[i].Last.VM+s[i].Last.Repository < s[j].Last.VM+s[j].Last.Repository
	})
}

// sinceLabel is "22:15" when since is on at's local date, else
// "2026-05-04 22:15".
func sinceLabel(since, at time.Time, loc *time.Location) string {
	s, a := since.In(loc), at.In(loc)
	if s.Format(time.DateOnly) == a.Format(time.DateOnly) {
		return s.Format("15:04")
	}
	return s.Format("2006-01-02 15:04")
}

// ReportLog remembers, across restarts, up to when the last daily report
// was sent, so that a report that fell due while the daemon was down is
// sent once at start and none is sent twice. The daemon keeps it in its
// state database.
type ReportLog interface {
	// LastReport returns the end of the period of the last daily report
	// sent (its due time); zero when none was recorded.
	LastReport(ctx context.Context) (time.Time, error)
	// SetLastReport records it.
	SetLastReport(ctx context.Context, to time.Time) error
}
