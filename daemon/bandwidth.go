package daemon

import (
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/ratelimit"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web/api"
)

// repoLimits are the bandwidth limiters of one configured repository
// (repositories[].upload_limit_mb_per_s, download_limit_mb_per_s,
// limit_schedule): shared by everything that reaches its storage, on the
// daemon's clock.
type repoLimits struct {
	rc       RepoConfig
	up, down *ratelimit.Limiter
}

// newRepoLimits returns rc's limiters; nil when rc limits nothing.
func newRepoLimits(rc RepoConfig, clk clock.Clock) *repoLimits {
	up := ratelimit.Schedule{Default: ratelimit.MBps(rc.UploadLimit)}
	down := ratelimit.Schedule{Default: ratelimit.MBps(rc.DownloadLimit)}
	for _, w := range rc.LimitSchedule {
		up.Windows = append(up.Windows, ratelimit.Window{Period: w.Window, Rate: ratelimit.MBps(w.UploadLimit)})
		down.Windows = append(down.Windows, ratelimit.Window{Period: w.Window, Rate: ratelimit.MBps(w.DownloadLimit)})
	}
	if up.Unlimited() && down.Unlimited() {
		return nil
	}
	return &repoLimits{rc: rc, up: ratelimit.NewScheduled(clk, up), down: ratelimit.NewScheduled(clk, down)}
}

// apply sets o's limiters (nothing for nil).
func (l *repoLimits) apply(o repository.OpenOptions) repository.OpenOptions {
	if l != nil {
		o.Upload, o.Download = l.up, l.down
	}
	return o
}

// info is the API's view of the limits (nil for nil).
func (l *repoLimits) info() *api.Bandwidth {
	if l == nil {
		return nil
	}
	b := &api.Bandwidth{UploadMBps: l.rc.UploadLimit, DownloadMBps: l.rc.DownloadLimit,
		NowUploadMBps: l.up.Rate() / 1e6, NowDownloadMBps: l.down.Rate() / 1e6}
	for _, w := range l.rc.LimitSchedule {
		b.Schedule = append(b.Schedule, api.BandwidthWindow{Window: w.Window, UploadMBps: w.UploadLimit, DownloadMBps: w.DownloadLimit})
	}
	return b
}
