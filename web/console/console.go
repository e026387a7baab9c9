package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed index.html assets
var files embed.FS

// CSP is the Content-Security-Policy of every console response: scripts and
// styles only from the appliance itself, nothing inline, no framing.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type asset struct {
	body  []byte
	etag  string
	ctype string
}

// Handler serves the embedded console. It answers GET and HEAD only.
type Handler struct {
	assets map[string]asset // "/assets/app.js" -> asset; "/" -> index.html
}

// New loads the embedded files and computes their ETags once.
func New() *Handler {
	h := &Handler{assets: map[string]asset{}}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) {
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".html":
			ct = "text/html; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		key := "/" + p
		if p == "index.html" {
			key = "/"
		}
		h.assets[key] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: ct}
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a build defect.
		panic("console: embedded files: " + err.Error())
	}
	return h
}

// ServeHTTP serves an asset, or index.html for any other path outside
// /assets/ (client routes). A missing asset is a plain 404 so that a broken
// module import shows as one instead of as HTML parsed as JavaScript.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	a, ok := h.assets[p]
	switch {
	case ok && p != "/":
		// Revalidated on every load (file names carry no hash), cheap with the ETag.
		hd.Set("Cache-Control", "no-cache")
	case strings.HasPrefix(p, "/assets/"):
		http.Error(w, "no such asset", http.StatusNotFound)
		return
	default:
		a = h.assets["/"]
		hd.Set("Cache-Control", "no-cache")
	}
	hd.Set("ETag", a.etag)
	hd.Set("Content-Type", a.ctype)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		t = strings.TrimPrefix(t, "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
