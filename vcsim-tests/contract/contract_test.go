// Package contract runs the appliance's API, as `appliance demo` serves
// it, through Stoplight Prism's validating proxy built from
// web/openapi.json: a client no one here wrote checks every answer
// against the published document. web's own tests check the document
// against the route table and a fixture; this checks the real daemon.
package contract

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs cmd until the test ends (SIGTERM, then kill), its output in
// the test's log on failure.
func start(t *testing.T, cmd *exec.Cmd) *bytes.Buffer {
	t.Helper()
	var out bytes.Buffer
	cmd.Stderr = &out
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output (end):\n%s", filepath.Base(cmd.Path), tail(out.String(), 3000))
		}
	})
	return &out
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

type client struct {
	t     *testing.T
	base  string
	http  *http.Client
	token string
}

type answer struct {
	status     int
	body       []byte
	violations string
	ours       bool // served by the daemon, not mocked by Prism
}

func (c *client) do(method, path string, body any, hdr map[string]string) answer {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	// Every answer of the daemon carries its security headers; Prism's
	// own mocks (it mocks when the daemon answers 501) do not.
	return answer{status: resp.StatusCode, body: b, violations: resp.Header.Get("sl-violations"), ours: resp.Header.Get("X-Content-Type-Options") != ""}
}

// TestAPIThroughPrism: every documented GET (ids filled from the demo's
// own objects), the login, a token, and error answers (401, 404, 422)
// pass Prism's validation of the responses against web/openapi.json.
func TestAPIThroughPrism(t *testing.T) {
	prism := os.Getenv("VMVAULT_PRISM")
	if prism == "" {
		t.Fatal("VMVAULT_PRISM is not set: run `make test` (it installs Prism), or set it to the prism binary")
	}
	if _, err := os.Stat(prism); err != nil {
		t.Fatalf("VMVAULT_PRISM: %v", err)
	}
	root := repoRoot(t)
	bin := os.Getenv("VMVAULT_APPLIANCE_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "appliance")
		build := exec.Command("go", "build", "-o", bin, "./cmd/appliance")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	const password = "contract-test-password"
	demo := exec.Command(bin, "demo", "--listen", "127.0.0.1:0", "--state", filepath.Join(t.TempDir(), "state"))
	demo.Env = append(os.Environ(), "VMVAULT_ADMIN_PASSWORD="+password)
	pr, pw := io.Pipe()
	demo.Stdout = pw
	start(t, demo)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "console: "); ok {
				urls <- strings.TrimRight(strings.TrimSpace(u), "/")
			}
		}
	}()
	var upstream string
	select {
	case upstream = <-urls:
	case <-time.After(180 * time.Second):
		t.Fatal("appliance demo printed no console URL within 180 s")
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	start(t, exec.Command(prism, "proxy", filepath.Join(root, "web", "openapi.json"), upstream, "--host", "127.0.0.1", "--port", port, "--errors"))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("prism did not listen within 120 s")
		case <-time.After(200 * time.Millisecond):
		}
	}
	jar, _ := cookiejar.New(nil)
	c := &client{t: t, base: "http://" + addr, http: &http.Client{Jar: jar, Timeout: 60 * time.Second}}
	checked := 0
	check := func(what string, a answer, want ...int) {
		t.Helper()
		checked++
		if a.violations != "" {
			t.Errorf("%s: Prism found the answer (%d) off the document: %s\n%.400s", what, a.status, a.violations, a.body)
		}
		if !a.ours {
			t.Errorf("%s: answered by Prism, not the daemon (%d %.300s)", what, a.status, a.body)
			return
		}
		ok := len(want) == 0 && a.status < 500
		for _, w := range want {
			ok = ok || a.status == w
		}
		if !ok {
			t.Errorf("%s: %d %.300s", what, a.status, a.body)
		}
	}

	// (Without credentials Prism answers 401 itself: it checks the
	// document's security schemes before forwarding.)
	login := c.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": password}, nil)
	check("POST /api/v1/auth/login", login, 200)
	var me struct{ CSRFToken string }
	json.Unmarshal(login.body, &me)
	tok := c.do("POST", "/api/v1/auth/tokens", map[string]any{"name": "contract", "role": "administrator"}, map[string]string{"X-CSRF-Token": me.CSRFToken})
	check("POST /api/v1/auth/tokens", tok, 201, 200)
	var secret struct{ Token string }
	json.Unmarshal(tok.body, &secret)
	if secret.Token == "" {
		t.Fatalf("no token: %s", tok.body)
	}
	c.token = secret.Token

	// Ids of the demo's objects.
	ids := map[string]string{}
	first := func(path, field, key string) {
		var list []map[string]any
		json.Unmarshal(c.do("GET", path, nil, nil).body, &list)
		if len(list) > 0 {
			ids[key], _ = list[0][field].(string)
		}
	}
	first("/api/v1/restore-points", "id", "point")
	first("/api/v1/jobs", "id", "job")
	first("/api/v1/tasks", "id", "task")
	first("/api/v1/repositories", "name", "repo")
	for _, k := range []string{"point", "job", "repo"} {
		if ids[k] == "" {
			t.Fatalf("the demo has no %s", k)
		}
	}
	var vols []map[string]any
	json.Unmarshal(c.do("GET", "/api/v1/restore-points/"+ids["point"]+"/volumes", nil, nil).body, &vols)
	for _, v := range vols {
		if b, _ := v["browsable"].(bool); b {
			ids["vol"], _ = v["id"].(string)
			break
		}
	}

	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	b, err := os.ReadFile(filepath.Join(root, "web", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for p, ops := range doc.Paths {
		if _, ok := ops["get"]; ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for _, p := range paths {
		if strings.HasSuffix(p, "/stream") || strings.HasSuffix(p, "/events") && strings.Contains(p, "/tasks/") {
			continue // event streams never end
		}
		q := p
		switch {
		case strings.HasPrefix(p, "/api/v1/restore-points/{id}"):
			q = strings.Replace(q, "{id}", ids["point"], 1)
			if strings.Contains(p, "{vol}") {
				if ids["vol"] == "" {
					continue
				}
				q = strings.Replace(q, "{vol}", ids["vol"], 1) + "?path=/"
			}
		case strings.HasPrefix(p, "/api/v1/jobs/{id}"):
			q = strings.Replace(q, "{id}", ids["job"], 1)
		case strings.HasPrefix(p, "/api/v1/tasks/{id}"):
			if ids["task"] == "" {
				continue
			}
			q = strings.Replace(q, "{id}", ids["task"], 1)
		case strings.HasPrefix(p, "/api/v1/repositories/{id}"):
			q = strings.Replace(q, "{id}", ids["repo"], 1)
		case p == "/api/v1/files/search":
			q += "?q=etc"
		}
		if param.MatchString(q) {
			continue // an id the demo has none of (copy jobs, sessions)
		}
		check("GET "+q, c.do("GET", q, nil, nil))
	}
	// The documented valid example of every POST and PUT that changes
	// nothing outside the demo (no settings, no sign-out, no new
	// repository directories, no vCenter connection change): whatever the
	// daemon answers, Prism finds it in the document.
	var bodies struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct {
					Examples map[string]struct {
						Value json.RawMessage `json:"value"`
					} `json:"examples"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &bodies); err != nil {
		t.Fatal(err)
	}
	skip := regexp.MustCompile(`^/api/v1/(settings|auth/logout|repositories$|approvals|users/|auth/tokens/)`)
	var writes []string
	for p, ops := range bodies.Paths {
		for m := range ops {
			if m == "post" || m == "put" {
				writes = append(writes, m+" "+p)
			}
		}
	}
	sort.Strings(writes)
	for _, w := range writes {
		m, p, _ := strings.Cut(w, " ")
		if skip.MatchString(p) {
			continue
		}
		ex, ok := bodies.Paths[p][m].RequestBody.Content["application/json"].Examples["valid"]
		if !ok {
			continue
		}
		q := p
		switch {
		case strings.HasPrefix(p, "/api/v1/restore-points/{id}"):
			q = strings.Replace(q, "{id}", ids["point"], 1)
		case strings.HasPrefix(p, "/api/v1/jobs/{id}"):
			q = strings.Replace(q, "{id}", ids["job"], 1)
		}
		if param.MatchString(q) {
			continue
		}
		var body any
		json.Unmarshal([]byte(strings.ReplaceAll(string(ex.Value), "0123456789abcdef", ids["point"])), &body)
		check(strings.ToUpper(m)+" "+q+" (documented example)", c.do(strings.ToUpper(m), q, body, nil))
	}
	// Error answers the daemon documents.
	check("GET an unknown point", c.do("GET", "/api/v1/restore-points/"+strings.Repeat("0", 64), nil, nil), 404)
	check("POST /restores of an unknown point", c.do("POST", "/api/v1/restores", map[string]any{"point": "0123456789abcdef", "mode": "new"}, nil), 422)
	check("POST /instant-recoveries of an unknown point", c.do("POST", "/api/v1/instant-recoveries", map[string]any{"point": "0123456789abcdef", "isolated": true}, nil), 422)
	check("GET /instant-recoveries", c.do("GET", "/api/v1/instant-recoveries", nil, nil), 200)
	if checked < 30 {
		t.Fatalf("only %d answers checked", checked)
	}
	t.Logf("%d answers checked through Prism", checked)
}
