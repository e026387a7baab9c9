package console

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoServer is the `appliance demo` every test in this package uses.
type demoServer struct {
	URL      string // http://127.0.0.1:port (no trailing slash)
	User     string
	Password string
	State    string
	log      *os.File

	// A session opened once for the tests that do not test logging in:
	// logins are rate-limited (per address and per user).
	session, csrf string
	// Administrators of their own for the login tests, so that their
	// attempts do not use up the demo administrator's login budget.
	KeyboardUser, KeyboardPassword string
	LoginUser, LoginPassword       string
}

var demo demoServer

// TestMain builds the appliance, starts `appliance demo` on a free port and
// stops it after the tests.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "vmvault-console-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "console tests:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	stop, err := startDemo(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "console tests: start appliance demo:", err)
		if demo.log != nil {
			if b, rerr := os.ReadFile(demo.log.Name()); rerr == nil {
				fmt.Fprintf(os.Stderr, "demo log:\n%s\n", tail(string(b), 4000))
			}
		}
		return 1
	}
	if err := openSession(); err != nil {
		fmt.Fprintln(os.Stderr, "console tests:", err)
		stop()
		return 1
	}
	code := m.Run()
	stop()
	if code != 0 {
		if b, err := os.ReadFile(demo.log.Name()); err == nil {
			fmt.Fprintf(os.Stderr, "appliance demo log (end):\n%s\n", tail(string(b), 4000))
		}
	}
	return code
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

func startDemo(tmp string) (stop func(), err error) {
	return startDemoAt(tmp, &demo, filepath.Join(tmp, "state"))
}

// applianceBin is the appliance binary TestMain built (or
// $VMVAULT_APPLIANCE_BIN), for the tests that start a demo of their own.
var applianceBin string

// startDemoAt starts `appliance demo --state state` into d, its log and
// binary (when none was built yet) in tmp.
func startDemoAt(tmp string, d *demoServer, state string, extra ...string) (stop func(), err error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	// VMVAULT_APPLIANCE_BIN runs a binary built beforehand (while iterating
	// on the console, whose files are embedded: rebuild it after each change).
	bin := os.Getenv("VMVAULT_APPLIANCE_BIN")
	if bin == "" {
		bin = applianceBin
	}
	if bin == "" {
		bin = filepath.Join(tmp, "appliance")
		build := exec.Command("go", "build", "-o", bin, "./cmd/appliance")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/appliance: %v\n%s", err, out)
		}
		applianceBin = bin
	}
	pw := make([]byte, 12)
	if _, err := rand.Read(pw); err != nil {
		return nil, err
	}
	d.Password = "console-" + hex.EncodeToString(pw)
	d.State = state
	logf, err := os.Create(filepath.Join(tmp, "d.log"))
	if err != nil {
		return nil, err
	}
	d.log = logf
	cmd := exec.Command(bin, append([]string{"demo", "--listen", "127.0.0.1:0", "--state", d.State}, extra...)...)
	cmd.Env = append(os.Environ(), "VMVAULT_ADMIN_PASSWORD="+d.Password)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logf, "stdout:", sc.Text())
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for d.URL == "" || d.User == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				stop()
				return nil, fmt.Errorf("appliance demo ended before printing its console URL and login")
			}
			if u, ok := strings.CutPrefix(l, "console: "); ok {
				d.URL = strings.TrimRight(strings.TrimSpace(u), "/")
			}
			if lg, ok := strings.CutPrefix(l, "login: "); ok {
				user, pass, _ := strings.Cut(lg, " / ")
				d.User = strings.TrimSpace(user)
				if p := strings.TrimSpace(pass); p != "" && p != d.Password {
					d.Password = p
				}
			}
		case <-ctx.Done():
			stop()
			return nil, fmt.Errorf("appliance demo printed no console URL within 120 s")
		}
	}
	// Keep draining stdout so the demo never blocks on a full pipe.
	go func() {
		for range lines {
		}
	}()
	return stop, nil
}

// openSession logs in once over HTTP and creates the keyboard test's user.
func openSession() error {
	if err := demo.login(); err != nil {
		return err
	}
	demo.KeyboardUser, demo.KeyboardPassword = "keyboard-admin", demo.Password+"-kbd"
	demo.LoginUser, demo.LoginPassword = "login-admin", demo.Password+"-login"
	if err := createUser(demo.KeyboardUser, demo.KeyboardPassword, "administrator"); err != nil {
		return err
	}
	return createUser(demo.LoginUser, demo.LoginPassword, "administrator")
}

// login opens d's session over HTTP.
func (d *demoServer) login() error {
	demo := d
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, demo.User, demo.Password)
	res, err := http.Post(demo.URL+"/api/v1/auth/login", "application/json", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("login as %s: status %s", demo.User, res.Status)
	}
	for _, c := range res.Cookies() {
		switch c.Name {
		case "vmvault_session":
			demo.session = c.Value
		case "vmvault_csrf":
			demo.csrf = c.Value
		}
	}
	if demo.session == "" || demo.csrf == "" {
		return fmt.Errorf("login set no session and CSRF cookies")
	}
	return nil
}

// createUser adds a local user through the API with TestMain's session.
func createUser(name, password, role string) error {
	user := fmt.Sprintf(`{"username":%q,"password":%q,"role":%q}`, name, password, role)
	req, err := http.NewRequest("POST", demo.URL+"/api/v1/users", bytes.NewReader([]byte(user)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", demo.csrf)
	req.AddCookie(&http.Cookie{Name: "vmvault_session", Value: demo.session})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("create user %s: %w", name, err)
	}
	msg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		return fmt.Errorf("create user %s: %s %s", name, res.Status, msg)
	}
	return nil
}
