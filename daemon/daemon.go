package daemon

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
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/cache"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/approval"
	"github.com/vmvault/vmvault/service/appsettings"
	"github.com/vmvault/vmvault/service/backups"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/drconfig"
	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/instantvm"
	"github.com/vmvault/vmvault/service/inventory"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/notify/feed"
	"github.com/vmvault/vmvault/service/records"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/restores"
	"github.com/vmvault/vmvault/service/settings"
	"github.com/vmvault/vmvault/service/topology"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/service/verifyjob"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/web"
	"github.com/vmvault/vmvault/web/api"
)

// ShutdownGrace bounds how long running requests and tasks may take to end
// once the daemon is told to stop.
const ShutdownGrace = 30 * time.Second

// Options are the settings of one start beside the configuration file: the
// process's streams and environment, the state directory's copies, and the
// seams tests use.
type Options struct {
	// Stdout receives the generated administrator password, once; it is
	// never logged. Default os.Stdout.
	Stdout io.Writer
	// Stderr receives the log. Default os.Stderr.
	Stderr io.Writer
	// Getenv reads the environment variables the configuration names
	// (passwords, passphrases, $VMVAULT_ADMIN_PASSWORD). Default os.Getenv.
	Getenv func(string) string

	// RestoreState, when set, is a copy of state.db installed before the
	// daemon opens it: a path, or "newest" (the newest copy that verifies).
	RestoreState string
	// StateBackups is the number of copies of state.db kept; 0: state.DefaultKeep.
	StateBackups int
	// StateBackupEvery is the interval between copies; 0: state.DefaultEvery.
	StateBackupEvery time.Duration

	// Ready, when set, is called with the listening address once the
	// daemon accepts connections (before Config.OnReady); it must not block.
	Ready func(addr string)
	// Clock is the daemon's time; default the wall clock (tests: clock.Fake).
	Clock clock.Clock
	// RepoInit are the options of repositories created from the console;
	// a zero Chunker is the defaults with a random polynomial (as `appliance
	// repo init`), a zero KDF the default KDF (tests: cheap ones).
	RepoInit repository.InitOptions
	// AlertDebounce is how long failures gather before one alert mail;
	// default one minute.
	AlertDebounce time.Duration
	// Import, when set, imports the configuration saved in a repository
	// into the state database before the daemon starts (disaster
	// recovery: appliance serve --import-config).
	Import *ImportConfig
	// ConfigSaveDebounce is how long configuration changes gather before
	// they are saved into the repositories; default drconfig.ConfigSaveDebounce.
	ConfigSaveDebounce time.Duration
}

func (o *Options) setDefaults() {
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.AlertDebounce == 0 {
		o.AlertDebounce = time.Minute
	}
}

// NewLogger returns the daemon's text logger at level (debug, info, warn,
// error; anything else is info).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// Daemon is the appliance's object graph: the state database, the
// repositories, the vCenter session and the services over them (backups,
// restores, scheduler, maintenance, tasks, notifications, file restore),
// and the API server in front. New builds it, Run serves until its context
// ends, Close releases what New opened.
type Daemon struct {
	cfg     *Config
	opts    Options
	log     *slog.Logger
	clk     clock.Clock
	started time.Time // snapshots of ours older than this are stale

	db       *state.DB
	keep     int // copies of state.db kept
	settings *settings.Bolt
	tasks    *task.Registry
	sched    *policy.Scheduler  // nil without vCenter
	vclient  *vsphere.Client    // nil without vCenter
	instant  *instantvm.Manager // nil without the instant section
	files    *filerestore.Service
	srv      *web.Server
	am       *auth.Manager
	// Copy jobs (their store in state.db, the runner) and the saver of
	// the configuration into the repositories.
	copyStore *copyjob.Store
	copies    *copyjob.Runner
	// verifyJobs runs the verification jobs (their files in
	// <state_dir>/verification-jobs).
	verifyJobs *verifyjob.Runner
	saver      *drconfig.Saver
	// observe receives the scheduler's and the sweep's events (notifier,
	// then the API's live stream); set once the server exists.
	observe func(policy.Event)

	loc *time.Location       // the appliance's time zone
	app *appsettings.Service // the console's settings over the YAML's

	mu    sync.Mutex // guards repos: the console adds to it while Run serves
	repos map[string]*repository.Repository
	// approvals holds administrators' destructive actions for
	// approvals.delay and runs them when due (approvals.go).
	approvals *approval.Manager

	closersMu sync.Mutex // a repository added at runtime registers its Close
	closers   []func() error
	ran       bool
}

// record stores an event of the daemon's own (the sweep, the space watch)
// and hands it to the observers (notifier, live stream).
func (d *Daemon) record(e policy.Event) {
	e.Time = d.clk.Now()
	if err := d.db.AddEvent(context.Background(), e); err != nil {
		d.log.Error("record event", "err", err)
	}
	if d.observe != nil {
		d.observe(e)
	}
}

// onClose registers f to run at Close, in reverse order of registration.
func (d *Daemon) onClose(name string, f func() error) {
	d.closersMu.Lock()
	defer d.closersMu.Unlock()
	d.closers = append(d.closers, func() error {
		if err := f(); err != nil {
			d.log.Error("close", "what", name, "err", err)
			return fmt.Errorf("close %s: %w", name, err)
		}
		return nil
	})
}

// Close releases what New opened, in reverse order: the notifier sends its
// pending alerts (within notify.FlushTimeout), file restore stops, the
// vCenter session logs out, the repositories and the state database close.
// Call it after Run has returned.
func (d *Daemon) Close() error {
	d.closersMu.Lock()
	closers := d.closers
	d.closers = nil
	d.closersMu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i]())
	}
	return errors.Join(errs...)
}

// Serve builds the daemon, runs it until ctx ends and closes it.
func Serve(ctx context.Context, cfg *Config, opts Options) error {
	d, err := New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Run(ctx)
}

// The services New wires, as web and the scheduler take them; feed's
// wrappers spell web's interfaces again over web/api's types (feed may not
// import web), so the two must stay the same both ways.
var (
	_ policy.Runner        = (*backups.Runner)(nil)
	_ web.Backups          = (*backups.Runner)(nil)
	_ web.Restores         = (*restores.Service)(nil)
	_ web.CopyJobs         = (*copyjob.API)(nil)
	_ web.VerificationJobs = verifyjob.API{}
	_ web.Mailer           = (*feed.MailSwitch)(nil)
	_ web.Backups          = feed.AlertingBackups{}
	_ web.Restores         = feed.AlertingRestores{}
	_ web.Repositories     = feed.AlertingRepositories{}
	_ feed.Backups         = web.Backups(nil)
	_ feed.Restores        = web.Restores(nil)
	_ feed.Repositories    = web.Repositories(nil)
	_ notify.Source        = (*feed.Source)(nil)
	_ notify.CopySource    = (*feed.Source)(nil)
)

// New opens the daemon's state and resources and builds its services from
// cfg (validated: LoadConfig or Config.Validate). ctx bounds the opening
// only. On error everything opened so far is closed again.
func New(ctx context.Context, cfg *Config, opts Options) (_ *Daemon, err error) {
	opts.setDefaults()
	log := NewLogger(opts.Stderr, cfg.LogLevel)
	d := &Daemon{cfg: cfg, opts: opts, log: log, clk: opts.Clock}
	defer func() {
		if err != nil {
			_ = d.Close()
		}
	}()
	getenv := opts.Getenv
	loc, _ := time.LoadLocation(cfg.TimeZone) // validated
	d.loc = loc
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	clk := d.clk
	dbPath := StatePath(cfg.StateDir)
	if opts.RestoreState != "" {
		if err := restoreStateCopy(dbPath, opts.RestoreState, clk.Now(), log); err != nil {
			return nil, err
		}
	}
	db, err := state.Open(dbPath)
	if err != nil {
		if errors.Is(err, state.ErrHeld) {
			return nil, fmt.Errorf("%w: another daemon is running on state directory %s", err, cfg.StateDir)
		}
		var ce *state.CorruptError
		if errors.As(err, &ce) && ce.Newest != nil {
			return nil, fmt.Errorf("%w\nto start from that copy, run the same command with --restore-state newest (the file it replaces is kept, not deleted); `appliance state backups` lists the copies", err)
		}
		return nil, err
	}
	d.db = db
	d.onClose("state db", db.Close)
	// state.db cannot be rebuilt: a verified copy at every start, then one
	// every interval (keepCopies in Run), the newest few kept.
	d.keep = cmp.Or(opts.StateBackups, state.DefaultKeep)
	c, removed, err := db.RotateCopy(state.CopiesDir(dbPath), clk.Now(), d.keep)
	d.copyDone(c, removed, err)
	// Sessions, tokens, tasks, settings, copy jobs and approvals share the
	// state database: auth and task through its bbolt file, the services
	// through their state.Store (one owner per bucket).
	wdb := db.Bolt()
	// The console's settings win over the YAML's (appsettings.go); their
	// passwords are sealed with a key file of their own.
	sealer, err := settings.OpenKeyFile(filepath.Join(cfg.StateDir, settings.KeyFileName))
	if err != nil {
		return nil, err
	}
	st, err := settings.NewBolt(db, settings.WithSealer(sealer))
	if err != nil {
		return nil, err
	}
	d.settings = st

	opened := map[string]*repository.Repository{}
	d.repos = opened
	limits := map[string]*repoLimits{}
	for _, rc := range cfg.Repositories {
		pass, err := readSecret(getenv, rc.PassphraseFile, rc.PassphraseEnv, "passphrase of repository "+rc.Name)
		if err != nil {
			return nil, err
		}
		var pw []byte
		if pass != "" {
			pw = []byte(pass)
		}
		lim := newRepoLimits(rc, clk)
		r, err := repository.Open(ctx, rc.Path, pw, lim.apply(repository.OpenOptions{Holder: "daemon (appliance serve)", Logger: log.With("repository", rc.Name)}))
		if err != nil {
			if errors.Is(err, repository.ErrLocked) {
				return nil, fmt.Errorf("repository %s is in use by another daemon or command: %w", rc.Name, err)
			}
			// err names the path and says "open repository".
			return nil, fmt.Errorf("repository %s: %w", rc.Name, err)
		}
		d.onClose("repository "+rc.Name, r.Close)
		opened[rc.Name] = r
		limits[rc.Name] = lim
		log.Info("repository opened", "name", rc.Name, "path", rc.Path, "encrypted", r.Config().Encrypted,
			"upload_limit_mb_per_s", rc.UploadLimit, "download_limit_mb_per_s", rc.DownloadLimit, "limit_windows", len(rc.LimitSchedule))
	}
	if err := d.openConsoleRepositories(ctx, st); err != nil {
		return nil, err
	}
	rs := repos.New(opened, repos.WithLowSpace(cfg.Limits.lowSpace()),
		repos.WithBandwidth(func(name string) *api.Bandwidth { return limits[name].info() }))
	rs.Maintenance = db.Maintenance

	authStore, err := auth.NewBoltStore(wdb)
	if err != nil {
		return nil, err
	}
	acfg := auth.Config{Clock: clk, Store: authStore, AdminUser: cfg.Admin.User}
	if cfg.Sessions.TTL != "" {
		acfg.SessionTTL, _ = time.ParseDuration(cfg.Sessions.TTL) // validated
	}
	var inv policy.Inventory
	var runner *backups.Runner
	var restorer *restores.Service
	var targets *serveTargets     // console's inventory, restore targets, vCenter test
	var tagSrc *topology.TagCache // GET /tags
	d.started = clk.Now()
	tester := &topology.VCenterTester{}
	var active *vsphere.Config
	vc, vpw, vsrc, err := d.vcenterEffective(ctx, st)
	if err != nil {
		return nil, err
	}
	var client *vsphere.Client
	if vc != nil {
		vcfg := vsphere.Config{URL: vc.URL, Username: vc.Username, Password: vpw, Thumbprint: vc.Thumbprint, CAFile: vc.CAFile, Insecure: vc.Insecure}
		tester.SetConfigured(&vcfg)
		client, err = vsphere.Connect(ctx, vcfg)
		switch {
		case err != nil && vsrc == api.SourceYAML:
			return nil, fmt.Errorf("connect to vCenter %s: %w", vc.URL, err)
		case err != nil:
			// The console's connection: start without vCenter, so that the
			// console can correct it.
			log.Error("the vCenter connection saved from the console failed; running without vCenter until it is corrected (Settings, vCenter)", "url", vc.URL, "err", err)
			client = nil
		default:
			vcenterAuth(&acfg, vc, vcfg)
			active = &vcfg
		}
	}
	if client != nil {
		d.onClose("vCenter session", func() error { return client.Close(context.Background()) })
		d.vclient = client
		inv = inventory.New(client)
		runner = backups.New(client, opened, rs.Names(), inv)
		runner.Repos = rs
		if vc.HotAdd != "off" {
			enableHotAdd(ctx, log, client, runner, vc.ApplianceVM)
		}
		restorer = restores.New(client, rs, inv)
		targets = newServeTargets(client, cache.WithClock(clk))
		tagSrc = topology.NewTagCache(inventory.New(client), cache.WithClock(clk))
		log.Info("vCenter connected", "url", vc.URL, "about", client.About())
	}
	am, err := auth.NewManager(acfg)
	if err != nil {
		return nil, err
	}
	adminPw, err := readSecret(getenv, cfg.Admin.PasswordFile, "", "administrator password")
	if err != nil {
		return nil, err
	}
	if adminPw == "" {
		adminPw = getenv("VMVAULT_ADMIN_PASSWORD")
	}
	generated, err := am.EnsureAdmin(ctx, adminPw)
	if err != nil {
		return nil, err
	}
	if generated != "" {
		// Printed once, on stdout only, never logged.
		fmt.Fprintf(opts.Stdout, "administrator %q password (shown once, change it after logging in): %s\n", cfg.Admin.User, generated)
	}

	taskStore, err := task.NewBoltStore(wdb)
	if err != nil {
		return nil, err
	}
	maxTasks := cfg.Limits.MaxRunningTasks
	if maxTasks == 0 {
		maxTasks = 2
	}
	tasks := task.New(task.Config{Clock: clk, Store: taskStore, MaxRunning: maxTasks, Logf: func(f string, a ...any) { log.Error(fmt.Sprintf(f, a...)) }})
	d.tasks = tasks
	if n, err := tasks.Recover(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		log.Warn("tasks interrupted by the previous stop were marked failed", "count", n)
	}
	d.am = am
	if d.copyStore, err = copyjob.NewStore(db); err != nil {
		return nil, err
	}
	if opts.Import != nil {
		if err := d.drAppliance().Import(ctx, *opts.Import); err != nil {
			return nil, err
		}
	}
	d.copies = copyjob.New(copyjob.Config{Store: d.copyStore, Repos: rs, Clock: clk, Location: loc, OnEvent: d.record,
		Logger: log.With("component", "copy")})
	d.saver = drconfig.NewSaver(d.drAppliance(), opts.ConfigSaveDebounce)
	rec := records.New(db) // jobs, runs, events and VM states as the API reads them
	wcfg := web.Config{
		Clock: clk, Logger: log, Auth: am, Tasks: tasks, Jobs: rec, Inventory: inv,
		Points: rs, Repositories: rs, KnownRepository: rs.Has, Events: drconfig.Events{Inner: rec, Changed: d.saver.Changed}, VMStates: rec, Settings: st,
		CopyJobs:        copyjob.NewAPI(d.copyStore, d.copies, rs, rs.Has),
		DefaultSettings: web.Settings{TimeZone: loc.String(), EventRetentionDays: 90},
		TrustProxy:      cfg.API.TrustProxy,
	}
	targets.wire(&wcfg, tester)
	if d.files, err = d.newFileRestore(rs); err != nil {
		return nil, err
	}
	wcfg.Files = d.files
	if tagSrc != nil {
		wcfg.Tags = tagSrc
	}
	// Without vCenter there is nothing to back up or restore to: jobs are
	// stored and validated, the scheduler does not run (run now answers 503)
	// and POST /backups and /restores answer 501.
	if restorer != nil {
		wcfg.Restores = restorer
	}
	var ivm *instantvm.Manager
	if cfg.Instant != nil && client != nil {
		if ivm, err = d.newInstant(cfg.Instant, cfg.StateDir, client, rs, clk, log); err != nil {
			return nil, err
		}
		wcfg.Instant = instantvm.API{M: ivm}
		d.instant = ivm
	} else if cfg.Instant != nil {
		log.Warn("instant recovery is configured but there is no vCenter connection: it is off")
	}
	// Verification walks points everywhere; it boots them only with
	// instant recovery (the instant section and a vCenter).
	ver, err := d.newVerification(cfg.StateDir, rs, ivm, client, clk)
	if err != nil {
		return nil, err
	}
	wcfg.Verifier = verification.API{M: ver}
	rs.SetVerification(verification.API{M: ver}.Latest)
	// Verification jobs walk everywhere too; a boot job is refused
	// without instant recovery.
	vjStore, err := verifyjob.OpenStore(filepath.Join(cfg.StateDir, "verification-jobs"), false)
	if err != nil {
		return nil, err
	}
	d.verifyJobs = verifyjob.New(verifyjob.Config{Store: vjStore, Points: rs, Verifier: ver, Clock: clk, OnEvent: d.record,
		Logger: log.With("component", "verification-jobs")})
	wcfg.VerificationJobs = verifyjob.API{Store: vjStore, Runner: d.verifyJobs, CanBoot: ver.CanBoot}
	if runner != nil {
		wcfg.Backups = runner
		wcfg.Prober = runner
		pcfg := policy.Config{
			Clock: clk, Store: db, Runner: runner, Inventory: inv,
			MaxConcurrent: cfg.Limits.MaxConcurrentBackups, Location: loc,
			OnEvent: func(e policy.Event) {
				if d.observe != nil {
					d.observe(e)
				}
			},
			Logf: func(f string, a ...any) { log.Error("scheduler: " + fmt.Sprintf(f, a...)) },
		}
		// The maintainer is always there: the console may set a window later.
		pcfg.Maintainer = repos.Maintainer{Set: rs}
		w, fullCheck, _, err := d.maintenanceEffective(ctx, st)
		if err != nil {
			return nil, err
		}
		if w != nil {
			pcfg.MaintenanceWindow = *w
			pcfg.FullCheckInterval = fullCheck
		}
		d.sched, err = policy.New(pcfg)
		if err != nil {
			return nil, err
		}
		wcfg.Scheduler = d.sched
	}
	sc, spw, _, err := d.smtpEffective(ctx, st)
	if err != nil {
		return nil, err
	}
	if wcfg.Approvals, err = d.newApprovals(rs, rec); err != nil {
		return nil, err
	}
	src := &feed.Source{DB: db, Repos: rs, Inventory: inv, Log: log.With("component", "mail"), Copies: d.copyStore}
	nt, err := d.startNotifier(sc, spw, src, &wcfg)
	if err != nil {
		return nil, err
	}
	d.app = d.newAppSettings(st, nt, src, rs, runner, tester, active)
	wcfg.Appliance = d.app
	wcfg.AddRepository = d.app
	wcfg.RemoveRepository = d.app
	d.srv, err = web.New(wcfg)
	if err != nil {
		return nil, err
	}
	d.observe = feed.Observe(nt, d.srv.ObserveEvent)
	if runner != nil {
		runner.Observe = d.srv.ObserveBackup
	}
	return d, nil
}

// copyDone logs the outcome of one copy of state.db.
func (d *Daemon) copyDone(c state.Copy, removed []string, err error) {
	if err != nil {
		d.log.Error("state database copy failed", "dir", state.CopiesDir(d.db.Path()), "err", err)
		return
	}
	d.log.Info("state database copied", "copy", c.Path, "bytes", c.Size, "pruned", len(removed))
}

// Run serves the API and runs the background work (start-up snapshot
// sweep, then the scheduler; event pruning; copies of state.db; the file
// restore indexer) until ctx ends, then stops them: it stops accepting
// requests, lets the scheduler cancel and record its backups, and waits up
// to ShutdownGrace for tasks and requests to end. It returns nil after a
// clean stop. Run may be called once.
func (d *Daemon) Run(ctx context.Context) error {
	if d.ran {
		return errors.New("daemon: Run called twice")
	}
	d.ran = true
	cfg, log, clk, db := d.cfg, d.log, d.clk, d.db
	schedDone := make(chan error, 1)
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	// The file restore indexer catalogues new restore points (within a
	// minute of their backup) and drops the catalogs of deleted ones.
	indexDone := make(chan struct{})
	go func() {
		defer close(indexDone)
		_ = d.files.Run(schedCtx)
	}()
	defer func() {
		stopSched()
		<-indexDone
	}()
	// The sweep finishes before the scheduler starts, so none of this
	// process's own snapshots exists yet while it runs.
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if d.vclient == nil {
			return
		}
		if n, err := sweepStaleSnapshots(schedCtx, d.vclient, d.started, log, d.record); err != nil && schedCtx.Err() == nil {
			log.Warn("start-up snapshot sweep", "err", err)
		} else if n > 0 {
			log.Info("start-up snapshot sweep", "removed", n)
		}
	}()
	if d.sched != nil {
		go func() {
			<-sweepDone
			schedDone <- d.sched.Run(schedCtx)
		}()
	} else {
		schedDone <- nil
	}
	pruneDone := make(chan struct{})
	go func() {
		defer close(pruneDone)
		pruneEvents(schedCtx, db, d.settings, clk, log)
	}()
	spaceDone := make(chan struct{})
	go func() {
		defer close(spaceDone)
		watchSpace(schedCtx, func() map[string]spaceReader { return spaceReaders(d.openRepositories()) }, cfg.Limits.lowSpace(), clk, log, d.record)
	}()
	overlaysDone := make(chan struct{})
	go func() {
		defer close(overlaysDone)
		if d.instant != nil {
			watchOverlays(schedCtx, d.instant, clk, d.record)
		}
	}()
	approvalsDone := make(chan struct{})
	go func() {
		defer close(approvalsDone)
		_ = d.approvals.Run(schedCtx, func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) })
	}()
	copiesDone := make(chan struct{})
	go func() {
		defer close(copiesDone)
		db.KeepCopies(schedCtx, state.CopyOptions{Keep: d.keep, Every: d.opts.StateBackupEvery, Clock: clk, Done: d.copyDone})
	}()
	// Copy jobs need no vCenter: they run between repositories. Stopping
	// interrupts a running copy; the next run resumes it.
	copyJobsDone := make(chan struct{})
	go func() {
		defer close(copyJobsDone)
		_ = d.copies.Run(schedCtx)
	}()
	// Verification jobs: stopping ends the running verifications (a boot
	// is torn down by service/verification) and records the run interrupted.
	verifyJobsDone := make(chan struct{})
	go func() {
		defer close(verifyJobsDone)
		_ = d.verifyJobs.Run(schedCtx)
	}()
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		d.saver.Run(schedCtx)
	}()
	// stopBackground stops what the goroutines above run, except the
	// scheduler, and waits for it.
	stopBackground := func() {
		stopSched()
		<-pruneDone
		<-spaceDone
		<-overlaysDone
		<-copiesDone
		<-approvalsDone
		<-copyJobsDone
		<-verifyJobsDone
		<-saverDone
		<-sweepDone
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		stopBackground()
		<-schedDone
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	scheme := "http"
	hs := &http.Server{Handler: d.srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if !cfg.TLS.Disable {
		certFile, keyFile := cfg.TLS.CertFile, cfg.TLS.KeyFile
		if certFile == "" {
			certFile, keyFile, err = selfSigned(filepath.Join(cfg.StateDir, "tls"), cfg.Listen, log)
			if err != nil {
				ln.Close()
				stopBackground()
				<-schedDone
				return err
			}
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			ln.Close()
			stopBackground()
			<-schedDone
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
	if d.opts.Ready != nil {
		d.opts.Ready(addr)
	}
	if cfg.OnReady != nil {
		cfg.OnReady(addr)
	}
	select {
	case err := <-errc:
		stopBackground()
		<-schedDone
		_ = d.tasks.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	// Stop accepting requests (SSE streams end as their contexts are
	// cancelled), then cancel running tasks and wait for them.
	go func() {
		<-sctx.Done()
		_ = hs.Close()
	}()
	// The scheduler cancels its running backups (they remove their
	// snapshots) and records them as interrupted before it returns.
	stopBackground()
	select {
	case <-schedDone:
	case <-sctx.Done():
		log.Error("scheduler did not stop in time")
	}
	if err := d.tasks.Close(sctx); err != nil {
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
func pruneEvents(ctx context.Context, db *state.DB, store web.SettingsStore, clk clock.Clock, log *slog.Logger) {
	for {
		days := 90
		if st, ok, err := store.Settings(ctx); err == nil && ok && st.EventRetentionDays > 0 {
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

// enableHotAdd finds the appliance's own VM and, when there is one, sweeps
// the disks a crash left attached to it and lets the engines read through
// HotAdd. An appliance that is not a VM here runs without HotAdd (jobs with
// transport auto use network and NFC; transport hotadd fails clearly).
func enableHotAdd(ctx context.Context, log *slog.Logger, client *vsphere.Client, runner *backups.Runner, applianceVM string) {
	h, err := client.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: applianceVM})
	if err != nil {
		log.Info("HotAdd unavailable: disks are read over the network or NFC", "reason", err)
		return
	}
	swept, err := runner.EnableHotAdd(ctx, client, h)
	for _, s := range swept {
		log.Warn("detached a disk left attached to the appliance VM by an earlier run", "file", s.File, "vm", s.VM, "snapshot", s.Snapshot, "why", s.Why)
	}
	if err != nil {
		log.Error("HotAdd disabled: the start-up sweep failed", "appliance_vm", h.Appliance().Name, "err", err)
		return
	}
	log.Info("HotAdd enabled", "appliance_vm", h.Appliance().Name)
}
