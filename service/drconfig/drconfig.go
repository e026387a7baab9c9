package drconfig

// Disaster recovery: the daemon's configuration (jobs, copy jobs,
// settings, the users' names and roles, the repositories' names and
// locations; never a password, hash, token or passphrase) saved as JSON
// into every repository after each change (Repository.SaveApplianceConfig
// encrypts it under the repository's keys), and read back by
// `appliance serve --import-config REPO` on a fresh state directory, which
// recreates the users too: local ones without a password (an administrator
// sets it before they can sign in), vCenter ones as they were.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/settings"
	"github.com/vmvault/vmvault/web/api"
)

// SavedConfigFormat is the version of SavedConfig's JSON: 1, or
// SavedConfigScopes when a user has a scope.
const SavedConfigFormat = 1

// SavedConfigScopes is the format of a configuration with scoped users
// (SavedUser.Scope): a program that reads only format 1 would recreate
// them unscoped, seeing everything, so it refuses the file instead.
const SavedConfigScopes = 2

// SavedConfig is the configuration the daemon saves into its repositories.
type SavedConfig struct {
	Format       int           `json:"format"`
	Saved        time.Time     `json:"saved"`
	Jobs         []policy.Job  `json:"jobs"`
	CopyJobs     []copyjob.Job `json:"copyJobs"`
	Settings     *api.Settings `json:"settings,omitempty"`
	Users        []SavedUser   `json:"users"`
	Repositories []SavedRepo   `json:"repositories"`
}

// SavedUser is a user without any secret. An import recreates a local
// one with its role and no password (an administrator sets it before the
// user can sign in), a vCenter one as it was.
type SavedUser struct {
	Name   string     `json:"name"`
	Role   string     `json:"role"`
	Source string     `json:"source"`         // "local" or "vcenter"
	Scope  auth.Scope `json:"scope,omitzero"` // format 2
}

// ScopedImporter is what a UserStore also offers to recreate scoped users
// (auth.Manager). Without it, a saved scoped user is refused: recreating
// it unscoped would let it see every VM.
type ScopedImporter interface {
	ImportScopedUser(ctx context.Context, name string, role auth.Role, source string, scope auth.Scope) (auth.User, error)
}

// SavedRepo names a repository of the saved appliance (its passphrase is
// not saved: the operator has it).
type SavedRepo struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// ConfigSaveDebounce is how long changes gather before one save.
const ConfigSaveDebounce = 2 * time.Second

// JobStore holds the backup jobs (internal/state.DB).
type JobStore interface {
	Jobs(ctx context.Context) ([]policy.Job, error)
	PutJob(ctx context.Context, j policy.Job) error
}

// CopyJobStore holds the copy jobs (copyjob.Store).
type CopyJobStore interface {
	Jobs(ctx context.Context) ([]copyjob.Job, error)
	PutJob(ctx context.Context, j copyjob.Job) error
}

// SettingsStore holds the general settings and the repositories added
// from the console (settings.Bolt).
type SettingsStore interface {
	Settings(ctx context.Context) (api.Settings, bool, error)
	PutSettings(ctx context.Context, s api.Settings) error
	Repositories(ctx context.Context) ([]settings.Repo, error)
}

// UserStore lists and recreates users (auth.Manager).
type UserStore interface {
	Users(ctx context.Context) ([]auth.User, error)
	ImportUser(ctx context.Context, name string, role auth.Role, source string) (auth.User, error)
}

// Appliance is what the configuration is collected from and imported
// into.
type Appliance struct {
	Clock    clock.Clock
	Jobs     JobStore
	CopyJobs CopyJobStore
	Settings SettingsStore
	Users    UserStore // nil: no users are saved
	// Configured are the configuration file's repositories, in its order.
	Configured []SavedRepo
	// Open returns the open repositories now (a copy).
	Open   func() map[string]*repository.Repository
	Log    *slog.Logger
	Stdout io.Writer // what an import says of what it did
}

// Collect reads the configuration to save.
func (a *Appliance) Collect(ctx context.Context) (SavedConfig, error) {
	c := SavedConfig{Format: SavedConfigFormat, Saved: a.Clock.Now().UTC(), Users: []SavedUser{}, Repositories: []SavedRepo{}}
	var err error
	if c.Jobs, err = a.Jobs.Jobs(ctx); err != nil {
		return c, err
	}
	if c.CopyJobs, err = a.CopyJobs.Jobs(ctx); err != nil {
		return c, err
	}
	if s, ok, err := a.Settings.Settings(ctx); err != nil {
		return c, err
	} else if ok {
		c.Settings = &s
	}
	if a.Users != nil {
		us, err := a.Users.Users(ctx)
		if err != nil {
			return c, err
		}
		for _, u := range us {
			c.Users = append(c.Users, SavedUser{Name: u.Username, Role: string(u.Role), Source: u.Source, Scope: u.Scope})
			if !u.Scope.Empty() {
				c.Format = SavedConfigScopes
			}
		}
	}
	c.Repositories = append(c.Repositories, a.Configured...)
	// The ones added from the console too (a removed one is gone from the
	// list), so that an import can say where a job's repository was.
	added, err := a.Settings.Repositories(ctx)
	if err != nil {
		return c, err
	}
	for _, rc := range added {
		if !slices.ContainsFunc(c.Repositories, func(s SavedRepo) bool { return s.Name == rc.Name }) {
			c.Repositories = append(c.Repositories, SavedRepo{Name: rc.Name, Path: rc.Path})
		}
	}
	return c, nil
}

// empty reports whether nothing worth restoring is configured.
func (c SavedConfig) empty() bool {
	return len(c.Jobs) == 0 && len(c.CopyJobs) == 0 && c.Settings == nil
}

// Saver saves the configuration into every repository, debounced,
// after each change it is told about.
type Saver struct {
	collect  func(context.Context) (SavedConfig, error)
	repos    func() map[string]*repository.Repository // the open ones now
	clk      clock.Clock
	debounce time.Duration
	log      *slog.Logger
	kick     chan struct{}
	saves    atomic.Int64 // rounds that saved (tests)
}

// NewSaver returns a saver of a's configuration into a's open
// repositories, debounce apart (0: ConfigSaveDebounce).
func NewSaver(a *Appliance, debounce time.Duration) *Saver {
	if debounce <= 0 {
		debounce = ConfigSaveDebounce
	}
	return &Saver{collect: a.Collect, repos: a.Open, clk: a.Clock, debounce: debounce,
		log: a.Log.With("component", "config-save"), kick: make(chan struct{}, 1)}
}

// Changed schedules a save.
func (c *Saver) Changed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run saves once at start (unless nothing is configured: a fresh daemon
// must not bury the configuration it could import), then after changes,
// until ctx ends; a change still pending then is saved before it returns.
func (c *Saver) Run(ctx context.Context) {
	c.save(ctx, false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		t := c.clk.NewTimer(c.debounce)
		select {
		case <-ctx.Done():
			t.Stop()
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			c.save(fctx, true)
			cancel()
			return
		case <-t.C():
		}
		select { // changes during the wait are in this save
		case <-c.kick:
		default:
		}
		c.save(ctx, true)
	}
}

// save writes the configuration into every repository; evenEmpty also
// saves a configuration with nothing in it (after a change deleted the
// last job, say).
func (c *Saver) save(ctx context.Context, evenEmpty bool) {
	cfg, err := c.collect(ctx)
	if err != nil {
		c.log.Error("appliance configuration not saved: read it", "err", err)
		return
	}
	if cfg.empty() && !evenEmpty {
		return
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		c.log.Error("appliance configuration not saved: encode", "err", err)
		return
	}
	repos := c.repos()
	names := make([]string, 0, len(repos))
	for n := range repos {
		names = append(names, n)
	}
	slices.Sort(names)
	ok := 0
	for _, n := range names {
		if err := repos[n].SaveApplianceConfig(ctx, b); err != nil {
			c.log.Error("appliance configuration not saved into a repository", "repository", n, "err", err)
			continue
		}
		ok++
	}
	if ok > 0 {
		c.saves.Add(1)
		c.log.Info("appliance configuration saved", "repositories", ok, "jobs", len(cfg.Jobs), "copy_jobs", len(cfg.CopyJobs), "bytes", len(b))
	}
}

// EventStore reads and records the API's events (records.Store; web's
// EventLog and EventRecorder).
type EventStore interface {
	Events(ctx context.Context, q api.EventQuery) ([]policy.Event, error)
	AddEvent(ctx context.Context, e policy.Event) error
}

// Events passes the API's events through and tells the saver about
// the ones that record a successful configuration change (the audit trail
// records every change, so none is missed).
type Events struct {
	Inner   EventStore
	Changed func()
}

func (e Events) Events(ctx context.Context, q api.EventQuery) ([]policy.Event, error) {
	return e.Inner.Events(ctx, q)
}

func (e Events) AddEvent(ctx context.Context, ev policy.Event) error {
	err := e.Inner.AddEvent(ctx, ev)
	if ev.Outcome == api.OutcomeOK && isConfigChange(ev.Kind) {
		e.Changed()
	}
	return err
}

func isConfigChange(kind string) bool {
	switch kind {
	case "job.create", "job.update", "job.delete", "copyjob.create", "copyjob.update", "copyjob.delete",
		"settings.update", "user.create", "user.update", "user.delete", "repository.add", "repository.remove":
		return true
	}
	return false
}

// decodeSavedConfig decodes a saved configuration and checks what the
// import writes: the format, and every job and copy job well formed (ids,
// windows, retention; repositories are checked against the configuration
// by the caller).
func decodeSavedConfig(raw []byte) (SavedConfig, error) {
	var sc SavedConfig
	if err := json.Unmarshal(raw, &sc); err != nil {
		return sc, fmt.Errorf("decode: %w", err)
	}
	if sc.Format < 1 || sc.Format > SavedConfigScopes {
		return sc, fmt.Errorf("format %d, this program reads up to %d", sc.Format, SavedConfigScopes)
	}
	seen := map[string]bool{}
	for i, j := range sc.Jobs {
		if j.ID == "" || seen["j"+j.ID] {
			return sc, fmt.Errorf("job %d: empty or repeated id %q", i, j.ID)
		}
		seen["j"+j.ID] = true
		if err := j.Window.Validate(); err != nil {
			return sc, fmt.Errorf("job %s: window: %w", j.ID, err)
		}
		if err := j.Retention.Validate(); err != nil {
			return sc, fmt.Errorf("job %s: %w", j.ID, err)
		}
	}
	for _, j := range sc.CopyJobs {
		if seen["c"+j.ID] {
			return sc, fmt.Errorf("copy job %s: repeated id", j.ID)
		}
		seen["c"+j.ID] = true
		if err := j.Validate(nil); err != nil {
			return sc, fmt.Errorf("copy job %s: %w", j.ID, err)
		}
	}
	if st := sc.Settings; st != nil {
		if _, err := time.LoadLocation(st.TimeZone); err != nil || st.TimeZone == "" || st.EventRetentionDays < 1 {
			return sc, fmt.Errorf("settings: time zone %q, event retention %d days", st.TimeZone, st.EventRetentionDays)
		}
	}
	for i, u := range sc.Users {
		if err := checkSavedUser(u); err != nil {
			return sc, fmt.Errorf("user %d: %w", i, err)
		}
		if seen["u"+strings.ToLower(u.Name)] {
			return sc, fmt.Errorf("user %d: repeated name %q", i, u.Name)
		}
		seen["u"+strings.ToLower(u.Name)] = true
	}
	return sc, nil
}

// checkSavedUser checks what ImportUser would: the name, the source, the role.
func checkSavedUser(u SavedUser) error {
	if err := auth.CheckImportedName(u.Name); err != nil {
		return fmt.Errorf("%q: %w", u.Name, err)
	}
	if u.Source != auth.SourceLocal && u.Source != auth.SourceVCenter {
		return fmt.Errorf("%q: source %q (local, vcenter)", u.Name, u.Source)
	}
	if _, err := auth.ParseRole(u.Role); err != nil {
		return fmt.Errorf("%q: %w", u.Name, err)
	}
	if _, err := u.Scope.Normalize(); err != nil {
		return fmt.Errorf("%q: %w", u.Name, err)
	}
	return nil
}

// ImportConfig names the repository whose saved configuration a fresh
// daemon imports before it starts (appliance serve --import-config).
type ImportConfig struct {
	// Repository is a configured repository's name or a location
	// (directory or s3:...).
	Repository string
	// Passphrase of a location that is not a configured repository.
	Passphrase []byte
	// Force imports into a state that already has jobs, copy jobs or
	// settings (same ids are replaced, others stay).
	Force bool
}

// ErrStateNotEmpty is returned by an import into a configured appliance without Force.
var ErrStateNotEmpty = errors.New("the state directory already has a configuration")

// Import reads the newest saved configuration from the repository
// and writes its jobs, copy jobs and settings into the state database, and
// recreates its users (importUsers).
func (a *Appliance) Import(ctx context.Context, ic ImportConfig) error {
	repos := a.Open()
	r, name := repos[ic.Repository], ic.Repository
	if r == nil {
		for _, rc := range a.Configured {
			if rc.Path == ic.Repository {
				r, name = repos[rc.Name], rc.Name
			}
		}
	}
	if r == nil {
		or, err := repository.Open(ctx, ic.Repository, ic.Passphrase, repository.OpenOptions{Holder: "daemon (import configuration)", Logger: a.Log})
		if err != nil {
			return fmt.Errorf("import configuration: %w", err)
		}
		defer or.Close()
		r = or
	}
	raw, saved, err := r.LoadApplianceConfig(ctx)
	if err != nil {
		if errors.Is(err, repository.ErrNotFound) {
			return fmt.Errorf("import configuration: repository %s holds no saved appliance configuration: %w", name, err)
		}
		return fmt.Errorf("import configuration from %s: %w", name, err)
	}
	sc, err := decodeSavedConfig(raw)
	if err != nil {
		return fmt.Errorf("import configuration from %s: %w", name, err)
	}
	cur, err := a.Collect(ctx)
	if err != nil {
		return fmt.Errorf("import configuration: read the current state: %w", err)
	}
	if !cur.empty() && !ic.Force {
		return fmt.Errorf("import configuration: %w (%d jobs, %d copy jobs): run with --force to import over it (jobs of the same id are replaced)",
			ErrStateNotEmpty, len(cur.Jobs), len(cur.CopyJobs))
	}
	// Every repository the jobs name must be configured here: the
	// operator adds them (with their passphrases) to the YAML first.
	need := map[string]bool{}
	for _, j := range sc.Jobs {
		need[j.Repository] = true
	}
	for _, j := range sc.CopyJobs {
		need[j.Source], need[j.Target] = true, true
	}
	var missing []string
	for n := range need {
		if _, ok := repos[n]; !ok {
			where := ""
			for _, sr := range sc.Repositories {
				if sr.Name == n {
					where = " (it was at " + sr.Path + ")"
				}
			}
			missing = append(missing, n+where)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("import configuration from %s: the saved jobs use repositories this configuration lacks: %s; add them to the repositories section with their passphrases and start again",
			name, strings.Join(missing, ", "))
	}
	for _, j := range sc.Jobs {
		if err := a.Jobs.PutJob(ctx, j); err != nil {
			return fmt.Errorf("import configuration: job %s: %w", j.ID, err)
		}
	}
	for _, j := range sc.CopyJobs {
		if err := a.CopyJobs.PutJob(ctx, j); err != nil {
			return fmt.Errorf("import configuration: %w", err)
		}
	}
	if sc.Settings != nil {
		if err := a.Settings.PutSettings(ctx, *sc.Settings); err != nil {
			return fmt.Errorf("import configuration: %w", err)
		}
	}
	fmt.Fprintf(a.Stdout, "imported the configuration saved %s in repository %s: %d jobs, %d copy jobs, settings: %v\n",
		saved.Format(time.RFC3339), name, len(sc.Jobs), len(sc.CopyJobs), sc.Settings != nil)
	created, err := a.importUsers(ctx, sc.Users)
	if err != nil {
		return fmt.Errorf("import configuration: %w", err)
	}
	a.Log.Info("configuration imported", "repository", name, "saved", saved, "jobs", len(sc.Jobs), "copy_jobs", len(sc.CopyJobs), "users_created", created)
	return nil
}

// importUsers recreates the saved users the state lacks and says on
// stdout what became of each: a local user gets its role and no password
// (it cannot sign in until an administrator sets one), a vCenter user is
// kept as it was; a name that exists (the administrator of this
// appliance's configuration, a user of an earlier import) is left as it is.
// Nothing secret is printed: there is none to print.
func (a *Appliance) importUsers(ctx context.Context, users []SavedUser) (int, error) {
	created, waiting := 0, 0
	for _, su := range users {
		var u auth.User
		var err error
		if su.Scope.Empty() {
			u, err = a.Users.ImportUser(ctx, su.Name, auth.Role(su.Role), su.Source)
		} else if si, ok := a.Users.(ScopedImporter); ok {
			u, err = si.ImportScopedUser(ctx, su.Name, auth.Role(su.Role), su.Source, su.Scope)
		} else {
			return created, fmt.Errorf("user %s is scoped and this user store cannot keep scopes", su.Name)
		}
		switch {
		case errors.Is(err, auth.ErrUserExists):
			fmt.Fprintf(a.Stdout, "user %s (%s, %s) exists on this appliance: left as it is (%s, %s)\n", su.Name, su.Role, su.Source, u.Role, u.Source)
			continue
		case err != nil:
			return created, fmt.Errorf("user %s: %w", su.Name, err)
		}
		created++
		if u.PasswordNotSet {
			waiting++
			fmt.Fprintf(a.Stdout, "user %s (%s, %s) recreated without a password: it cannot sign in until an administrator sets one (console Settings > Users, or PUT /api/v1/users/%s {\"password\": ...})\n",
				u.Username, u.Role, u.Source, url.PathEscape(u.Username))
		} else {
			fmt.Fprintf(a.Stdout, "user %s (%s, %s) recreated: vCenter checks its password; its role at sign-in comes from vcenter.roles and vcenter.role\n", u.Username, u.Role, u.Source)
		}
	}
	if waiting > 0 {
		fmt.Fprintf(a.Stdout, "users without a password: %d (an administrator sets them; passwords are never saved)\n", waiting)
	}
	return created, nil
}
