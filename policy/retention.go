package policy

import (
	"fmt"
	"sort"
	"time"
)

// Retention is a grandfather-father-son policy evaluated per VM per
// repository: keep the Last newest good points, plus the newest good point of
// each of the last Daily days, Weekly ISO weeks, Monthly months, Quarterly
// quarters and Yearly years that have one (calendar periods in the appliance's
// time zone, as in restic's forget). A zero count disables that rule.
type Retention struct {
	Preset    string `json:"preset,omitempty"` // informational: "few", "more", "many" or "" for custom
	Last      int    `json:"last"`
	Daily     int    `json:"daily"`
	Weekly    int    `json:"weekly"`
	Monthly   int    `json:"monthly"`
	Quarterly int    `json:"quarterly"`
	Yearly    int    `json:"yearly"`
}

// Presets modelled on VMware Data Recovery's retention choices: "few", "more"
// and "many" recent, weekly, monthly, quarterly and yearly points.
var presets = map[string]Retention{
	"few":  {Preset: "few", Last: 7, Weekly: 4, Monthly: 3},
	"more": {Preset: "more", Last: 7, Weekly: 4, Monthly: 6, Quarterly: 4, Yearly: 1},
	"many": {Preset: "many", Last: 15, Weekly: 8, Monthly: 12, Quarterly: 8, Yearly: 3},
}

// PresetNames lists the preset names in increasing order of points kept.
func PresetNames() []string { return []string{"few", "more", "many"} }

// Preset returns the named preset retention.
func Preset(name string) (Retention, error) {
	r, ok := presets[name]
	if !ok {
		return Retention{}, fmt.Errorf("retention preset %q: %w", name, ErrUnknownPreset)
	}
	return r, nil
}

// Validate rejects negative counts and a policy that keeps nothing.
func (r Retention) Validate() error {
	for _, c := range []struct {
		field string
		n     int
	}{{"last", r.Last}, {"daily", r.Daily}, {"weekly", r.Weekly}, {"monthly", r.Monthly}, {"quarterly", r.Quarterly}, {"yearly", r.Yearly}} {
		if c.n < 0 {
			return &ValidationError{Field: "retention." + c.field, Msg: fmt.Sprintf("must not be negative (got %d)", c.n)}
		}
	}
	if r.Preset != "" {
		if _, ok := presets[r.Preset]; !ok {
			return &ValidationError{Field: "retention.preset", Msg: fmt.Sprintf("unknown preset %q", r.Preset), Err: ErrUnknownPreset}
		}
	}
	if r.Last+r.Daily+r.Weekly+r.Monthly+r.Quarterly+r.Yearly == 0 {
		return &ValidationError{Field: "retention", Msg: "keeps nothing: set at least one count", Err: ErrKeepsNothing}
	}
	return nil
}

// PointStatus is the outcome recorded on a restore point.
type PointStatus string

// Restore point outcomes. Only PointComplete points count for retention.
const (
	PointComplete PointStatus = "complete"
	PointPartial  PointStatus = "partial"
	PointFailed   PointStatus = "failed"
)

// Point is what retention needs to know about a restore point.
type Point struct {
	ID         string
	Repository string
	VM         string // instance UUID
	Job        string
	Time       time.Time
	Status     PointStatus
	Locked     bool
	Bytes      int64 // bytes removing this point would free (as computed by the repository)
	// Writer is the appliance that wrote the point into a repository
	// several appliances share ("" otherwise); Foreign is set when that
	// is another appliance than the one deciding: such points are
	// read-only to it and its retention never considers them.
	Writer  string
	Foreign bool
}

// Decision is retention's verdict on one point, with every reason that applies.
type Decision struct {
	Point   Point
	Keep    bool
	Reasons []string
}

type bucketRule struct {
	name  string
	count int
	key   func(time.Time) string
}

// Apply decides keep/remove for every point. Points are grouped by
// (repository, VM) and each group is evaluated on its own, newest first.
// Locked points are always kept (and, when complete, also fill the slot of
// any rule they satisfy: a locked point is a real restore point); the newest
// complete point of a group is never removed; partial and failed points
// never count toward any rule and are removed unless locked.
// Times are bucketed in loc (nil means UTC). Decisions come back ordered by
// repository, VM, then newest first. Apply is pure: it removes nothing.
func (r Retention) Apply(points []Point, loc *time.Location) []Decision {
	if loc == nil {
		loc = time.UTC
	}
	sorted := append([]Point(nil), points...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Repository != b.Repository {
			return a.Repository < b.Repository
		}
		if a.VM != b.VM {
			return a.VM < b.VM
		}
		if !a.Time.Equal(b.Time) {
			return a.Time.After(b.Time)
		}
		return a.ID > b.ID
	})
	out := make([]Decision, 0, len(sorted))
	for start := 0; start < len(sorted); {
		end := start
		for end < len(sorted) && sorted[end].Repository == sorted[start].Repository && sorted[end].VM == sorted[start].VM {
			end++
		}
		out = append(out, r.applyGroup(sorted[start:end], loc)...)
		start = end
	}
	return out
}

func (r Retention) applyGroup(points []Point, loc *time.Location) []Decision {
	rules := []bucketRule{
		{"daily", r.Daily, func(t time.Time) string { return t.In(loc).Format("2006-01-02") }},
		{"weekly", r.Weekly, func(t time.Time) string {
			y, w := t.In(loc).ISOWeek()
			return fmt.Sprintf("%04d-W%02d", y, w)
		}},
		{"monthly", r.Monthly, func(t time.Time) string { return t.In(loc).Format("2006-01") }},
		{"quarterly", r.Quarterly, func(t time.Time) string {
			lt := t.In(loc)
			return fmt.Sprintf("%04d-Q%d", lt.Year(), (int(lt.Month())-1)/3+1)
		}},
		{"yearly", r.Yearly, func(t time.Time) string { return t.In(loc).Format("2006") }},
	}
	last := make([]string, len(rules))
	left := make([]int, len(rules))
	for i, rule := range rules {
		left[i] = rule.count
	}
	kept := 0
	newestGood := true
	out := make([]Decision, len(points))
	for i, p := range points {
		d := Decision{Point: p}
		if p.Locked {
			d.Keep = true
			d.Reasons = append(d.Reasons, "locked")
		}
		if p.Status != PointComplete {
			if !d.Keep {
				d.Reasons = append(d.Reasons, string(p.Status)+" point never counts")
			}
			out[i] = d
			continue
		}
		if newestGood {
			d.Keep = true
			d.Reasons = append(d.Reasons, "newest good point")
			newestGood = false
		}
		if kept < r.Last {
			kept++
			d.Keep = true
			d.Reasons = append(d.Reasons, fmt.Sprintf("last %d/%d", kept, r.Last))
		}
		for j, rule := range rules {
			if left[j] == 0 {
				continue
			}
			if k := rule.key(p.Time); k != last[j] {
				last[j] = k
				left[j]--
				d.Keep = true
				d.Reasons = append(d.Reasons, rule.name+" "+k)
			}
		}
		if !d.Keep {
			d.Reasons = append(d.Reasons, "no rule keeps it")
		}
		out[i] = d
	}
	return out
}

// Plan summarises decisions: what a dry run shows before anything is removed.
type Plan struct {
	Decisions  []Decision
	Keep       int
	Remove     int
	BytesFreed int64 // sum of Bytes over the points to remove
}

// DryRun applies r and totals what would be removed and freed.
func (r Retention) DryRun(points []Point, loc *time.Location) Plan {
	p := Plan{Decisions: r.Apply(points, loc)}
	for _, d := range p.Decisions {
		if d.Keep {
			p.Keep++
			continue
		}
		p.Remove++
		p.BytesFreed += d.Point.Bytes
	}
	return p
}

// Removals returns the points the plan removes, in decision order.
func (p Plan) Removals() []Point {
	var out []Point
	for _, d := range p.Decisions {
		if !d.Keep {
			out = append(out, d.Point)
		}
	}
	return out
}
