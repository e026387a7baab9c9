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
