package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp/kb"
)

const testPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>t</title>
<script type="module" src="/app.js"></script></head><body>
<main><label for="name">Name</label><input id="name" name="name"><button id="go" type="button">Go</button>
<p id="out"></p></main></body></html>`

const testScript = `
const out = document.getElementById("out");
document.getElementById("go").addEventListener("click", () => {
  out.textContent = "hello " + document.getElementById("name").value;
});
function onHash() {
  if (location.hash === "#error") console.error("deliberate console error");
  if (location.hash === "#throw") setTimeout(() => { throw new Error("deliberate exception"); });
  if (location.hash === "#missing") fetch("/nope.js");
  if (location.hash === "#api401") fetch("/api/v1/auth/me");
}
window.addEventListener("hashchange", onHash);
onHash();
`

func testServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, testPage)
		case "/app.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, testScript)
		case "/favicon.ico":
			w.WriteHeader(204)
		case "/api/v1/auth/me":
			http.Error(w, `{"error":{"code":"unauthenticated","message":"no"}}`, http.StatusUnauthorized)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// recorder keeps the harness's Errorf calls instead of failing the test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.errs
	r.errs = nil
	return e
}

func TestBrowser(t *testing.T) {
	t.Setenv("VMVAULT_ARTIFACTS", t.TempDir())
	srv := testServer(t)
	rec := &recorder{TB: t}
	b := New(rec, srv.URL)

	b.Go("/")
	b.Fill("#name", "vmvault")
	b.Click("#go")
	b.WaitText("#out", "hello vmvault")
	b.CheckConsole()
	if e := rec.take(); len(e) != 0 {
		t.Fatalf("clean page reported errors: %v", e)
	}

	// Keyboard: Tab from the input reaches the button, Enter activates it.
	b.Fill("#name", "keys")
	b.Keys(kb.Tab)
	if f := b.Focused(); f != "#go" {
		t.Fatalf("focus after Tab = %s, want #go", f)
	}
	b.Keys(kb.Enter)
	b.WaitText("#out", "hello keys")

	tests := []struct {
		hash string
		want string // "" = no problem expected
	}{
		{"#error", "deliberate console error"},
		{"#throw", "deliberate exception"},
		{"#missing", "404"},
		{"#api401", ""},
	}
	for _, tc := range tests {
		b.Go(tc.hash)
		if tc.want != "" {
			b.WaitJS("true", "settle")
			for i := 0; i < 50 && len(b.Problems()) == 0; i++ {
				b.WaitJS("new Promise(r => setTimeout(() => r(true), 50))", "tick")
			}
		} else {
			b.WaitJS("new Promise(r => setTimeout(() => r(true), 500))", "settle")
		}
		b.CheckConsole()
		got := strings.Join(rec.take(), "\n")
		if tc.want == "" && got != "" {
			t.Errorf("%s: unexpected problems: %s", tc.hash, got)
		}
		if tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: problems %q, want one containing %q", tc.hash, got, tc.want)
		}
	}

	// The accessibility check names an unlabelled input, a duplicate id and
	// the missing h1 of the test page.
	Eval[bool](b, `(() => { const i = document.createElement("input"); i.id = "name"; document.querySelector("main").append(i); return true; })()`)
	got := strings.Join(b.A11yProblems(), "\n")
	for _, want := range []string{"unlabelled: input#name", "duplicate id: name", "0 visible h1"} {
		if !strings.Contains(got, want) {
			t.Errorf("A11yProblems() = %q, want one containing %q", got, want)
		}
	}

	p := b.Screenshot("after")
	if st, err := os.Stat(p); err != nil || st.Size() == 0 {
		t.Fatalf("screenshot %s: %v", p, err)
	}
	b.Viewport(400, 800)
	if w := Eval[int](b, "window.innerWidth"); w != 400 {
		t.Errorf("innerWidth = %d after Viewport(400, 800)", w)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"TestConsole/login":                 "TestConsole_login",
		"http://127.0.0.1:8080/#/tasks?x=1": "127.0.0.1_8080_tasks_x_1",
		"":                                  "page",
		strings.Repeat("a", 100):            strings.Repeat("a", 80),
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
