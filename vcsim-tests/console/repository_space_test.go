package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestRepositorySpace: the repository page shows its volume's used and
// free space as the API reports it, and the words for a low, filling
// volume and for an object store (made up here) say what to do.
func TestRepositorySpace(t *testing.T) {
	b := signedIn(t)
	_, repo := p2DemoJobAndRepo(t, b)
	var det struct {
		Space *struct {
			TotalBytes int64 `json:"totalBytes"`
			FreeBytes  int64 `json:"freeBytes"`
		} `json:"space"`
	}
	if st := p2API(t, b, "GET", "/repositories/"+repo, nil, &det); st != 200 || det.Space == nil || det.Space.TotalBytes <= 0 {
		t.Fatalf("GET /repositories/%s: %d, space %+v", repo, st, det.Space)
	}
	b.Go("#/repositories/" + repo)
	b.WaitVisible("#space-meter")
	if got := p2Attr(b, "#space-meter", "max"); got != fmt.Sprint(det.Space.TotalBytes) {
		t.Errorf("meter max = %s, want the volume's %d bytes", got, det.Space.TotalBytes)
	}
	b.WaitText("#space-words", "free")
	b.WaitVisible("#space-forecast")
	b.CheckConsole()

	view := func(sp string) string {
		t.Helper()
		return browsertest.Eval[string](b, fmt.Sprintf(`(async () => { const R = await import("/assets/pages/repositories.js");
			const D = await import("/assets/lib/dom.js"); const F = await import("/assets/lib/fmt.js");
			return R.spaceView(D.h, F, %s, {diskBytes: 2147483648}).map(e => e.textContent).join(" | "); })()`, sp))
	}
	low := view(`{totalBytes: 1000000000000, freeBytes: 50000000000, low: true, lowBelowPercent: 10, lowBelowBytes: 10737418240, growthBytesPerDay: 10000000000, fullAt: "2027-01-05T00:00:00Z"}`)
	for _, want := range []string{"95%", "Low on space", "shorten retention", "full around", "2027"} {
		if !strings.Contains(low, want) {
			t.Errorf("low, filling volume: %q lacks %q", low, want)
		}
	}
	if s3 := view(`null`); !strings.Contains(s3, "reports no free space") || !strings.Contains(s3, "2.0 GiB") {
		t.Errorf("object store: %q", s3)
	}
	if flat := view(`{totalBytes: 100, freeBytes: 50, low: false, lowBelowPercent: 10, lowBelowBytes: 0, growthBytesPerDay: -5}`); !strings.Contains(flat, "not growing") || strings.Contains(flat, "Low on space") {
		t.Errorf("shrinking repository: %q", flat)
	}
}

// TestRepositoryBandwidth: the repository page says when a repository has
// no bandwidth limits, and bandwidthView words the limits the API reports
// (made up here: the demo's repository has none).
func TestRepositoryBandwidth(t *testing.T) {
	b := signedIn(t)
	_, repo := p2DemoJobAndRepo(t, b)
	b.Go("#/repositories/" + repo)
	b.WaitText("#bandwidth-none", "No bandwidth limits")
	b.CheckConsole()
	view := func(bw string) string {
		t.Helper()
		return browsertest.Eval[string](b, fmt.Sprintf(`(async () => { const R = await import("/assets/pages/repositories.js");
			const D = await import("/assets/lib/dom.js");
			return R.bandwidthView(D.h, %s).map(e => e.textContent).join(" | "); })()`, bw))
	}
	got := view(`{uploadMBps: 50, downloadMBps: 0, nowUploadMBps: 5, nowDownloadMBps: 20,
		schedule: [{window: {location: "Europe/Berlin", days: {monday: ["08:00-18:00"]}}, uploadMBps: 5, downloadMBps: 20}]}`)
	for _, want := range []string{"Now: uploads 5 MB/s, downloads 20 MB/s", "Outside the windows below: uploads 50 MB/s, downloads unlimited", "monday 08:00-18:00 (Europe/Berlin): uploads 5 MB/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("bandwidth view %q lacks %q", got, want)
		}
	}
	if got := view(`{uploadMBps: 8, downloadMBps: 8, nowUploadMBps: 8, nowDownloadMBps: 8}`); !strings.Contains(got, "Always: uploads 8 MB/s") {
		t.Errorf("constant limits: %q", got)
	}
}
