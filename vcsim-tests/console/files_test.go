package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

type fetched struct {
	Status int    `json:"status"`
	Type   string `json:"type"`
	Disp   string `json:"disp"`
	Text   string `json:"text"`
	Magic  string `json:"magic"`
	Size   int    `json:"size"`
}

// fetchJS downloads a console link's href with the page's session.
func fetchJS(sel string) string {
	return fmt.Sprintf(`(async () => {
		const el = document.querySelector(%q);
		const url = el.getAttribute("href") || el.dataset.href;
		const r = await fetch(url, {credentials: "same-origin"});
		const b = new Uint8Array(await r.arrayBuffer());
		return {status: r.status, type: r.headers.get("Content-Type") || "", disp: r.headers.get("Content-Disposition") || "",
			text: new TextDecoder().decode(b.slice(0, 4096)), magic: String.fromCharCode(...b.slice(0, 2)), size: b.length};
	})()`, sel)
}

// TestFilesBrowseAndDownload takes web-01's newest point through the
// restore wizard's "Restore files" kind into the file browser, walks to
// /etc with the listing and the tree, downloads /etc/hostname (the bytes
// the sample VM's file system holds) and a selection as a zip.
func TestFilesBrowseAndDownload(t *testing.T) {
	b := signedIn(t)
	b.Go("#/restore")
	b.WaitVisible(`input[name=vm][data-name="web-01"]`)
	b.Click(`input[name=vm][data-name="web-01"]`)
	b.Click("#restore-vm .p2-next")
	b.WaitVisible("#restore-point .p2-day")
	b.Click(`#restore-point input[name=point]`)
	b.Click("#restore-point .p2-next")
	b.WaitVisible("#mode-files")
	b.Click(`label[for="mode-files"]`)
	b.Click("#restore-mode .p2-next")

	pageTitle(t, b, "Restore files")
	b.WaitVisible("#files-browser")
	b.WaitVisible(`#files-vols button.files-vol[aria-pressed="true"]`)
	b.WaitVisible(`.files-open[data-path="/etc"]`)
	b.WaitVisible(`#files-tree li[data-path="/"] li[data-path="/etc"]`)
	b.Click(`.files-open[data-path="/etc"]`)
	b.WaitText("#files-crumbs", "etc")
	b.WaitVisible(`a.files-get[data-path="/etc/hostname"]`)
	b.WaitJS(`location.hash.includes("path=%2Fetc")`, "the browser's URL names the folder")
	got := browsertest.Eval[fetched](b, fetchJS(`a.files-get[data-path="/etc/hostname"]`))
	if got.Status != 200 || got.Text != "web-01\n" || got.Type != "application/octet-stream" || !strings.Contains(got.Disp, "hostname") {
		t.Fatalf("download of /etc/hostname: %+v", got)
	}
	// The tree opened along: /etc is the current folder there too.
	b.WaitVisible(`#files-tree li[data-path="/etc"] > .files-node-row .files-node[aria-current]`)

	// Multi-select, then the selection as a zip.
	b.Click(`input.files-sel[data-path="/etc/hostname"]`)
	b.Click(`input.files-sel[data-path="/etc/nginx"]`)
	b.WaitText("#files-selinfo", "2 selected")
	b.WaitJS(`!document.getElementById("files-dl-selection").disabled`, "the selection download enabled")
	zip := browsertest.Eval[fetched](b, fetchJS("#files-dl-selection"))
	if zip.Status != 200 || zip.Type != "application/zip" || zip.Magic != "PK" || !strings.Contains(zip.Text, "nginx/nginx.conf") || !strings.Contains(zip.Text, "hostname") {
		t.Fatalf("selection zip: status %d type %q magic %q", zip.Status, zip.Type, zip.Magic)
	}
	// Breadcrumbs go back up.
	b.Click(`#files-crumbs a[data-path="/"]`)
	b.WaitVisible(`.files-open[data-path="/etc"]`)
	p2NoJunk(t, b, "file browser")
	b.CheckConsole()
}

// TestFilesSearch finds nginx.conf in the catalog (indexed in the
// background after the demo's backups) with a version per restore point,
// and downloads one version from the results.
func TestFilesSearch(t *testing.T) {
	b := signedIn(t)
	b.Go("#/files")
	pageTitle(t, b, "Restore files")
	b.WaitVisible("#files-q")
	// Nothing typed: the form says what is missing.
	b.Click("#files-search-go")
	b.WaitText("#files-search .field-error", "Enter a file name")
	b.Fill("#files-q", "nginx.conf")
	b.Fill("#files-vm", "web-01")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b.Click("#files-search-go")
		b.WaitJS(`!!document.querySelector("#files-results .files-hit, #files-results #files-nohit, #files-results .form-error")`, "search results")
		if b.Count(`#files-results .files-hit[data-path="/etc/nginx/nginx.conf"]`) > 0 && b.Count("#files-pending") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx.conf not found within 3 minutes: %s", b.Text("#files-results"))
		}
		time.Sleep(3 * time.Second)
	}
	var points []struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "GET", "/restore-points?vm=web-01", nil, &points); st != 200 || len(points) == 0 {
		t.Fatalf("points of web-01: %d %d", st, len(points))
	}
	hit := `#files-results .files-hit[data-path="/etc/nginx/nginx.conf"]`
	if n := b.Count(hit + " tbody tr"); n != len(points) {
		t.Errorf("%d versions shown, web-01 has %d restore points", n, len(points))
	}
	got := browsertest.Eval[fetched](b, fetchJS(hit+" a.files-get"))
	if got.Status != 200 || !strings.Contains(got.Disp, "nginx.conf") || got.Size < 1000 {
		t.Fatalf("download from the search: %+v", got)
	}
	// "Open folder" goes to the file browser at /etc/nginx.
	b.Click(hit + ` a[href^="#/files?point="]`)
	b.WaitVisible(`a.files-get[data-path="/etc/nginx/nginx.conf"]`)
	b.CheckConsole()
}
