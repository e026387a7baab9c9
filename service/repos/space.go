package repos

import (
	"context"
	"sort"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/capacity"
	"github.com/vmvault/vmvault/web/api"
)

// space reads the volume's free space and forecasts from the points: the
// stored bytes each point added, summed over time, is the growth that
// retention has not yet taken back. Nil on a backend without free space.
// The samples come from the point index, computed once per change of the
// points.
func (s *Set) space(ctx context.Context, name string, r *repository.Repository) (*api.Space, error) {
	sp, ok, err := r.Space(ctx)
	if err != nil || !ok {
		return nil, err
	}
	part, err := s.part(ctx, name, r)
	if err != nil {
		return nil, err
	}
	return SpaceView(sp.Total, sp.Free, part.samples, s.clk.Now(), s.threshold), nil
}

// growthSamples is the running sum of the points' stored bytes, in time order.
func growthSamples(pts []repository.Point) []capacity.Sample {
	pts = append([]repository.Point(nil), pts...)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Time.Before(pts[j].Time) })
	out := make([]capacity.Sample, 0, len(pts))
	var sum int64
	for _, p := range pts {
		for _, d := range p.Disks {
			sum += d.Stats.StoredBytes
		}
		out = append(out, capacity.Sample{Time: p.Time, Used: sum})
	}
	return out
}

// SpaceView is the API's view of a volume of total and free bytes whose
// repository grew as samples say.
func SpaceView(total, free int64, samples []capacity.Sample, now time.Time, t capacity.Threshold) *api.Space {
	v := &api.Space{
		TotalBytes: total, FreeBytes: free,
		Low:             capacity.Low(total, free, t.Percent, t.MinBytes),
		LowBelowPercent: t.Percent, LowBelowBytes: t.MinBytes,
	}
	f := capacity.Predict(samples, free, now)
	if f.Known {
		g := f.PerDay
		v.GrowthBytesPerDay = &g
	}
	if !f.FullAt.IsZero() {
		at := f.FullAt
		v.FullAt = &at
	}
	return v
}
