package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	h := New()
	tests := []struct {
		name, method, path string
		status             int
		ctype, contains    string
	}{
		{"index", "GET", "/", 200, "text/html", `<script type="module" src="/assets/app.js">`},
		{"client route", "GET", "/jobs/new", 200, "text/html", "<main"},
		{"module", "GET", "/assets/app.js", 200, "text/javascript", "import"},
		{"page list", "GET", "/assets/pages/index.js", 200, "text/javascript", "export default"},
		{"style", "GET", "/assets/app.css", 200, "text/css", ":root"},
		{"missing asset", "GET", "/assets/nope.js", 404, "text/plain", "no such asset"},
		{"dot-dot", "GET", "/assets/../index.html", 200, "text/html", "<main"},
		{"head", "HEAD", "/assets/app.css", 200, "text/css", ""},
		{"post", "POST", "/", 405, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("%s %s: status %d, want %d", tc.method, tc.path, rec.Code, tc.status)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
				t.Errorf("Content-Type %q, want %q", ct, tc.ctype)
			}
			if !strings.Contains(rec.Body.String(), tc.contains) {
				t.Errorf("body lacks %q", tc.contains)
			}
			if tc.status == 200 {
				if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
					t.Errorf("CSP %q", csp)
				}
				if rec.Header().Get("ETag") == "" || rec.Header().Get("Cache-Control") == "" {
					t.Errorf("no ETag/Cache-Control: %v", rec.Header())
				}
			}
		})
	}
}

func TestETagRevalidation(t *testing.T) {
	h := New()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/assets/app.js", nil))
	etag := rec.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	for _, match := range []string{etag, "W/" + etag, `"x", ` + etag} {
		req := httptest.NewRequest("GET", "/assets/app.js", nil)
		req.Header.Set("If-None-Match", match)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
			t.Errorf("If-None-Match %s: status %d, %d bytes", match, rec.Code, rec.Body.Len())
		}
	}
	req := httptest.NewRequest("GET", "/assets/app.js", nil)
	req.Header.Set("If-None-Match", `"stale"`)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("stale ETag: status %d", rec.Code)
	}
}

// TestNoInlineCode keeps the files within the CSP: no inline scripts or
// styles, no style attributes, no HTML built from strings.
func TestNoInlineCode(t *testing.T) {
	for p, a := range New().assets {
		body := string(a.body)
		bad := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", `setAttribute("style"`, "eval(", "new Function("}
		if p == "/" {
			bad = []string{"<style", "style=", "onclick=", "onload=", "javascript:"}
			if strings.Count(body, "<script") != 1 || !strings.Contains(body, `<script type="module" src=`) {
				t.Errorf("index.html: want exactly one external module script")
			}
		}
		if strings.HasSuffix(p, ".css") {
			continue
		}
		for _, b := range bad {
			if strings.Contains(body, b) {
				t.Errorf("%s contains %q", p, b)
			}
		}
	}
}

// FuzzServe: any path and If-None-Match gets a well-formed answer (200, 304
// or 404), never a panic, and never a file outside the embedded set.
func FuzzServe(f *testing.F) {
	for _, s := range [][2]string{{"/", ""}, {"/assets/app.js", `"x"`}, {"/assets/../../etc/passwd", ""}, {"/assets/%2e%2e/index.html", "*"}, {"//assets//app.css", `W/"a", "b"`}} {
		f.Add(s[0], s[1])
	}
	h := New()
	f.Fuzz(func(t *testing.T, p, inm string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path = "/" + p
		req.Header.Set("If-None-Match", inm)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 304, 404:
		default:
			t.Fatalf("path %q: status %d", p, rec.Code)
		}
		if rec.Code == 200 && rec.Header().Get("Content-Security-Policy") == "" {
			t.Fatalf("path %q: no CSP", p)
		}
	})
}
