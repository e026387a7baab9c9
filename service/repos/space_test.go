package repos

import (
	"testing"
	"time"

	"github.com/vmvault/vmvault/service/capacity"
)

// TestRepositorySpace: the detail of a local repository carries its
// volume's space, and a forecast once its points span more than an hour.
func TestRepositorySpace(t *testing.T) {
	f := newFixture(t, WithLowSpace(capacity.Threshold{Percent: 101})) // everything is low
	ri, err := f.set.Repository(t.Context(), "main")
	if err != nil {
		t.Fatal(err)
	}
	sp := ri.Space
	if sp == nil || sp.TotalBytes <= 0 || sp.FreeBytes <= 0 || sp.FreeBytes > sp.TotalBytes {
		t.Fatalf("space = %+v, want the volume's figures", sp)
	}
	if !sp.Low || sp.LowBelowPercent != 101 {
		t.Errorf("low = %v below %v%%, want the threshold given", sp.Low, sp.LowBelowPercent)
	}
	// The fixture's points: 1 Oct, 27 Nov, 28 Nov; the clock is 29 Nov,
	// so the forecast uses the last two (the October one is outside 30 days).
	want := float64(f.points[1].Disks[0].Stats.StoredBytes) // the second point's bytes, added in one day
	if sp.GrowthBytesPerDay == nil || *sp.GrowthBytesPerDay < want*0.99 || *sp.GrowthBytesPerDay > want*1.01 {
		t.Fatalf("growth = %v, want about %v a day", sp.GrowthBytesPerDay, want)
	}
	// A few KiB a day against the test volume's free space is beyond a
	// century (no date); a date, when given, is free / growth away.
	exp := float64(sp.FreeBytes) / want
	switch {
	case exp >= 36500 && sp.FullAt != nil:
		t.Errorf("fill date %v for %.0f days away, want none", sp.FullAt, exp)
	case exp < 36500 && sp.FullAt == nil:
		t.Errorf("no fill date, want one %.1f days away", exp)
	case sp.FullAt != nil:
		if days := sp.FullAt.Sub(f.clk.Now()).Hours() / 24; days < exp*0.99 || days > exp*1.01 {
			t.Errorf("fills in %.1f days, want about %.1f", days, exp)
		}
	}
	// The listing stays cheap: no statfs, no forecast.
	list, err := f.set.Repositories(t.Context())
	if err != nil || len(list) != 1 || list[0].Space != nil {
		t.Fatalf("Repositories = %+v, %v; want no space figures in the listing", list, err)
	}
}

func TestSpaceView(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	v := SpaceView(1000, 50, nil, now, capacity.Threshold{Percent: 10})
	if !v.Low || v.GrowthBytesPerDay != nil || v.FullAt != nil {
		t.Fatalf("no samples: %+v, want low with no forecast", v)
	}
	v = SpaceView(1000, 500, []capacity.Sample{{Time: now.Add(-48 * time.Hour), Used: 0}, {Time: now, Used: 200}}, now, capacity.Threshold{Percent: 10})
	if v.Low || v.GrowthBytesPerDay == nil || *v.GrowthBytesPerDay != 100 || v.FullAt == nil || !v.FullAt.Equal(now.Add(5*24*time.Hour)) {
		t.Fatalf("100 B a day, 500 free: %+v", v)
	}
}
