package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

func init() {
	register(&command{name: "demo", summary: "try vmvault with no configuration: a lab vCenter with sample VMs, a repository, a job, the console (--listen, --state, --vms)", run: runDemo})
}

// Names the demo gives what it creates. The job id is stable so a demo
// restarted on its --state directory finds its job again.
const (
	demoRepoName     = "demo"
	demoJobID        = "demo-vms"
	demoVCPassEnv    = "VMVAULT_DEMO_VCENTER_PASSWORD" // only ever seen by serve, through the demo's own getenv
	demoPassFile     = "repository-passphrase"
	demoAdminPwFile  = "admin-password"
	demoTagCategory  = "Environment"
	demoTag          = "production"
	demoChurnDefault = 30 * time.Second
)

// demoHooks, set by tests, see the lab once the sample VMs exist, and again
// after the daemon stopped, before the lab closes.
var demoHooks struct {
	started func(l *lab.Lab, samples []lab.Sample)
	stopped func(l *lab.Lab)
}

type demoOptions struct {
	listen   string
	stateDir string // "" = a temporary directory removed on exit
	vms      int
	churn    time.Duration // 0 disables
	diskSize int64
}

func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "demo")
	o := demoOptions{}
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address of the API and console (plain HTTP, loopback only; port 0 picks a free port)")
	fs.StringVar(&o.stateDir, "state", "", "keep the demo's repository and database in `DIR` (default: a temporary directory removed on exit)")
	fs.IntVar(&o.vms, "vms", 3, "number of sample VMs (web-01, db-01, files-01, then app-01 on GPT+LVM+XFS and win-01 on GPT+NTFS, which need root, web-02, ...)")
	fs.DurationVar(&o.churn, "churn", demoChurnDefault, "how often each sample VM writes a little data (0 disables)")
	diskMiB := fs.Int("disk-mib", 64, "size of each sample VM's disk in MiB")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, pos)
	}
	if o.vms < 1 || o.vms > 50 {
		return fmt.Errorf("%w: --vms %d: want 1 to 50", errUsage, o.vms)
	}
	if *diskMiB < 8 || *diskMiB > 4096 {
		return fmt.Errorf("%w: --disk-mib %d: want 8 to 4096", errUsage, *diskMiB)
	}
	if o.churn < 0 {
		return fmt.Errorf("%w: --churn must not be negative", errUsage)
	}
	o.diskSize = int64(*diskMiB) << 20
	if err := checkDemoListen(o.listen); err != nil {
		return err
	}
	err = demo(ctx, env, o)
	if err != nil && ctx.Err() != nil {
		// Interrupted while starting: what failed was cut short on purpose.
		return nil
	}
	return err
}

// checkDemoListen refuses anything but a loopback address: the demo serves
// plain HTTP and has a password printed on the terminal.
func checkDemoListen(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("%w: --listen %q: want host:port (%v)", errUsage, listen, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("%w: --listen %s: the demo serves plain HTTP without TLS, so only on a loopback address (127.0.0.1, ::1, localhost); "+
		"to serve other machines, run `appliance serve` with TLS", errUsage, listen)
}

func randomSecret() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// secretFile returns the secret stored in path, creating it (0600) with a
// random one on first use.
func secretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	s := randomSecret()
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", err
	}
	return s, nil
}

// demo runs the lab, prepares a repository and the daemon's state, starts
// serve() on them, creates the demo job and runs it, then keeps the sample
// VMs writing until ctx ends.
func demo(ctx context.Context, env *cliEnv, o demoOptions) (err error) {
	stateDir := o.stateDir
	if stateDir == "" {
		stateDir, err = os.MkdirTemp("", "vmvault-demo-")
		if err != nil {
			return fmt.Errorf("temporary state directory: %w", err)
		}
		defer os.RemoveAll(stateDir)
	} else {
		if stateDir, err = filepath.Abs(stateDir); err != nil {
			return err
		}
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
	}

	// The lab: a vCenter simulator with the sample VMs (the default VPX
	// model's four VMs stay, unprotected, with small empty disks).
	l, samples, err := lab.StartDemo(ctx, lab.DemoOptions{Dir: filepath.Join(stateDir, "lab"), VMs: o.vms, DiskSize: o.diskSize,
		Password: randomSecret(), TagCategory: demoTagCategory, Tag: demoTag, Started: demoHooks.started})
	if err != nil {
		return err
	}
	defer l.Close()
	dlog := newLogger(env, "info")
	for _, s := range samples {
		dlog.Info("demo: sample VM", "vm", s.Name, "fs", s.FS, "files", s.Files, "bytes", s.Bytes, "disk", o.diskSize)
	}

	repoDir := filepath.Join(stateDir, "repository")
	passFile := filepath.Join(stateDir, demoPassFile)
	if err := demoRepository(ctx, repoDir, passFile); err != nil {
		return err
	}
	repoPass, err := secretFile(passFile)
	if err != nil {
		return fmt.Errorf("repository passphrase: %w", err)
	}

	// The administrator's password: $VMVAULT_ADMIN_PASSWORD (serve reads it
	// when no file is named), else one generated and kept in the state
	// directory so a restarted demo prints the same login.
	adminPw := env.getenv("VMVAULT_ADMIN_PASSWORD")
	adminFile := ""
	if adminPw == "" {
		adminFile = filepath.Join(stateDir, demoAdminPwFile)
		if adminPw, err = secretFile(adminFile); err != nil {
			return fmt.Errorf("administrator password: %w", err)
		}
	}

	cfg := &serveConfig{
		Listen:   o.listen,
		TLS:      tlsConfig{Disable: true},
		StateDir: filepath.Join(stateDir, "state"),
		TimeZone: "UTC",
		Admin:    adminConfig{PasswordFile: adminFile},
		VCenter: &vcenterConfig{URL: l.URL().String(), Username: l.Username(), PasswordEnv: demoVCPassEnv,
			Thumbprint: l.Thumbprint()},
		Repositories: []repoConfig{{Name: demoRepoName, Path: repoDir, PassphraseFile: passFile}},
		Maintenance:  maintenanceCfg{Window: &policy.Window{Days: everyDay(policy.Range{Start: 3 * 60, End: 5 * 60}), Location: time.UTC}},
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	ready := make(chan string, 1)
	cfg.OnReady = func(addr string) { ready <- addr }
	senv := &cliEnv{stdout: env.stdout, stderr: env.stderr, getenv: func(k string) string {
		if k == demoVCPassEnv {
			return l.Password()
		}
		return env.getenv(k)
	}}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- serve(sctx, senv, cfg) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		return err
	}
	var churn sync.WaitGroup
	defer churn.Wait() // before the lab closes (deferred earlier)
	if err := demoSetup(sctx, addr, cfg.Admin.User, adminPw, samples); err != nil {
		stop()
		<-served
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	fmt.Fprintf(env.stdout, "console: http://%s/\n", addr)
	fmt.Fprintf(env.stdout, "login: %s / %s\n", cfg.Admin.User, adminPw)
	// The repository is a real one: the command-line tools open it with its
	// passphrase (once the demo has stopped, or with --retry-lock).
	fmt.Fprintf(env.stdout, "repository: %s\n", repoDir)
	fmt.Fprintf(env.stdout, "repository passphrase: %s (in %s; export VMVAULT_PASSWORD or give --password-file)\n", repoPass, passFile)
	fmt.Fprintf(env.stdout, "state: %s\n", stateDir)
	if o.churn > 0 {
		churn.Add(1)
		go func() {
			defer churn.Done()
			l.ChurnEvery(sctx, samples, o.churn, newLogger(env, cfg.LogLevel))
		}()
	}
	err = <-served
	stop()
	churn.Wait()
	if demoHooks.stopped != nil {
		demoHooks.stopped(l)
	}
	return err
}

func everyDay(r policy.Range) [7][]policy.Range {
	var d [7][]policy.Range
	for i := range d {
		d[i] = []policy.Range{r}
	}
	return d
}

// demoRepository creates the demo's encrypted repository with a generated
// passphrase (0600 file next to it), or checks the one a previous run made.
func demoRepository(ctx context.Context, repoDir, passFile string) error {
	_, statErr := os.Stat(filepath.Join(repoDir, "config"))
	if statErr == nil {
		if _, err := os.Stat(passFile); err != nil {
			return fmt.Errorf("repository %s exists but its passphrase file is missing: %w", repoDir, err)
		}
		return nil
	}
	pass, err := secretFile(passFile)
	if err != nil {
		return fmt.Errorf("repository passphrase: %w", err)
	}
	p, err := dedup.DefaultParams()
	if err != nil {
		return err
	}
	if err := repository.Init(ctx, repoDir, []byte(pass), repository.InitOptions{Chunker: chunkerConfig(p), KDF: repository.DefaultKDF}); err != nil {
		return fmt.Errorf("init demo repository: %w", err)
	}
	return nil
}

// demoAPI is the demo's own API session (the same API the console uses).
type demoAPI struct {
	base string
	hc   *http.Client
	csrf string
}

func (a *demoAPI) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.csrf != "" {
		req.Header.Set("X-CSRF-Token", a.csrf)
	}
	res, err := a.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return res.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if res.StatusCode >= 300 {
		return res.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, res.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return res.StatusCode, nil
}

// demoSetup logs in to the daemon's API, creates the demo job when it does
// not exist yet and runs it now, so the console opens with a backup under way.
func demoSetup(ctx context.Context, addr, user, password string, samples []lab.Sample) error {
	jar, _ := cookiejar.New(nil)
	a := &demoAPI{base: "http://" + addr, hc: &http.Client{Jar: jar, Timeout: time.Minute}}
	var login struct {
		CSRFToken string `json:"csrfToken"`
	}
	if code, err := a.call(ctx, "POST", "/api/v1/auth/login", map[string]string{"username": user, "password": password}, &login); err != nil {
		if code == http.StatusUnauthorized {
			return fmt.Errorf("log in as %s: the state directory keeps another administrator password (unset VMVAULT_ADMIN_PASSWORD or use a new --state): %w", user, err)
		}
		return fmt.Errorf("log in to the demo's API: %w", err)
	}
	a.csrf = login.CSRFToken
	defer a.call(context.WithoutCancel(ctx), "POST", "/api/v1/auth/logout", nil, nil) //nolint:errcheck // best effort

	code, err := a.call(ctx, "GET", "/api/v1/jobs/"+demoJobID, nil, nil)
	if code == http.StatusNotFound {
		uuids := make([]string, 0, len(samples))
		for _, s := range samples {
			uuids = append(uuids, s.InstanceUUID)
		}
		days := map[string][]string{}
		for d := time.Sunday; d <= time.Saturday; d++ {
			days[strings.ToLower(d.String())] = []string{"00:00-24:00"}
		}
		job := map[string]any{
			"id": demoJobID, "name": "Demo VMs", "enabled": true, "repository": demoRepoName,
			"description": "Backs up the demo's sample VMs every day; the window is open around the clock.",
			"selection":   map[string]any{"vms": uuids},
			"window":      map[string]any{"location": "UTC", "days": days},
			"retention":   map[string]any{"last": 3, "daily": 7, "weekly": 4},
			"quiesce":     string(policy.QuiesceFileSystem), // falls back to crash-consistent
			"concurrency": 2,
		}
		if _, err := a.call(ctx, "POST", "/api/v1/jobs", job, nil); err != nil {
			return fmt.Errorf("create the demo job: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("read the demo job: %w", err)
	}
	// The window is open, so the scheduler may have started the job
	// already: a conflict is fine.
	if code, err := a.call(ctx, "POST", "/api/v1/jobs/"+demoJobID+"/run", nil, nil); err != nil && code != http.StatusConflict {
		return fmt.Errorf("run the demo job: %w", err)
	}
	return nil
}
