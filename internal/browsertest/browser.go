package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// ChromiumPath is where Debian's chromium package installs the browser.
const ChromiumPath = "/usr/bin/chromium"

// DefaultTimeout bounds each helper's wait.
const DefaultTimeout = 15 * time.Second

// Browser is one headless Chromium with one tab, bound to a test.
type Browser struct {
	t       testing.TB
	base    string
	ctx     context.Context // the tab
	Timeout time.Duration

	mu       sync.Mutex
	problems []string
	allowed  []string
	visited  []string
	loaded   bool
	width    int64
	height   int64
}

// chromium finds the browser: $VMVAULT_CHROMIUM, /usr/bin/chromium, then $PATH.
func chromium() (string, error) {
	if p := os.Getenv("VMVAULT_CHROMIUM"); p != "" {
		return p, nil
	}
	if _, err := os.Stat(ChromiumPath); err == nil {
		return ChromiumPath, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium not found")
}

// New starts a fresh headless Chromium (1280x800) for t, whose pages live
// under baseURL ("http://127.0.0.1:port"). The browser stops when t ends;
// console errors seen until then fail t.
func New(t testing.TB, baseURL string) *Browser {
	t.Helper()
	exe, err := chromium()
	if err != nil {
		t.Fatalf("browsertest: %v: install chromium: make test does", err)
	}
	b := &Browser{t: t, base: strings.TrimRight(baseURL, "/"), Timeout: DefaultTimeout, width: 1280, height: 800}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b.ctx = ctx
	t.Cleanup(func() {
		b.finish()
		cancel()
		acancel()
	})
	// Subscribing starts the browser; messages are collected from here on.
	msgs := chromedp.Console(ctx)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(b.width, b.height)); err != nil {
		t.Fatalf("browsertest: start %s: %v", exe, err)
	}
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.observe(m)
		}
	}()
	return b
}

var networkStatus = regexp.MustCompile(`status of (\d{3})`)

// observe records console errors and exceptions. API answers with an error
// status other than 500 are the console's normal business (a wrong password,
// an expired session, a validation error, "no vCenter configured": it shows
// them) and are not problems; a 500 is a bug, and so is any failed load of
// the console's own files.
func (b *Browser) observe(m chromedp.ConsoleMessage) {
	if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException {
		return
	}
	text := m.Text
	if m.Exception != nil && m.Exception.Exception != nil && m.Exception.Exception.Description != "" {
		text = m.Exception.Exception.Description
	}
	if m.Source == "network" {
		if s := networkStatus.FindStringSubmatch(text); s != nil && s[1] != "500" && strings.Contains(m.URL, "/api/") {
			return
		}
	}
	line := fmt.Sprintf("%s: %s", m.Type, text)
	if m.URL != "" {
		line += fmt.Sprintf(" (%s:%d)", m.URL, m.Line+1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.allowed {
		if strings.Contains(line, a) {
			return
		}
	}
	b.problems = append(b.problems, line)
}

// Allow stops console messages containing substr from failing the test (for
// a test that provokes an error on purpose).
func (b *Browser) Allow(substr string) {
	b.mu.Lock()
	b.allowed = append(b.allowed, substr)
	b.mu.Unlock()
}

// Problems returns the console errors and exceptions seen so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// CheckConsole fails the test now if the console had errors, naming them, and
// forgets them.
func (b *Browser) CheckConsole() {
	b.t.Helper()
	time.Sleep(100 * time.Millisecond) // let the last events arrive
	b.mu.Lock()
	p := b.problems
	b.problems = nil
	b.mu.Unlock()
	if len(p) > 0 {
		b.t.Errorf("browser console errors at %s:\n  %s", b.URL(), strings.Join(p, "\n  "))
	}
}

func (b *Browser) finish() {
	b.CheckConsole()
	if !b.t.Failed() {
		return
	}
	dir := ArtifactDir(b.t)
	_ = os.RemoveAll(dir) // screenshots of an earlier run would mislead
	var saved []string
	if p, err := b.screenshot("final"); err == nil {
		saved = append(saved, p)
	}
	b.mu.Lock()
	visited := append([]string(nil), b.visited...)
	b.mu.Unlock()
	for i, u := range visited {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		err := chromedp.Do(ctx, chromedp.Navigate(u))
		cancel()
		if err != nil {
			continue
		}
		time.Sleep(700 * time.Millisecond) // let the page render its data
		if p, err := b.screenshot(fmt.Sprintf("%02d-%s", i+1, slug(u))); err == nil {
			saved = append(saved, p)
		}
	}
	if len(saved) > 0 {
		b.t.Logf("browsertest: %d screenshots in %s", len(saved), dir)
	}
}

// ArtifactDir is where t's screenshots go: $VMVAULT_ARTIFACTS/<TestName> or
// <repo>/.artifacts/browser/<TestName>.
func ArtifactDir(t testing.TB) string {
	root := os.Getenv("VMVAULT_ARTIFACTS")
	if root == "" {
		root = filepath.Join(repoRoot(), ".artifacts", "browser")
	}
	return filepath.Join(root, slug(t.Name()))
}

func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func slug(s string) string {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
	s = strings.Trim(unsafeName.ReplaceAllString(s, "_"), "_")
	if len(s) > 80 {
		s = s[:80]
	}
	if s == "" {
		s = "page"
	}
	return s
}

func (b *Browser) screenshot(name string) (string, error) {
	dir := ArtifactDir(b.t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, slug(name)+".png")
	return p, os.WriteFile(p, png, 0o644)
}

// Screenshot saves a full-page PNG named name in the artifact directory and
// returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	p, err := b.screenshot(name)
	if err != nil {
		b.t.Fatalf("browsertest: screenshot %s: %v", name, err)
	}
	return p
}

// Ctx is the tab's chromedp context, for actions the helpers do not cover.
func (b *Browser) Ctx() context.Context { return b.ctx }

// Do runs chromedp actions with the helpers' timeout, failing the test on error.
func (b *Browser) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browsertest: %s at %s: %v; console: %v", what, b.URL(), err, b.Problems())
	}
}

// Eval evaluates a JavaScript expression and decodes its value into T.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browsertest: eval %q at %s: %v", expr, b.URL(), err)
	}
	return v
}

// URL is the tab's current address.
func (b *Browser) URL() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	u, err := chromedp.Run(ctx, chromedp.Evaluate[string]("location.href"))
	if err != nil {
		return "(unknown)"
	}
	return u
}

// Go opens a page: a path ("/", "/#/login") loads it; a hash ("#/tasks")
// changes the route of the loaded console without reloading it.
func (b *Browser) Go(target string) {
	b.t.Helper()
	if strings.HasPrefix(target, "#") && b.loaded {
		b.Do("go "+target, chromedp.Evaluate[chromedp.Void](fmt.Sprintf("void (location.hash = %q)", target)))
		b.remember(b.base + "/" + target)
		return
	}
	if strings.HasPrefix(target, "#") {
		target = "/" + target
	}
	b.Do("navigate "+target, chromedp.Navigate(b.base+target))
	b.loaded = true
	b.remember(b.base + target)
}

func (b *Browser) remember(u string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, v := range b.visited {
		if v == u {
			return
		}
	}
	b.visited = append(b.visited, u)
}

// Reload reloads the current page.
func (b *Browser) Reload() {
	b.t.Helper()
	b.Do("reload", chromedp.Reload())
}

// Viewport resizes the page (e.g. 400x800 for a narrow screen).
func (b *Browser) Viewport(width, height int64) {
	b.t.Helper()
	b.width, b.height = width, height
	b.Do("viewport", chromedp.EmulateViewport(width, height))
}

// Click clicks the first element matching the CSS selector once it is visible.
func (b *Browser) Click(sel string) {
	b.t.Helper()
	// A page that re-renders (a list refreshed by its poll) can replace
	// the node between the query and the click: Chrome then answers "Could
	// not find node with given id", and the click is tried again on the
	// new node until the timeout. Any other error fails at once.
	ctx, cancel := context.WithTimeout(b.ctx, b.Timeout)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "Could not find node with given id") || ctx.Err() != nil {
			b.t.Fatalf("browsertest: click %s at %s: %v; console: %v", sel, b.URL(), err, b.Problems())
		}
	}
}

// Fill replaces the text of the input matching sel by typing text into it.
func (b *Browser) Fill(sel, text string) {
	b.t.Helper()
	b.WaitVisible(sel)
	// Empty the control as a user selecting all and deleting would, then type.
	b.Do("fill "+sel, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`void (() => { const e = document.querySelector(%q); e.focus(); e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true})); })()`, sel)),
		chromedp.SendKeys(chromedp.CSS(sel), text, chromedp.NodeVisible))
}

// SetValue sets a control's value as a picker would (date and time
// inputs, ranges) and fires input and change.
func (b *Browser) SetValue(sel, value string) {
	b.t.Helper()
	b.Select(sel, value)
}

// Select chooses the option with the given value in the <select> sel.
func (b *Browser) Select(sel, value string) {
	b.t.Helper()
	b.WaitVisible(sel)
	b.Do("select "+sel, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`void (() => { const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event("input", {bubbles: true})); s.dispatchEvent(new Event("change", {bubbles: true})); })()`, sel, value)))
}

// WaitVisible waits until an element matching sel is visible.
func (b *Browser) WaitVisible(sel string) {
	b.t.Helper()
	b.Do("wait visible "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// WaitGone waits until no element matches sel.
func (b *Browser) WaitGone(sel string) {
	b.t.Helper()
	b.Do("wait gone "+sel, chromedp.WaitNotPresent(chromedp.CSS(sel)))
}

// WaitText waits until an element matching sel contains text.
func (b *Browser) WaitText(sel, text string) {
	b.t.Helper()
	b.WaitJS(fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text),
		fmt.Sprintf("text %q in %s", text, sel))
}

// WaitJS waits until the JavaScript expression is truthy; what names it in the failure.
func (b *Browser) WaitJS(expr, what string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.Timeout+time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(b.Timeout), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.querySelector("main") || document.body).innerText.slice(0, 1500)`))
		b.t.Fatalf("browsertest: waiting for %s at %s: %v\npage text: %s\nconsole: %v", what, b.URL(), err, body, b.Problems())
	}
}

// Text returns the text content of the first element matching sel ("" when none).
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	return Eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel))
}

// Count returns how many elements match sel.
func (b *Browser) Count(sel string) int {
	b.t.Helper()
	return Eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// Keys types keys into whatever has the focus (kb.Tab, kb.Enter, kb.Escape, text).
func (b *Browser) Keys(keys string) {
	b.t.Helper()
	b.Do("keys", chromedp.KeyEvent(keys))
}

// ShiftTab moves the focus backwards.
func (b *Browser) ShiftTab() {
	b.t.Helper()
	b.Do("shift+tab", chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
}

// Focused describes the focused element: "#id", or "tag.class[name]" with its text.
func (b *Browser) Focused() string {
	b.t.Helper()
	return Eval[string](b, `(() => { const e = document.activeElement; if (!e || e === document.body) return "body";
		if (e.id) return "#" + e.id;
		return e.tagName.toLowerCase() + (e.name ? "[name=" + e.name + "]" : "") + " " + (e.getAttribute("aria-label") || e.textContent || "").trim().slice(0, 40); })()`)
}

// SetCookie gives the browser a cookie for the base URL (path "/"), e.g. a
// session opened once for many tests: logins are rate-limited.
func (b *Browser) SetCookie(name, value string, httpOnly bool) {
	b.t.Helper()
	b.Do("set cookie "+name, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetCookie, network.SetCookieParams{
			Name: name, Value: value, URL: b.base + "/", Path: "/", HTTPOnly: &httpOnly, SameSite: network.CookieSameSiteStrict,
		})
		return err
	}))
}

// Login signs in through the console's login form and waits for the signed-in shell.
func (b *Browser) Login(user, password string) {
	b.t.Helper()
	b.Go("/#/login")
	b.WaitVisible("#login-user")
	b.Fill("#login-user", user)
	b.Fill("#login-pass", password)
	b.Click(".login-form button[type=submit]")
	b.WaitJS(`!document.getElementById("user").hidden && !!document.getElementById("page-title")`, "the signed-in console")
}
