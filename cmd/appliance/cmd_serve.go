package main

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/inventory"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/records"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/reposvc"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/settings"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/web"
)

func init() {
	register(&command{name: "serve", summary: "run the appliance daemon: REST API, repositories, scheduler (--config FILE)", run: runServe})
}

// serveReady, when set (tests), is called with the listening address once
// the daemon accepts connections.
var serveReady func(addr string)

// shutdownGrace bounds how long running requests and tasks may take to end
// after SIGTERM.
const shutdownGrace = 30 * time.Second

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (required)")
	var opts serveOptions
	fs.StringVar(&opts.restoreState, "restore-state", "", "before starting, install this copy of state.db (a path, or \"newest\": the newest copy that verifies); the file it replaces is kept as state.db.replaced-TIME")
	fs.IntVar(&opts.stateBackups, "state-backups", state.DefaultKeep, "verified copies of state.db to keep in STATE_DIR/state.db.backups")
	fs.DurationVar(&opts.stateBackupEvery, "state-backup-every", state.DefaultEvery, "interval between copies of state.db (one is also taken at every start)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		return fmt.Errorf("%w: --config is required", errUsage)
	}
	if opts.stateBackups < 1 || opts.stateBackupEvery < time.Minute {
		return fmt.Errorf("%w: --state-backups must be at least 1 and --state-backup-every at least 1m", errUsage)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	return serveWith(ctx, env, cfg, opts)
}

// serveOptions are the daemon's command-line settings beside its
// configuration file (they concern one start, or the state directory).
type serveOptions struct {
	restoreState     string        // a copy of state.db to install first ("newest": the newest good one)
	stateBackups     int           // copies kept; 0: state.DefaultKeep
	stateBackupEvery time.Duration // 0: state.DefaultEvery
}

func newLogger(env *cliEnv, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: l}))
}

// daemon holds what serve opened, to close it in reverse order.
type daemon struct {
	closers []func() error
	log     *slog.Logger
}

func (d *daemon) onClose(name string, f func() error) {
	d.closers = append(d.closers, func() error {
		if err := f(); err != nil {
			d.log.Error("close", "what", name, "err", err)
			return err
		}
		return nil
	})
}

func (d *daemon) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		_ = d.closers[i]()
	}
}

func serve(ctx context.Context, env *cliEnv, cfg *serveConfig) error {
	return serveWith(ctx, env, cfg, serveOptions{})
}

func serveWith(ctx context.Context, env *cliEnv, cfg *serveConfig, opts serveOptions) error {
	log := newLogger(env, cfg.LogLevel)
	d := &daemon{log: log}
	defer d.close()
	loc, _ := time.LoadLocation(cfg.TimeZone) // validated
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	clk := clock.Real()
	dbPath := filepath.Join(cfg.StateDir, "state.db")
	if opts.restoreState != "" {
		if err := restoreStateCopy(dbPath, opts.restoreState, clk.Now(), log); err != nil {
			return err
		}
	}
	db, err := state.Open(dbPath)
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return fmt.Errorf("%w: another daemon is running on state directory %s", err, cfg.StateDir)
		}
		var ce *state.CorruptError
		if errors.As(err, &ce) && ce.Newest != nil {
			return fmt.Errorf("%w\nto start from that copy, run the same command with --restore-state newest (the file it replaces is kept, not deleted); `appliance state backups` lists the copies", err)
		}
		return err
	}
	d.onClose("state db", db.Close)
	// state.db cannot be rebuilt: a verified copy at every start, then one
	// every interval (KeepCopies below), the newest few kept.
	keep := cmp.Or(opts.stateBackups, state.DefaultKeep)
	copyDone := func(c state.Copy, removed []string, err error) {
		if err != nil {
			log.Error("state database copy failed", "dir", state.CopiesDir(dbPath), "err", err)
			return
		}
		log.Info("state database copied", "copy", c.Path, "bytes", c.Size, "pruned", len(removed))
	}
	c, removed, err := db.RotateCopy(state.CopiesDir(dbPath), clk.Now(), keep)
	copyDone(c, removed, err)
	// Sessions, tokens, tasks and settings share the state database.
	wdb := db.Bolt()

	repos := map[string]*repository.Repository{}
	for _, rc := range cfg.Repositories {
		pass, err := readSecret(env, rc.PassphraseFile, rc.PassphraseEnv, "passphrase of repository "+rc.Name)
		if err != nil {
			return err
		}
		var pw []byte
		if pass != "" {
			pw = []byte(pass)
		}
		r, err := repository.Open(ctx, rc.Path, pw, repository.OpenOptions{Holder: "daemon (appliance serve)", Logger: log.With("repository", rc.Name)})
		if err != nil {
			if errors.Is(err, repository.ErrLocked) {
				return fmt.Errorf("repository %s is in use by another daemon or command: %w", rc.Name, err)
			}
			// err names the path and says "open repository".
			return fmt.Errorf("repository %s: %w", rc.Name, err)
		}
		d.onClose("repository "+rc.Name, r.Close)
		repos[rc.Name] = r
		log.Info("repository opened", "name", rc.Name, "path", rc.Path, "encrypted", r.Config().Encrypted)
	}
	rs := reposvc.New(repos)
	rs.Maintenance = db.Maintenance

	authStore, err := auth.NewBoltStore(wdb)
	if err != nil {
		return err
	}
	acfg := auth.Config{Clock: clk, Store: authStore, AdminUser: cfg.Admin.User}
	if cfg.Sessions.TTL != "" {
		acfg.SessionTTL, _ = time.ParseDuration(cfg.Sessions.TTL) // validated
	}
	var inv policy.Inventory
	var runner *backupRunner
	var restorer *restoreService
	var targets *serveTargets   // console's inventory, restore targets, vCenter test
	var tagSrc *tagCache        // GET /tags
	var vclient *vsphere.Client // nil without vCenter
	started := clk.Now()        // snapshots of ours older than this are stale
	if vc := cfg.VCenter; vc != nil {
		pw, err := readSecret(env, vc.PasswordFile, vc.PasswordEnv, "vCenter password")
		if err != nil {
			return err
		}
		vcfg := vsphere.Config{URL: vc.URL, Username: vc.Username, Password: pw, Thumbprint: vc.Thumbprint, CAFile: vc.CAFile, Insecure: vc.Insecure}
		vcenterAuth(&acfg, vc, vcfg)
		client, err := vsphere.Connect(ctx, vcfg)
		if err != nil {
			return fmt.Errorf("connect to vCenter %s: %w", vc.URL, err)
		}
		d.onClose("vCenter session", func() error { return client.Close(context.Background()) })
		vclient = client
		inv = inventory.New(client)
		runner = newBackupRunner(client, repos, rs.Names(), inv)
		restorer = &restoreService{client: client, rs: rs, inv: inv}
		targets = newServeTargets(client, vcfg)
		tagSrc = newTagCache(inventory.New(client))
		log.Info("vCenter connected", "url", vc.URL, "about", client.About())
	}
	am, err := auth.NewManager(acfg)
	if err != nil {
		return err
	}
	adminPw, err := readSecret(env, cfg.Admin.PasswordFile, "", "administrator password")
	if err != nil {
		return err
	}
	if adminPw == "" {
		adminPw = env.getenv("VMVAULT_ADMIN_PASSWORD")
	}
	generated, err := am.EnsureAdmin(ctx, adminPw)
	if err != nil {
		return err
	}
	if generated != "" {
		// Printed once, on stdout only, never logged.
		fmt.Fprintf(env.stdout, "administrator %q password (shown once, change it after logging in): %s\n", cfg.Admin.User, generated)
	}

	taskStore, err := task.NewBoltStore(wdb)
	if err != nil {
		return err
	}
	maxTasks := cfg.Limits.MaxRunningTasks
	if maxTasks == 0 {
		maxTasks = 2
	}
	tasks := task.New(task.Config{Clock: clk, Store: taskStore, MaxRunning: maxTasks, Logf: func(f string, a ...any) { log.Error(fmt.Sprintf(f, a...)) }})
	if n, err := tasks.Recover(ctx); err != nil {
		return err
	} else if n > 0 {
		log.Warn("tasks interrupted by the previous stop were marked failed", "count", n)
	}
	settings, err := settings.NewBolt(wdb)
	if err != nil {
		return err
	}
	rec := records.New(db) // jobs, runs, events and VM states as the API reads them
	wcfg := web.Config{
		Clock: clk, Logger: log, Auth: am, Tasks: tasks, Jobs: rec, Inventory: inv,
		Points: rs, Repositories: rs, KnownRepository: rs.Has, Events: rec, VMStates: rec, Settings: settings,
		DefaultSettings: web.Settings{TimeZone: loc.String(), EventRetentionDays: 90},
		TrustProxy:      cfg.API.TrustProxy,
	}
	targets.wire(&wcfg)
	if wcfg.Files, err = startFileRestore(ctx, cfg.StateDir, rs, log, d); err != nil {
		return err
	}
	if tagSrc != nil {
		wcfg.Tags = tagSrc
	}
	// Without vCenter there is nothing to back up or restore to: jobs are
	// stored and validated, the scheduler does not run (run now answers 503)
	// and POST /backups and /restores answer 501.
	var sched *policy.Scheduler
	var observe func(policy.Event)
	if restorer != nil {
		wcfg.Restores = restorer
	}
	if runner != nil {
		wcfg.Backups = runner
		pcfg := policy.Config{
			Clock: clk, Store: db, Runner: runner, Inventory: inv,
			MaxConcurrent: cfg.Limits.MaxConcurrentBackups, Location: loc,
			OnEvent: func(e policy.Event) {
				if observe != nil {
					observe(e)
				}
			},
			Logf: func(f string, a ...any) { log.Error("scheduler: " + fmt.Sprintf(f, a...)) },
		}
		if w := cfg.Maintenance.Window; w != nil {
			pcfg.Maintainer = reposvc.Maintainer{Set: rs}
			pcfg.MaintenanceWindow = *w
			pcfg.FullCheckInterval = time.Duration(cfg.Maintenance.FullCheckDays) * 24 * time.Hour
		}
		sched, err = policy.New(pcfg)
		if err != nil {
			return err
		}
		wcfg.Scheduler = sched
	}
	nt, err := startNotifier(env, cfg, d, log, clk, loc, db, rs, inv, &wcfg)
	if err != nil {
		return err
	}
	srv, err := web.New(wcfg)
	if err != nil {
		return err
	}
	observe = notifyObserve(nt, srv.ObserveEvent)
	if runner != nil {
		runner.observe = srv.ObserveBackup
	}
	schedDone := make(chan error, 1)
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	// The sweep finishes before the scheduler starts, so none of this
	// process's own snapshots exists yet while it runs.
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if vclient == nil {
			return
		}
		emit := func(e policy.Event) {
			e.Time = clk.Now()
			if err := db.AddEvent(context.Background(), e); err != nil {
				log.Error("record event", "err", err)
			}
			if observe != nil {
				observe(e)
			}
		}
		if n, err := sweepStaleSnapshots(schedCtx, vclient, started, log, emit); err != nil && schedCtx.Err() == nil {
			log.Warn("start-up snapshot sweep", "err", err)
		} else if n > 0 {
			log.Info("start-up snapshot sweep", "removed", n)
		}
	}()
	if sched != nil {
		go func() {
			<-sweepDone
			schedDone <- sched.Run(schedCtx)
		}()
	} else {
		schedDone <- nil
	}
	pruneDone := make(chan struct{})
	go func() {
		defer close(pruneDone)
		pruneEvents(schedCtx, db, settings, clk, log)
	}()
	copiesDone := make(chan struct{})
	go func() {
		defer close(copiesDone)
		db.KeepCopies(schedCtx, state.CopyOptions{Keep: keep, Every: opts.stateBackupEvery, Clock: clk, Done: copyDone})
	}()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	scheme := "http"
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if !cfg.TLS.Disable {
		certFile, keyFile := cfg.TLS.CertFile, cfg.TLS.KeyFile
		if certFile == "" {
			certFile, keyFile, err = selfSigned(filepath.Join(cfg.StateDir, "tls"), cfg.Listen, log)
			if err != nil {
				ln.Close()
				return err
			}
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			ln.Close()
			return fmt.Errorf("TLS certificate: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}
	addr := ln.Addr().String()
	log.Info("serving", "url", scheme+"://"+addr, "api", scheme+"://"+addr+"/api/v1")
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if serveReady != nil {
		serveReady(addr)
	}
	if cfg.onReady != nil {
		cfg.onReady(addr)
	}
	select {
	case err := <-errc:
		stopSched()
		<-pruneDone
		<-copiesDone
		<-sweepDone
		<-schedDone
		_ = tasks.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Stop accepting requests (SSE streams end as their contexts are
	// cancelled), then cancel running tasks and wait for them.
	go func() {
		<-sctx.Done()
		_ = hs.Close()
	}()
	// The scheduler cancels its running backups (they remove their
	// snapshots) and records them as interrupted before it returns.
	stopSched()
	<-pruneDone
	<-copiesDone
	<-sweepDone
	select {
	case <-schedDone:
	case <-sctx.Done():
		log.Error("scheduler did not stop in time")
	}
	if err := tasks.Close(sctx); err != nil {
		log.Error("tasks did not end in time", "err", err)
	}
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	<-errc
	log.Info("stopped")
	return nil
}

// pruneEvents deletes events older than the settings' retention, at start
// and then every hour, until ctx ends.
func pruneEvents(ctx context.Context, db *state.DB, settings web.SettingsStore, clk clock.Clock, log *slog.Logger) {
	for {
		days := 90
		if st, ok, err := settings.Settings(ctx); err == nil && ok && st.EventRetentionDays > 0 {
			days = st.EventRetentionDays
		}
		before := clk.Now().AddDate(0, 0, -days)
		for {
			n, err := db.PruneEvents(ctx, before)
			if err != nil {
				if ctx.Err() == nil {
					log.Error("prune events", "err", err)
				}
				break
			}
			if n > 0 {
				log.Debug("pruned events", "count", n, "before", before)
			}
			if n < 10000 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(time.Hour):
		}
	}
}

// selfSigned returns a certificate and key in dir, generating a self-signed
// ECDSA P-256 pair (valid ten years, for the host's names and addresses) on
// first start.
func selfSigned(dir, listen string, log *slog.Logger) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("TLS directory: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "vmvault appliance", Organization: []string{"vmvault"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	if h, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("create certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return "", "", fmt.Errorf("write TLS key: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", fmt.Errorf("write TLS certificate: %w", err)
	}
	log.Info("generated a self-signed TLS certificate", "cert", certFile)
	return certFile, keyFile, nil
}

// backupRunner runs backups for the scheduler (policy.Runner) and the API
// (web.Backups) with one backup engine per repository, all reading from the
// daemon's vCenter session.
type backupRunner struct {
	// observe, when set, receives each successful backup's figures (metrics).
	observe func(read, newBytes, stored int64, d time.Duration)
	engines map[string]*backup.Engine
	first   string
	inv     policy.Inventory
}

func newBackupRunner(client *vsphere.Client, repos map[string]*repository.Repository, names []string, inv policy.Inventory) *backupRunner {
	br := &backupRunner{engines: map[string]*backup.Engine{}, inv: inv}
	src := backup.FromClient(client, vsphere.ReaderOptions{})
	for _, n := range names {
		br.engines[n] = backup.NewEngine(src, backup.RepoStore(repos[n]), backup.EngineOptions{VCenter: client.Host()})
	}
	if len(names) > 0 {
		br.first = names[0]
	}
	return br
}

func quiesceFor(m policy.QuiesceMode, required bool) backup.QuiesceMode {
	if m == policy.QuiesceNone {
		return backup.QuiesceOff
	}
	if required {
		// The job would rather miss the backup than keep a crash-consistent one.
		return backup.QuiesceRequire
	}
	// File-system and application quiescing fall back to a crash-consistent
	// point with a warning rather than missing the backup.
	return backup.QuiescePrefer
}

func (b *backupRunner) backupOne(ctx context.Context, repo, job string, vm policy.VM, q backup.QuiesceMode, requireAllDisks bool, progress func(backup.VMProgress)) (backup.Result, error) {
	e, ok := b.engines[repo]
	if !ok {
		return backup.Result{}, fmt.Errorf("repository %q: %w", repo, web.ErrNotFound)
	}
	target := vm.MoRef
	if target == "" {
		target = vm.Name
	}
	tags := map[string]string{}
	if job != "" {
		tags[reposvc.JobTag] = job
	}
	res, err := e.BackupVM(ctx, backup.Request{VM: target, Quiesce: q, Progress: progress, Tags: tags, RequireAllDisks: requireAllDisks})
	if err == nil && b.observe != nil {
		b.observe(res.BytesRead, res.NewBytes, res.StoredBytes, res.Duration)
	}
	return res, err
}

// RunBackup implements policy.Runner.
func (b *backupRunner) RunBackup(ctx context.Context, job policy.Job, vm policy.VM, progress func(policy.Progress)) (policy.BackupResult, error) {
	res, err := b.backupOne(ctx, job.Repository, job.ID, vm, quiesceFor(job.Quiesce, job.QuiesceRequired), job.RequireAllDisks, func(p backup.VMProgress) {
		progress(policy.Progress{Phase: p.Phase, BytesDone: p.Done, BytesTotal: p.Size})
	})
	if err != nil {
		return policy.BackupResult{}, err
	}
	return policy.BackupResult{PointID: res.RestorePoint, Bytes: res.BytesRead, Stored: res.StoredBytes}, nil
}

// web.BackupOutcome is one VM's result of POST /backups.
// Backup implements web.Backups: the VMs one after another, each failure
// recorded and the task failed if any VM failed.
func (b *backupRunner) Backup(ctx context.Context, req web.BackupRequest, rep web.Reporter) ([]web.BackupOutcome, error) {
	repo := req.Repository
	if repo == "" {
		repo = b.first
	}
	all, err := b.inv.VMs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list inventory: %w", err)
	}
	byUUID := map[string]policy.VM{}
	for _, v := range all {
		byUUID[v.InstanceUUID] = v
	}
	var outs []web.BackupOutcome
	failed := 0
	for i, id := range req.VMs {
		o := web.BackupOutcome{VM: id}
		vm, ok := byUUID[id]
		if !ok {
			o.Error = "not in the inventory"
			failed++
			outs = append(outs, o)
			rep.Logf("%s: not in the inventory", id)
			continue
		}
		o.Name = vm.Name
		rep.Logf("backing up %s (%d of %d) to %s", vm.Name, i+1, len(req.VMs), repo)
		res, err := b.backupOne(ctx, repo, req.Job, vm, backup.QuiescePrefer, false, func(p backup.VMProgress) {
			rep.Progress(vm.Name+": "+p.Phase, p.Done, p.Size)
		})
		if err != nil {
			if ctx.Err() != nil {
				return outs, err
			}
			o.Error = err.Error()
			failed++
			rep.Logf("%s failed: %v", vm.Name, err)
		} else {
			o.RestorePoint, o.Mode, o.BytesRead, o.NewBytes = res.RestorePoint, res.Mode, res.BytesRead, res.NewBytes
			o.Warnings = res.Warnings
			for _, w := range res.Warnings {
				// At warning level where the reporter has levels (the task
				// log colours and counts them).
				if lr, ok := rep.(interface{ Log(level, msg string) }); ok {
					lr.Log("warning", fmt.Sprintf("%s: %s", vm.Name, w))
				} else {
					rep.Logf("%s: warning: %s", vm.Name, w)
				}
			}
			rep.Logf("%s: restore point %s (%s)", vm.Name, res.RestorePoint, res.Mode)
		}
		outs = append(outs, o)
	}
	if failed > 0 {
		return outs, fmt.Errorf("%d of %d VMs failed", failed, len(req.VMs))
	}
	return outs, nil
}

// restoreService implements web.Restores with the restore engine over the
// repository that holds the point and the daemon's vCenter session.
type restoreService struct {
	client *vsphere.Client
	rs     *reposvc.Set
	inv    policy.Inventory
}

func (s *restoreService) engine(ctx context.Context, point string) (*restore.Engine, string, repository.Point, error) {
	name, p, err := s.rs.Locate(ctx, point)
	if err != nil {
		return nil, "", p, err
	}
	r, err := s.rs.Repo(name)
	if err != nil {
		return nil, "", p, err
	}
	return restore.New(r, s.client, restore.Options{}), name, p, nil
}

func restoreProgress(rep web.Reporter) func(restore.Progress) {
	return func(p restore.Progress) {
		phase := p.Phase
		if phase == "disk" {
			phase = fmt.Sprintf("disk %d", p.Disk)
		}
		rep.Progress(phase, p.Done, p.Size)
	}
}

// Restore implements web.Restores.
func (s *restoreService) Restore(ctx context.Context, req web.RestoreRequest, rep web.Reporter) (*web.RestoreResult, error) {
	e, repo, p, err := s.engine(ctx, req.Point)
	if err != nil {
		return nil, err
	}
	rep.Logf("restoring %s from %s (point %s, %s) as %s", p.VM.Name, repo, p.ID, p.Time.Format(time.RFC3339), req.Mode)
	res, err := e.RestoreVM(ctx, restore.VMRequest{
		RestorePoint: p.ID, Name: req.Name, Datacenter: req.Datacenter, Folder: req.Folder,
		Host: req.Host, Cluster: req.Cluster, ResourcePool: req.ResourcePool, Datastore: req.Datastore,
		NetworkMap: req.Networks, Thin: req.Thin, PowerOn: req.PowerOn,
		Overwrite: req.Mode == "original", PowerOff: req.PowerOff, Rehearsal: req.Mode == "rehearsal",
		Progress: restoreProgress(rep),
	})
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		rep.Logf("warning: %s", w)
	}
	rep.Logf("restored as %s (%s)", res.VM.Name, res.VM.MoRef)
	return restoreResultDTO(res), nil
}

// restoreResultDTO is the engine's result as the API documents it.
func restoreResultDTO(r restore.Result) *web.RestoreResult {
	out := &web.RestoreResult{Mode: r.Mode, RestorePoint: r.RestorePoint,
		VM:        web.VMRef{Name: r.VM.Name, InstanceUUID: r.VM.InstanceUUID, MoRef: r.VM.MoRef},
		PoweredOn: r.PoweredOn, Disks: []web.RestoredDisk{}, BytesWritten: r.BytesWritten, Seconds: r.Seconds,
		BytesPerSecond: r.BytesPerSec, Warnings: r.Warnings, RemoveCommand: r.RemoveCommand}
	for _, d := range r.Disks {
		out.Disks = append(out.Disks, web.RestoredDisk{Index: d.Index, SourceKey: d.SourceKey, TargetKey: d.TargetKey, Label: d.Label,
			Capacity: d.Capacity, BytesWritten: d.BytesWritten, SHA256: d.SHA256, Seconds: d.Seconds, Target: d.Target})
	}
	return out
}

// RestoreDisk implements web.Restores: the disk is attached to the target VM.
func (s *restoreService) RestoreDisk(ctx context.Context, req web.DiskRestoreRequest, rep web.Reporter) (*web.RestoreResult, error) {
	e, _, p, err := s.engine(ctx, req.Point)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, d := range p.Disks {
		if d.Key == req.Disk {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("restore point %s has no disk with key %d: %w", p.ID, req.Disk, web.ErrNotFound)
	}
	vms, err := s.inv.VMs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list inventory: %w", err)
	}
	target := ""
	for _, v := range vms {
		if v.InstanceUUID == req.TargetVM {
			target = v.MoRef
		}
	}
	if target == "" {
		return nil, fmt.Errorf("VM %s is not in the inventory: %w", req.TargetVM, web.ErrNotFound)
	}
	rep.Logf("attaching disk %d of point %s to %s", req.Disk, p.ID, target)
	res, err := e.AttachDisk(ctx, restore.AttachRequest{RestorePoint: p.ID, Disk: idx, VM: target, Datastore: req.Datastore, Thin: req.Thin, Progress: restoreProgress(rep)})
	if err != nil {
		return nil, err
	}
	return restoreResultDTO(res), nil
}
