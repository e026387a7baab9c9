package web

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/filerestore/catalog"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/web/openapitest"
)

// isFilesPath: the file-level restore routes need a real file system, so
// TestResponsesMatchOpenAPI leaves them to TestFilesAPIMatchesOpenAPI.
func isFilesPath(p string) bool {
	return strings.Contains(p, "/volumes") || strings.HasPrefix(p, "/api/v1/files/")
}

type filesFixture struct {
	*fixture
	svc   *filerestore.Service
	src   string
	point repository.Point // an ext4 point of web01
	old   repository.Point // an older one, nginx.conf differs
}

func newFilesFixture(t *testing.T) *filesFixture {
	t.Helper()
	var svc *filerestore.Service
	f := newFixture(t, func(c *Config) {
		var err error
		svc, err = filerestore.New(filerestore.Config{Source: c.Points.(*repos.Set), CatalogDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		c.Files = svc
	})
	t.Cleanup(func() { svc.Close() })
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, Unicode: true, BigDir: 2500, Modes: true})
	frtest.HostileTree(t, src)
	old := frtest.Backup(t, f.repo, "web01", time.Date(2026, 11, 20, 23, 0, 0, 0, time.UTC), frtest.Ext4Disk(t, src))
	os.WriteFile(filepath.Join(src, "etc/nginx/nginx.conf"), []byte("worker_processes 8;\n"), 0o600)
	p := frtest.Backup(t, f.repo, "web01", time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC), frtest.Ext4Disk(t, src))
	return &filesFixture{fixture: f, svc: svc, src: src, point: p, old: old}
}

func (f *filesFixture) url(kind string, q url.Values) string {
	return fmt.Sprintf("/api/v1/restore-points/%s/volumes/d0p1/%s?%s", f.point.ID, kind, q.Encode())
}

func (f *filesFixture) ro(method, path string, opts ...reqOpt) resp {
	f.t.Helper()
	return f.do(method, path, nil, append([]reqOpt{bearer(f.tokens[auth.RoleRestoreOnly])}, opts...)...)
}

func TestFilesAPI(t *testing.T) {
	f := newFilesFixture(t)
	ctx := context.Background()

	// Volumes, with the restore-only role.
	r := f.ro("GET", "/api/v1/restore-points/"+f.point.ID[:12]+"/volumes")
	var vols []guestfs.Volume
	r.json(t, &vols)
	if r.status != 200 || len(vols) != 1 || vols[0].ID != "d0p1" || vols[0].FS != "ext4" {
		t.Fatalf("volumes: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/api/v1/restore-points/"+f.point.ID+"/volumes", nil); r.status != 401 {
		t.Errorf("unauthenticated: %d", r.status)
	}

	// A paged listing of 2500 entries.
	var names []string
	next := 0
	for pages := 0; ; pages++ {
		r := f.ro("GET", f.url("files", url.Values{"path": {"/big/"}, "offset": {fmt.Sprint(next)}, "limit": {"1000"}}))
		var l FileListing
		r.json(t, &l)
		if r.status != 200 || l.Total != 2500 || l.Path != "/big" {
			t.Fatalf("listing: %d %s", r.status, truncate(string(r.body), 300))
		}
		for _, e := range l.Entries {
			names = append(names, e.Name)
		}
		if l.NextOffset == nil {
			if pages != 2 {
				t.Errorf("%d pages", pages+1)
			}
			break
		}
		next = *l.NextOffset
	}
	if len(names) != 2500 || names[0] != "file-000000" || names[2499] != "file-002499" {
		t.Fatalf("paged names: %d", len(names))
	}
	r = f.ro("GET", f.url("files", url.Values{"path": {"/etc"}}))
	if !strings.Contains(string(r.body), `"target":"/etc/nginx/nginx.conf"`) || !strings.Contains(string(r.body), `"name":"hostname","type":"file","size":6,"mtime":"2024-03-05T07:09:11Z","mode":"0644"`) {
		t.Errorf("listing of /etc: %s", r.body)
	}

	// Bad paths and other errors.
	for _, c := range []struct {
		kind string
		q    url.Values
		code int
		err  string
	}{
		{"files", url.Values{"path": {"/../../etc"}}, 400, "bad_path"},
		{"content", url.Values{"path": {"../x"}}, 400, "bad_path"},
		{"content", url.Values{"path": {"/etc/hostname", "/a/../../b"}}, 400, "bad_path"},
		{"files", url.Values{"path": {"/nope"}}, 404, "not_found"},
		{"content", url.Values{"path": {"/nope"}}, 404, "not_found"},
		{"content", url.Values{"path": {"/hostile/up-passwd"}}, 404, "not_found"}, // the link stays inside the volume
		{"files", url.Values{"path": {"/etc/hostname"}}, 400, "not_a_directory"},
		{"files", url.Values{"limit": {"0"}}, 400, "bad_request"},
		{"content", url.Values{}, 400, "bad_request"},
		{"content", url.Values{"path": {"/etc"}, "format": {"rar"}}, 400, "bad_request"},
	} {
		r := f.ro("GET", f.url(c.kind, c.q))
		if r.status != c.code || r.errBody(t).Code != c.err {
			t.Errorf("%s %v: %d %s, want %d %s", c.kind, c.q, r.status, r.body, c.code, c.err)
		}
	}
	if r := f.ro("GET", "/api/v1/restore-points/"+f.point.ID+"/volumes/d7p7/files"); r.status != 404 {
		t.Errorf("unknown volume: %d %s", r.status, r.body)
	}

	// One file: bytes, length, name, never rendered.
	want, _ := os.ReadFile(filepath.Join(f.src, "data/random-1m.bin"))
	r = f.ro("GET", f.url("content", url.Values{"path": {"/data/random-1m.bin"}}))
	if r.status != 200 || !bytes.Equal(r.body, want) {
		t.Fatalf("content: %d, %d bytes", r.status, len(r.body))
	}
	if r.header.Get("Content-Length") != fmt.Sprint(len(want)) || r.header.Get("Content-Type") != "application/octet-stream" ||
		r.header.Get("Content-Disposition") != `attachment; filename=random-1m.bin` || r.header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("headers %v", r.header)
	}
	// Range.
	r = f.ro("GET", f.url("content", url.Values{"path": {"/data/random-1m.bin"}}), func(q *http.Request) { q.Header.Set("Range", "bytes=1000000-1000099") })
	if r.status != 206 || !bytes.Equal(r.body, want[1000000:1000100]) || r.header.Get("Content-Range") != fmt.Sprintf("bytes 1000000-1000099/%d", len(want)) {
		t.Errorf("range: %d %v, %d bytes", r.status, r.header, len(r.body))
	}
	r = f.ro("GET", f.url("content", url.Values{"path": {"/data/random-1m.bin"}}), func(q *http.Request) { q.Header.Set("Range", "bytes=99999999-") })
	if r.status != 416 {
		t.Errorf("unsatisfiable range: %d", r.status)
	}
	// A Unicode name through a link.
	r = f.ro("GET", f.url("content", url.Values{"path": {"/unicode/Grüße-😀.txt"}}))
	if r.status != 200 || string(r.body) != "unicode\n" || !strings.Contains(r.header.Get("Content-Disposition"), `filename="Gr__e-_.txt"; filename*=UTF-8''Gr%C3%BC%C3%9Fe-%F0%9F%98%80.txt`) {
		t.Errorf("unicode: %d %q %v", r.status, r.body, r.header.Get("Content-Disposition"))
	}

	// A directory: a zip; tar on request; a selection.
	r = f.ro("GET", f.url("content", url.Values{"path": {"/etc"}}))
	if r.status != 200 || r.header.Get("Content-Type") != "application/zip" || r.header.Get("Content-Disposition") != "attachment; filename=etc.zip" {
		t.Fatalf("zip: %d %v", r.status, r.header)
	}
	zr, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, zf := range zr.File {
		rc, _ := zf.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		got[zf.Name] = string(b)
		if !filepath.IsLocal(zf.Name) {
			t.Errorf("zip entry %q is not local", zf.Name)
		}
	}
	wantConf, _ := os.ReadFile(filepath.Join(f.src, "etc/nginx/nginx.conf"))
	if got["etc/hostname"] != "web01\n" || got["etc/nginx/nginx.conf"] != string(wantConf) || got["etc/abs-link"] != "/etc/nginx/nginx.conf" {
		t.Errorf("zip entries %v", keysOf(got))
	}

	r = f.ro("GET", f.url("content", url.Values{"path": {"/hostile", "/etc/hostname", "/data-link"}, "format": {"tar"}}))
	if r.status != 200 || r.header.Get("Content-Disposition") != "attachment; filename=files.tar" {
		t.Fatalf("tar: %d %v", r.status, r.header)
	}
	tr := tar.NewReader(bytes.NewReader(r.body))
	entries := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) || strings.ContainsAny(h.Name, `\:`) {
			t.Errorf("tar entry %q could escape", h.Name)
		}
		entries[h.Name] = h
	}
	for name, link := range map[string]string{"data-link": "data", "hostile/abs-passwd": "/etc/passwd", "hostile/up-passwd": "../../../../../etc/passwd"} {
		if h := entries[name]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != link {
			t.Errorf("tar %s: %+v", name, h)
		}
	}
	if h := entries["hostile/.._.._evil.txt"]; h == nil || h.Size != int64(len("backslashes")) {
		t.Errorf("hostile name: %+v (have %v)", h, keysOf(entries))
	}
	if h := entries["etc/hostname"]; h == nil || h.Mode != 0o644 || !h.ModTime.Equal(time.Date(2024, 3, 5, 7, 9, 11, 0, time.UTC)) {
		t.Errorf("etc/hostname header %+v", h)
	}

	// Every download is in the event log: who, which point, which paths.
	evs, err := f.db.Events(ctx, state.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var downloads []string
	for _, e := range evs {
		if e.Kind == EventKindFileDownload {
			downloads = append(downloads, e.Message)
			if e.Subject != "admin" || e.Repository != "main" || e.VM != "uuid-web01" || e.ObjectKind != "point" || e.ObjectID != f.point.ID || e.Outcome != OutcomeOK {
				t.Errorf("event %+v", e)
			}
		}
	}
	// 1 file + 2 ranges + the 416 (the file was opened) + unicode + zip + tar.
	if len(downloads) < 6 {
		t.Fatalf("%d download events: %q", len(downloads), downloads)
	}
	last := downloads[len(downloads)-1]
	for _, s := range []string{"tar archive of /hostile, /etc/hostname, /data-link", "volume d0p1", f.point.ID, "web01"} {
		if !strings.Contains(last, s) {
			t.Errorf("event message %q lacks %q", last, s)
		}
	}
	for _, m := range downloads {
		if strings.Contains(m, "nope") || strings.Contains(m, "..") {
			t.Errorf("a refused request was recorded as a download: %q", m)
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestFilesSearchAPI(t *testing.T) {
	f := newFilesFixture(t)
	r := f.ro("GET", "/api/v1/files/search?q=nginx.conf")
	var res catalog.Result
	r.json(t, &res)
	// The two ext4 points and the fixture's three tiny ones are pending.
	if r.status != 200 || len(res.Hits) != 0 || len(res.Pending) != 5 {
		t.Fatalf("before indexing: %d %s", r.status, r.body)
	}
	if err := f.svc.IndexPending(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	r = f.ro("GET", "/api/v1/files/search?q="+url.QueryEscape("*.CONF")+"&vm=web01")
	res = catalog.Result{}
	r.json(t, &res)
	if r.status != 200 || len(res.Hits) != 1 || len(res.Pending) != 0 {
		t.Fatalf("search: %d %s", r.status, r.body)
	}
	h := res.Hits[0]
	if h.Path != "/etc/nginx/nginx.conf" || len(h.Versions) != 2 || h.Versions[0].RestorePoint != f.point.ID || h.Versions[0].Size != 20 ||
		h.Versions[1].RestorePoint != f.old.ID || h.Versions[1].Size != 6000 {
		t.Errorf("hit %s", r.body)
	}
	for _, c := range []struct {
		q    string
		code int
	}{{"", 400}, {"q=%5Bx", 400}, {"q=a&since=yesterday", 400}, {"q=a&limit=0", 400}} {
		if r := f.ro("GET", "/api/v1/files/search?"+c.q); r.status != c.code {
			t.Errorf("%q: %d %s", c.q, r.status, r.body)
		}
	}
	if r := f.ro("GET", "/api/v1/files/search?q=nginx&vm=db99"); !strings.Contains(string(r.body), `"hits":[]`) {
		t.Errorf("no VM: %s", r.body)
	}
}

// The file routes answer with what their documented schemas say, on a
// real file system.
func TestFilesAPIMatchesOpenAPI(t *testing.T) {
	f := newFilesFixture(t)
	if err := f.svc.IndexPending(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	sc := openapitest.Checker{Schemas: doc.Components.Schemas}
	for p, q := range map[string]string{
		"/api/v1/restore-points/{id}/volumes":             "",
		"/api/v1/restore-points/{id}/volumes/{vol}/files": "?path=/etc",
		"/api/v1/files/search":                            "?q=host",
	} {
		op := doc.Paths[p]["get"]
		if op == nil {
			t.Fatalf("%s not documented", p)
		}
		schema := op["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		u := strings.NewReplacer("{id}", f.point.ID, "{vol}", "d0p1").Replace(p) + q
		r := f.ro("GET", u)
		var v any
		if r.status != 200 || json.Unmarshal(r.body, &v) != nil {
			t.Fatalf("GET %s: %d %s", u, r.status, r.body)
		}
		if errs := sc.Check(p, schema, v); len(errs) > 0 {
			t.Errorf("GET %s does not match its schema:\n  %s", p, strings.Join(errs, "\n  "))
		}
	}
}

// Without a file service the routes say so.
func TestFilesNotConfigured(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.admin("GET", "/api/v1/restore-points/"+f.points[0].ID+"/volumes", nil); r.status != 501 {
		t.Errorf("volumes without a service: %d", r.status)
	}
	if r := f.admin("GET", "/api/v1/files/search?q=x", nil); r.status != 501 {
		t.Errorf("search without a service: %d", r.status)
	}
}
