package notify

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

type copySource struct {
	memSource
	runs []CopyRun
	err  error
	from time.Time
}

func (c *copySource) CopyRuns(_ context.Context, from, to time.Time) ([]CopyRun, error) {
	c.from = from
	return c.runs, c.err
}

// The daily report lists the copy runs of the period; without copy runs
// (or a Source without copy jobs) the section is absent.
func TestDailyReportCopyRuns(t *testing.T) {
	from := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	src := &copySource{runs: []CopyRun{
		{Job: "offsite", Name: "Offsite", Source: "main", Target: "s3", State: "succeeded", Start: from.Add(18 * time.Hour), PointsCopied: 3, BytesSent: 3 << 20, PointsRemoved: 1},
		{Job: "dr", Source: "main", Target: "dr", State: "failed", Start: from.Add(19 * time.Hour), Error: "target repository dr: <unreachable>"},
	}}
	r := BuildDailyReport(context.Background(), src, from, from.Add(24*time.Hour))
	if !src.from.Equal(from) || len(r.CopyRuns) != 2 {
		t.Fatalf("copy runs %+v (asked from %v)", r.CopyRuns, src.from)
	}
	m := r.Message("app01", time.UTC)
	for _, want := range []string{"Copy runs since the last report:", "succeeded   copy job Offsite (main -> s3)", "3 points copied, 3.0 MiB sent, 1 removed by retention", "failed      copy job dr (main -> dr)", "error: target repository dr: <unreachable>"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, m.Text)
		}
	}
	if !strings.Contains(m.HTML, "<h3>Copy runs since the last report</h3>") || !strings.Contains(m.HTML, "&lt;unreachable&gt;") || strings.Contains(m.HTML, "<unreachable>") {
		t.Errorf("html:\n%s", m.HTML)
	}

	src.runs = nil
	if m := BuildDailyReport(context.Background(), src, from, from.Add(24*time.Hour)).Message("app01", time.UTC); strings.Contains(m.Text, "Copy runs") {
		t.Error("an empty copy section")
	}
	src.err = errors.New("state db closed")
	if r := BuildDailyReport(context.Background(), src, from, from.Add(24*time.Hour)); len(r.Missing) != 1 || !strings.Contains(r.Missing[0], "copy runs") {
		t.Errorf("missing %v", r.Missing)
	}
	if r := BuildDailyReport(context.Background(), &src.memSource, from, from.Add(24*time.Hour)); r.CopyRuns != nil || len(r.Missing) != 0 {
		t.Errorf("plain source: %+v", r)
	}
}
