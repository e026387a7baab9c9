package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/progress"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/repository/storage"
	"github.com/vmvault/vmvault/service/capacity"
)

// Events of the space watch: an error (mailed as an alert) when a
// repository's volume runs low, an info when it has room again.
const (
	EventSpaceLow       = "repository.space-low"
	EventSpaceRecovered = "repository.space-ok"
)

// spaceEvery is how often the free space of the repositories' volumes is
// read: often enough to warn hours before a nightly window fills a disk.
const spaceEvery = 15 * time.Minute

type spaceReader interface {
	Space(ctx context.Context) (storage.Space, bool, error)
}

// watchSpace reads the free space of each repository open at the time
// (current: repositories are added and removed at runtime) at start and
// every spaceEvery until ctx ends, and emits one event when it falls below
// the threshold and one when it recovers.
func watchSpace(ctx context.Context, current func() map[string]spaceReader, t capacity.Threshold, clk clock.Clock, log *slog.Logger, emit func(policy.Event)) {
	w := &capacity.Watch{T: t}
	for {
		repos := current()
		names := make([]string, 0, len(repos))
		for n := range repos {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			sp, ok, err := repos[n].Space(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("read repository free space", "repository", n, "err", err)
				continue
			}
			if !ok {
				continue
			}
			switch w.Observe(n, sp.Total, sp.Free) {
			case capacity.BecameLow:
				emit(policy.Event{Severity: policy.SeverityError, Kind: EventSpaceLow, Subject: n, Repository: n,
					Message: fmt.Sprintf("repository %s is low on space: %s free of %s (the alert is below %g%% or %s); backups fail when it fills: shorten retention, reclaim deleted points' space or grow the volume",
						n, progress.Bytes(sp.Free), progress.Bytes(sp.Total), t.Percent, progress.Bytes(t.MinBytes))})
			case capacity.Recovered:
				emit(policy.Event{Severity: policy.SeverityInfo, Kind: EventSpaceRecovered, Subject: n, Repository: n,
					Message: fmt.Sprintf("repository %s has room again: %s free of %s", n, progress.Bytes(sp.Free), progress.Bytes(sp.Total))})
			}
		}
		t := clk.NewTimer(spaceEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// spaceReaders adapts the open repositories.
func spaceReaders(repos map[string]*repository.Repository) map[string]spaceReader {
	out := make(map[string]spaceReader, len(repos))
	for n, r := range repos {
		out[n] = r
	}
	return out
}
