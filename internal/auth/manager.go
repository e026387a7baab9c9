package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/vmvault/vmvault/internal/clock"
)

// Token is an API token as stored: never the secret, only its SHA-256.
type Token struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Role    Role      `json:"role"`
	Owner   string    `json:"owner"`
	Hash    string    `json:"-"` // hex SHA-256 of the secret
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"`
	// Scope limits the token (on top of its owner's scope); empty: none.
	Scope Scope `json:"scope,omitzero"`
}

// User sources.
const (
	SourceLocal   = "local"   // a password hash in the state database
	SourceVCenter = "vcenter" // checked against vCenter at each login
)

// User is a user as stored: never the password, only its Argon2id hash.
// A stored vCenter user (Source SourceVCenter) has no hash: vCenter checks
// its password.
type User struct {
	Username string    `json:"username"`
	Role     Role      `json:"role"`
	Source   string    `json:"source"`
	Created  time.Time `json:"created"`
	// PasswordNotSet marks a local user recreated without a password (by
	// ImportUser: a saved configuration never holds one). It cannot sign
	// in until an administrator sets a password (UpdateUser). The state is
	// this flag, not an empty hash: Login refuses a local user with the
	// flag, or without a hash, whatever the password typed (even none).
	PasswordNotSet bool `json:"passwordNotSet"`
	// Scope limits what the user sees and acts on; empty: nothing.
	Scope Scope  `json:"scope,omitzero"`
	Hash  string `json:"-"`
}

// usable reports whether u can sign in with a local password.
func (u User) usable() bool { return u.local() && !u.PasswordNotSet && u.Hash != "" }

// local reports whether u's password is the appliance's (records of
// earlier versions may lack the source).
func (u User) local() bool { return u.Source == SourceLocal || u.Source == "" }

// Store persists local users and API tokens. Implementations are safe for
// concurrent use.
type Store interface {
	Users(ctx context.Context) ([]User, error)
	// User returns a user by name (without case) or an error wrapping ErrNotFound.
	User(ctx context.Context, name string) (User, error)
	PutUser(ctx context.Context, u User) error         // insert or replace
	DeleteUser(ctx context.Context, name string) error // ErrNotFound when unknown
	// MigrateAdmin turns the single administrator hash of earlier versions
	// into the user name (administrator) unless that user exists, and
	// forgets the old hash; it reports whether it created the user.
	MigrateAdmin(ctx context.Context, name string, created time.Time) (bool, error)
	PutToken(ctx context.Context, t Token) error
	// TokenByHash returns the token with that hex SHA-256, or ErrNotFound.
	TokenByHash(ctx context.Context, hash string) (Token, error)
	Tokens(ctx context.Context) ([]Token, error)
	DeleteToken(ctx context.Context, id string) error // ErrNotFound when unknown
}

// Principal is who made a request.
type Principal struct {
	User    string `json:"user"`
	Source  string `json:"source,omitempty"` // "local" or "vcenter" (sessions)
	Role    Role   `json:"role"`
	Method  string `json:"method"` // "session" or "token"
	Session string `json:"-"`      // session id (cookie sessions)
	CSRF    string `json:"-"`      // the session's CSRF token
	TokenID string `json:"tokenId,omitempty"`
	// Scopes limit the principal: each must allow what it touches (a
	// token's own and its owner's). None: unlimited.
	Scopes []Scope `json:"scopes,omitempty"`
}

// Session is a browser session.
type Session struct {
	ID      string
	CSRF    string
	User    string
	Source  string // SourceLocal or SourceVCenter
	Role    Role
	Scope   Scope // the user's, as stored
	Expires time.Time
}

// Config wires a Manager. Clock and Store are required.
type Config struct {
	Clock     clock.Clock
	Store     Store
	AdminUser string // the local administrator's name; default "admin"
	// VCenterLogin checks vCenter credentials and says who the user is
	// (wantGroups: and its groups); VerifyVCenter is the older form that
	// only checks them (the user is then known by the name typed). Both nil
	// disables vCenter logins. They return an error wrapping
	// ErrBadCredentials for wrong credentials, any other error when vCenter
	// could not answer.
	VCenterLogin  func(ctx context.Context, user, password string, wantGroups bool) (VCenterUser, error)
	VerifyVCenter func(ctx context.Context, user, password string) error
	// VCenterRules give vCenter users roles: a rule naming the user wins,
	// else the highest role of the rules naming one of its groups, else
	// VCenterRole. VCenterRole "" (the default) gives no role: a vCenter
	// user no rule names cannot log in (ErrNoRole).
	VCenterRules []VCenterRule
	VCenterRole  Role
	SessionTTL   time.Duration // default 12h
	MaxSessions  int           // default 1000 (oldest dropped beyond)
	// Login throttling. Failed attempts are refused per client address
	// (IPBurst, then one per IPEvery) and per user name and address
	// (UserBurst, then one per UserEvery). Per user name alone they are
	// never refused, only slowed: once a name has UserDelayAfter recent
	// failures from any address (one forgotten per UserEvery), every
	// attempt for it waits UserDelayBase, doubling per further failure, at
	// most UserDelayMax. So nobody can lock a user out by failing for it
	// from elsewhere, and guessing one password from many addresses is slow.
	IPBurst        int           // default 10
	IPEvery        time.Duration // default 1m
	UserBurst      int           // default 5
	UserEvery      time.Duration // default 1m
	UserDelayAfter int           // default 10
	UserDelayBase  time.Duration // default 250ms
	UserDelayMax   time.Duration // default 5s
	// Sleep waits d or until ctx ends; default: a timer of Clock.
	Sleep func(ctx context.Context, d time.Duration) error
	Hash  HashParams // default DefaultHashParams
}

// Lockout scopes.
const (
	LockoutAddress     = "address"      // a client address is refused
	LockoutUserAddress = "user-address" // a user name is refused from one address
	LockoutUser        = "user"         // a user name's attempts are slowed (never refused)
)

// Lockout is one lockout episode: reported once when it starts, not for
// every attempt it refuses.
type Lockout struct {
	Time    time.Time
	Scope   string // LockoutAddress, LockoutUserAddress or LockoutUser
	User    string // the user name tried ("" for LockoutAddress)
	Address string // the client address ("" for LockoutUser)
	// RetryAfter is how long the refused address waits; Delay is the
	// slow-down of every attempt for the user (LockoutUser).
	RetryAfter time.Duration
	Delay      time.Duration
	Failures   int // recent failures of the user (LockoutUser)
}

// RateLimitError says how long to wait before the next login attempt.
type RateLimitError struct{ RetryAfter time.Duration }

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("too many login attempts, retry in %s", e.RetryAfter.Round(time.Second))
}

// Is matches ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// Manager authenticates people and API clients. Safe for concurrent use.
type Manager struct {
	cfg      Config
	ipLim    *Limiter        // per client address
	usrLim   *Limiter        // per (user name, address)
	userFail *FailureCounter // per user name: slows, never refuses

	obsMu     sync.Mutex
	observers []func(Lockout)

	mu       sync.Mutex
	sessions map[string]*Session

	// usersMu serialises user changes so that "is this the last
	// administrator?" and the change it guards happen as one step.
	usersMu sync.Mutex
}

// NewManager returns a manager.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Clock == nil || cfg.Store == nil {
		return nil, errors.New("auth config: Clock and Store are required")
	}
	if cfg.AdminUser == "" {
		cfg.AdminUser = "admin"
	}
	if cfg.VCenterRole != "" {
		if _, err := ParseRole(string(cfg.VCenterRole)); err != nil {
			return nil, fmt.Errorf("auth config: vCenter role: %w", err)
		}
	}
	for i, r := range cfg.VCenterRules {
		if _, err := ParseRole(string(r.Role)); err != nil {
			return nil, fmt.Errorf("auth config: vCenter rule %d: %w", i, err)
		}
		if (r.User == "") == (r.Group == "") {
			return nil, fmt.Errorf("auth config: vCenter rule %d: name exactly one of a user and a group", i)
		}
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 1000
	}
	if cfg.IPBurst <= 0 {
		cfg.IPBurst = 10
	}
	if cfg.IPEvery <= 0 {
		cfg.IPEvery = time.Minute
	}
	if cfg.UserBurst <= 0 {
		cfg.UserBurst = 5
	}
	if cfg.UserEvery <= 0 {
		cfg.UserEvery = time.Minute
	}
	if cfg.UserDelayAfter <= 0 {
		cfg.UserDelayAfter = 10
	}
	if cfg.UserDelayBase <= 0 {
		cfg.UserDelayBase = 250 * time.Millisecond
	}
	if cfg.UserDelayMax <= 0 {
		cfg.UserDelayMax = 5 * time.Second
	}
	if cfg.Sleep == nil {
		clk := cfg.Clock
		cfg.Sleep = func(ctx context.Context, d time.Duration) error {
			t := clk.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C():
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if cfg.Hash == (HashParams{}) {
		cfg.Hash = DefaultHashParams
	}
	// The single administrator of earlier versions becomes a user; a short
	// local transaction, so no caller context is needed.
	if _, err := cfg.Store.MigrateAdmin(context.Background(), cfg.AdminUser, cfg.Clock.Now()); err != nil {
		return nil, err
	}
	return &Manager{
		cfg:      cfg,
		ipLim:    NewLimiter(cfg.Clock, cfg.IPBurst, cfg.IPEvery, 0),
		usrLim:   NewLimiter(cfg.Clock, cfg.UserBurst, cfg.UserEvery, 0),
		userFail: NewFailureCounter(cfg.Clock, cfg.UserEvery, 0),
		sessions: map[string]*Session{},
	}, nil
}

// AdminUser returns the local administrator's user name.
func (m *Manager) AdminUser() string { return m.cfg.AdminUser }

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// EnsureAdmin creates the administrator user at first start (no local
// user at all): with password when given, else with a generated one it
// returns (for printing once). Otherwise it changes nothing and returns "".
func (m *Manager) EnsureAdmin(ctx context.Context, password string) (generated string, err error) {
	m.usersMu.Lock()
	defer m.usersMu.Unlock()
	us, err := m.cfg.Store.Users(ctx)
	if err != nil {
		return "", fmt.Errorf("read users: %w", err)
	}
	if len(us) > 0 {
		return "", nil
	}
	if password == "" {
		password = randomString(18)
		generated = password
	}
	if err := m.putUserLocked(ctx, m.cfg.AdminUser, password, RoleAdministrator, time.Time{}, Scope{}); err != nil {
		return "", err
	}
	return generated, nil
}

// SetAdminPassword sets the password of the configured administrator user,
// creating it (administrator role) when it does not exist.
func (m *Manager) SetAdminPassword(ctx context.Context, password string) error {
	m.usersMu.Lock()
	defer m.usersMu.Unlock()
	u, err := m.cfg.Store.User(ctx, m.cfg.AdminUser)
	switch {
	case errors.Is(err, ErrNotFound):
		return m.putUserLocked(ctx, m.cfg.AdminUser, password, RoleAdministrator, time.Time{}, Scope{})
	case err != nil:
		return fmt.Errorf("read administrator: %w", err)
	}
	return m.putUserLocked(ctx, u.Username, password, u.Role, u.Created, u.Scope)
}

// MinPasswordLen is the shortest password a local user may have.
const MinPasswordLen = 8

// CheckUsername reports whether name is acceptable for a local user: 1 to 64
// characters, letters, digits and . _ - @, starting with a letter or digit.
// vCenter names (DOMAIN\user) are deliberately not local names.
func CheckUsername(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w: a user name has 1 to 64 characters", ErrBadUser)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && strings.ContainsRune("._-@", r)
		if !ok {
			return fmt.Errorf("%w: a user name has letters, digits and . _ - @ (not first)", ErrBadUser)
		}
	}
	return nil
}

// CheckPasswordRules reports whether a new password is acceptable.
func CheckPasswordRules(pw string) error {
	if len(pw) < MinPasswordLen || len(pw) > 1024 {
		return fmt.Errorf("%w: a password has %d to 1024 characters", ErrBadUser, MinPasswordLen)
	}
	return nil
}

func (m *Manager) putUserLocked(ctx context.Context, name, password string, role Role, created time.Time, scope Scope) error {
	if err := CheckPasswordRules(password); err != nil {
		return err
	}
	h, err := HashPassword(password, m.cfg.Hash)
	if err != nil {
		return err
	}
	if created.IsZero() {
		created = m.cfg.Clock.Now()
	}
	if err := m.cfg.Store.PutUser(ctx, User{Username: name, Role: role, Source: SourceLocal, Created: created, Scope: scope, Hash: h}); err != nil {
		return fmt.Errorf("store user %s: %w", name, err)
	}
	return nil
}

// Users lists the local users (without hashes), by name.
func (m *Manager) Users(ctx context.Context) ([]User, error) {
	us, err := m.cfg.Store.Users(ctx)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	for i := range us {
		us[i].Hash = ""
	}
	return us, nil
}

// CreateUser adds a local user.
func (m *Manager) CreateUser(ctx context.Context, name, password string, role Role) (User, error) {
	return m.CreateScopedUser(ctx, name, password, role, Scope{})
}

// CreateScopedUser adds a local user limited to scope (ErrBadScope: an
// invalid one, or a scope on an administrator).
func (m *Manager) CreateScopedUser(ctx context.Context, name, password string, role Role, scope Scope) (User, error) {
	if err := CheckUsername(name); err != nil {
		return User{}, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return User{}, err
	}
	scope, err := scope.Normalize()
	if err != nil {
		return User{}, err
	}
	if err := checkScopeRole(role, scope); err != nil {
		return User{}, err
	}
	m.usersMu.Lock()
	defer m.usersMu.Unlock()
	if _, err := m.cfg.Store.User(ctx, name); err == nil {
		return User{}, fmt.Errorf("user %q: %w", name, ErrUserExists)
	} else if !errors.Is(err, ErrNotFound) {
		return User{}, err
	}
	if err := m.putUserLocked(ctx, name, password, role, time.Time{}, scope); err != nil {
		return User{}, err
	}
	u, err := m.cfg.Store.User(ctx, name)
	u.Hash = ""
	return u, err
}

// ImportUser recreates a user of a saved configuration: a local user with
// its role and no password (PasswordNotSet: it cannot sign in until an
// administrator sets one with UpdateUser), or a vCenter user as it was
// stored (vCenter checks its password). A name that exists already
// (without case) is left as it is: ErrUserExists.
func (m *Manager) ImportUser(ctx context.Context, name string, role Role, source string) (User, error) {
	return m.ImportScopedUser(ctx, name, role, source, Scope{})
}

// ImportScopedUser is ImportUser for a user saved with a scope.
func (m *Manager) ImportScopedUser(ctx context.Context, name string, role Role, source string, scope Scope) (User, error) {
	scope, err := scope.Normalize()
	if err != nil {
		return User{}, err
	}
	if err := checkScopeRole(role, scope); err != nil {
		return User{}, err
	}
	if source != SourceLocal && source != SourceVCenter {
		return User{}, fmt.Errorf("%w: source %q (local, vcenter)", ErrBadUser, source)
	}
	if err := CheckImportedName(name); err != nil {
		return User{}, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return User{}, err
	}
	m.usersMu.Lock()
	defer m.usersMu.Unlock()
	if u, err := m.cfg.Store.User(ctx, name); err == nil {
		u.Hash = ""
		return u, fmt.Errorf("user %q: %w", u.Username, ErrUserExists)
	} else if !errors.Is(err, ErrNotFound) {
		return User{}, err
	}
	u := User{Username: name, Role: role, Source: source, Created: m.cfg.Clock.Now(), PasswordNotSet: source == SourceLocal, Scope: scope}
	if err := m.cfg.Store.PutUser(ctx, u); err != nil {
		return User{}, fmt.Errorf("store user %s: %w", name, err)
	}
	return u, nil
}

// CheckImportedName accepts the name of a saved user as ImportUser
// recreates it: looser than CheckUsername, since the saved appliance had
// it (its configured administrator's name, a vCenter "DOMAIN\name"), but
// one the API can name in a path: 1 to 128 bytes, no control character,
// no slash, no leading or trailing space.
func CheckImportedName(name string) error {
	if name == "" || len(name) > 128 || strings.TrimSpace(name) != name {
		return fmt.Errorf("%w: a user name has 1 to 128 bytes, no leading or trailing space", ErrBadUser)
	}
	if strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == '/' }) {
		return fmt.Errorf("%w: a user name has no control character or slash", ErrBadUser)
	}
	return nil
}

// UserChange is what UpdateUser changes; nil fields stay.
type UserChange struct {
	Role     *Role
	Password *string
	Scope    *Scope // an empty one removes the user's scope
}

// UpdateUser changes a local user's role, password and/or scope. Demoting the last
// administrator is refused (ErrLastAdministrator). The user's live sessions
// take the new role at once; a new password ends the user's other sessions
// (keepSession, the caller's own, survives).
func (m *Manager) UpdateUser(ctx context.Context, name string, ch UserChange, keepSession string) (User, error) {
	if ch.Role != nil {
		if _, err := ParseRole(string(*ch.Role)); err != nil {
			return User{}, err
		}
	}
	if ch.Password != nil {
		if err := CheckPasswordRules(*ch.Password); err != nil {
			return User{}, err
		}
	}
	if ch.Scope != nil {
		sc, err := ch.Scope.Normalize()
		if err != nil {
			return User{}, err
		}
		ch.Scope = &sc
	}
	m.usersMu.Lock()
	defer m.usersMu.Unlock()
	u, err := m.cfg.Store.User(ctx, name)
	if err != nil {
		return User{}, err
	}
	{
		role, sc := u.Role, u.Scope
		if ch.Role != nil {
			role = *ch.Role
		}
		if ch.Scope != nil {
			sc = *ch.Scope
		}
		if err := checkScopeRole(role, sc); err != nil {
			return User{}, err
		}
	}
	if ch.Password != nil && u.Source == SourceVCenter {
		return User{}, fmt.Errorf("%w: %s is a vCenter user: vCenter checks its password", ErrBadUser, u.Username)
	}
	if ch.Role != nil && u.Role == RoleAdministrator && *ch.Role != RoleAdministrator {
		if err := m.otherAdminLocked(ctx, u.Username); err != nil {
			return User{}, err
		}
	}
	if ch.Role != nil {
		u.Role = *ch.Role
	}
	if ch.Scope != nil {
		u.Scope = *ch.Scope
	}
	if ch.Password != nil {
		h, err := HashPassword(*ch.Password, m.cfg.Hash)
		if err != nil {
			return User{}, err
		}
		u.Hash = h
		u.PasswordNotSet = false
	}
	if err := m.cfg.Store.PutUser(ctx, u); err != nil {
		return User{}, fmt.Errorf("store user %s: %w", name, err)
	}
	m.mu.Lock()
	for id, s := range m.sessions {
		if !strings.EqualFold(s.User, u.Username) {
			continue
		}
		if s.Source == SourceVCenter && u.Source == SourceVCenter {
			s.Scope = u.Scope // vCenter's rules give its role, the record its scope
			continue
		}
		if s.Source != SourceLocal {
			continue
		}
		if ch.Password != nil && id != keepSession {
			delete(m.sessions, id)
			continue
		}
		s.Role = u.Role
		s.Scope = u.Scope
	}
	m.mu.Unlock()
	u.Hash = ""
	return u, nil
}

// otherAdminLocked returns ErrLastAdministrator unless a local
// administrator other than name exists who can sign in (one whose password
// is not set yet could not manage the appliance either).
func (m *Manager) otherAdminLocked(ctx context.Context, name string) error {
	us, err := m.cfg.Store.Users(ctx)
	if err != nil {
		return fmt.Errorf("list users: %w", err)
	}
	for _, o := range us {
		if o.Role == RoleAdministrator && o.usable() && !strings.EqualFold(o.Username, name) {
			return nil
		}
	}
	return fmt.Errorf("user %s: %w", name, ErrLastAdministrator)
}

// DeleteUser removes a local user, ends its sessions and revokes the API
// tokens it created. Deleting the last administrator is refused.
func (m *Manager) DeleteUser(ctx context.Context, name string) error {
	m.usersMu.Lock()
	defer m.usersMu.Unlock()
	u, err := m.cfg.Store.User(ctx, name)
	if err != nil {
		return err
	}
	if u.Role == RoleAdministrator {
		if err := m.otherAdminLocked(ctx, u.Username); err != nil {
			return err
		}
	}
	if err := m.cfg.Store.DeleteUser(ctx, u.Username); err != nil {
		return err
	}
	m.mu.Lock()
	for id, s := range m.sessions {
		if s.Source == SourceLocal && strings.EqualFold(s.User, u.Username) {
			delete(m.sessions, id)
		}
	}
	m.mu.Unlock()
	toks, err := m.cfg.Store.Tokens(ctx)
	if err != nil {
		return fmt.Errorf("user %s deleted; list its tokens: %w", u.Username, err)
	}
	for _, t := range toks {
		if strings.EqualFold(t.Owner, u.Username) {
			if err := m.cfg.Store.DeleteToken(ctx, t.ID); err != nil && !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("user %s deleted; revoke token %s: %w", u.Username, t.ID, err)
			}
		}
	}
	return nil
}

// OnLockout adds fn to the functions called at the start of every lockout
// episode (events, metrics, logs). fn runs on the login's goroutine and
// must not block for long.
func (m *Manager) OnLockout(fn func(Lockout)) {
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	m.observers = append(m.observers, fn)
}

func (m *Manager) lockout(l Lockout) {
	l.Time = m.cfg.Clock.Now()
	m.obsMu.Lock()
	obs := append([]func(Lockout){}, m.observers...)
	m.obsMu.Unlock()
	for _, fn := range obs {
		fn(l)
	}
}

// UserDelay is the wait every login attempt for user has now.
func (m *Manager) UserDelay(user string) time.Duration {
	return m.userDelay(m.userFail.Count(strings.ToLower(user)))
}

func (m *Manager) userDelay(failures float64) time.Duration {
	over := int(failures) - m.cfg.UserDelayAfter
	if over < 0 {
		return 0
	}
	d := m.cfg.UserDelayBase
	for range min(over, 32) {
		if d >= m.cfg.UserDelayMax {
			break
		}
		d *= 2
	}
	return min(d, m.cfg.UserDelayMax)
}

// Login checks credentials (local users first, then vCenter) and opens a
// session. An attempt takes a token from its address's bucket and from
// its (user name, address) bucket before the password is checked (so
// parallel guesses cannot outrun the limit); a successful one, or one
// vCenter could not answer, gives them back. Per user name alone attempts
// are only slowed, never refused: a correct password from an address that
// has not failed always gets in.
func (m *Manager) Login(ctx context.Context, clientIP, user, password string) (Session, error) {
	userKey := strings.ToLower(user)
	uaKey := userKey + "\x00" + clientIP
	ok, wait, first := m.ipLim.take(clientIP)
	if !ok {
		if first {
			m.lockout(Lockout{Scope: LockoutAddress, Address: clientIP, RetryAfter: wait})
		}
		return Session{}, &RateLimitError{RetryAfter: wait}
	}
	ok, wait, first = m.usrLim.take(uaKey)
	if !ok {
		m.ipLim.Refund(clientIP) // this attempt checked nothing
		if first {
			m.lockout(Lockout{Scope: LockoutUserAddress, User: user, Address: clientIP, RetryAfter: wait})
		}
		return Session{}, &RateLimitError{RetryAfter: wait}
	}
	refund := func() {
		m.ipLim.Refund(clientIP)
		m.usrLim.Refund(uaKey)
	}
	if d := m.userDelay(m.userFail.Count(userKey)); d > 0 {
		if err := m.cfg.Sleep(ctx, d); err != nil {
			refund()
			return Session{}, err
		}
	}
	var name, source string
	var role Role
	var scope Scope
	err := ErrBadCredentials
	if user != "" && password != "" {
		name, source, role, scope, err = m.check(ctx, user, password)
	}
	if err != nil {
		if errors.Is(err, ErrBadCredentials) {
			n, crossed := m.userFail.Add(userKey, float64(m.cfg.UserDelayAfter))
			if crossed {
				m.lockout(Lockout{Scope: LockoutUser, User: user, Failures: int(n), Delay: m.userDelay(n)})
			}
			if m.passwordsPending(ctx) {
				err = fmt.Errorf("%w; %w", ErrBadCredentials, ErrPasswordNotSet)
			}
		} else {
			refund()
		}
		return Session{}, err
	}
	refund()
	s := &Session{ID: randomString(32), CSRF: randomString(32), User: name, Source: source, Role: role, Scope: scope, Expires: m.cfg.Clock.Now().Add(m.cfg.SessionTTL)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	m.sessions[s.ID] = s
	return *s, nil
}

// passwordsPending reports whether a local user waits for its password
// (a failed read says no: it only decides a hint).
func (m *Manager) passwordsPending(ctx context.Context) bool {
	us, err := m.cfg.Store.Users(ctx)
	if err != nil {
		return false
	}
	for _, u := range us {
		if u.local() && u.PasswordNotSet {
			return true
		}
	}
	return false
}

// check returns the user's canonical name, source and role. A local user's
// name never falls through to vCenter: a wrong local password is a wrong
// password, not a vCenter login attempt. A local user without a password
// (PasswordNotSet, or no hash at all) is refused like a wrong password,
// whatever was typed: no hash is ever compared for it. A stored vCenter
// user is checked by vCenter as a name the store does not know (its role
// comes from the rules, not from the stored record).
func (m *Manager) check(ctx context.Context, user, password string) (string, string, Role, Scope, error) {
	name, source, role, stored, err := m.check1(ctx, user, password)
	if err != nil {
		return "", "", "", Scope{}, err
	}
	if stored != nil {
		return name, source, role, stored.Scope, nil
	}
	// A vCenter user is scoped by a stored record of its name, if any.
	if source == SourceVCenter {
		if u, err := m.cfg.Store.User(ctx, name); err == nil && u.Source == SourceVCenter {
			if err := checkScopeRole(role, u.Scope); err != nil {
				return "", "", "", Scope{}, fmt.Errorf("%w: vCenter user %s: %v", ErrForbidden, name, err)
			}
			return name, source, role, u.Scope, nil
		} else if err != nil && !errors.Is(err, ErrNotFound) {
			return "", "", "", Scope{}, fmt.Errorf("read user: %w", err)
		}
	}
	return name, source, role, Scope{}, nil
}

// check1 is check without the scope: the stored local user it signed in, if so.
func (m *Manager) check1(ctx context.Context, user, password string) (string, string, Role, *User, error) {
	u, err := m.cfg.Store.User(ctx, user)
	switch {
	case err == nil && u.Source == SourceVCenter:
		// vCenter checks it below; its role comes from the rules
	case err == nil && !u.usable():
		return "", "", "", nil, ErrBadCredentials
	case err == nil:
		ok, err := CheckPassword(u.Hash, password)
		if err != nil {
			return "", "", "", nil, fmt.Errorf("password hash of %s: %w", u.Username, err)
		}
		if ok {
			return u.Username, SourceLocal, u.Role, &u, nil
		}
		return "", "", "", nil, ErrBadCredentials
	case !errors.Is(err, ErrNotFound):
		return "", "", "", nil, fmt.Errorf("read user: %w", err)
	}
	var vu VCenterUser
	switch {
	case m.cfg.VCenterLogin != nil:
		vu, err = m.cfg.VCenterLogin(ctx, user, password, m.hasGroupRules())
	case m.cfg.VerifyVCenter != nil:
		err = m.cfg.VerifyVCenter(ctx, user, password)
	default:
		return "", "", "", nil, ErrBadCredentials
	}
	if err != nil {
		if errors.Is(err, ErrBadCredentials) {
			return "", "", "", nil, ErrBadCredentials
		}
		return "", "", "", nil, fmt.Errorf("%w: %v", ErrVCenterUnavailable, err)
	}
	if vu.Name == "" {
		vu.Name = user
	}
	role, err := m.vcenterRole(vu, user)
	if err != nil {
		return "", "", "", nil, err
	}
	return vu.Name, SourceVCenter, role, nil, nil
}

func (m *Manager) pruneLocked() {
	now := m.cfg.Clock.Now()
	var oldest *Session
	for id, s := range m.sessions {
		if !now.Before(s.Expires) {
			delete(m.sessions, id)
			continue
		}
		if oldest == nil || s.Expires.Before(oldest.Expires) {
			oldest = s
		}
	}
	if len(m.sessions) >= m.cfg.MaxSessions && oldest != nil {
		delete(m.sessions, oldest.ID)
	}
}

// Session returns the principal of a live session.
func (m *Manager) Session(id string) (Principal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return Principal{}, ErrUnauthenticated
	}
	if !m.cfg.Clock.Now().Before(s.Expires) {
		delete(m.sessions, id)
		return Principal{}, ErrUnauthenticated
	}
	return Principal{User: s.User, Source: s.Source, Role: s.Role, Method: "session", Session: s.ID, CSRF: s.CSRF, Scopes: scopes(s.Scope)}, nil
}

// Logout ends a session (unknown ids are ignored).
func (m *Manager) Logout(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, id)
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// tokenPrefix marks vmvault tokens so secret scanners can find leaked ones.
const tokenPrefix = "vmv_"

// MaxTokenTTL is the longest lifetime a token may be given: ten years.
// Beyond it a lifetime is refused, not clamped, so that an overflowing
// value can never wrap round into "never expires".
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// CreateToken creates an API token for owner with at most owner's role and
// returns its secret, which is never stored and cannot be shown again.
// ttl == 0 means it does not expire; ttl < 0 or > MaxTokenTTL is refused
// (ErrBadTTL).
func (m *Manager) CreateToken(ctx context.Context, owner Principal, name string, role Role, ttl time.Duration) (string, Token, error) {
	return m.CreateScopedToken(ctx, owner, name, role, ttl, Scope{})
}

// CreateScopedToken is CreateToken with a scope for the token (on top of
// its owner's, which still applies at every use). A scope on an
// administrator token is refused (ErrBadScope).
func (m *Manager) CreateScopedToken(ctx context.Context, owner Principal, name string, role Role, ttl time.Duration, scope Scope) (string, Token, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return "", Token{}, err
	}
	scope, err := scope.Normalize()
	if err != nil {
		return "", Token{}, err
	}
	if err := checkScopeRole(role, scope); err != nil {
		return "", Token{}, err
	}
	if ttl < 0 || ttl > MaxTokenTTL {
		return "", Token{}, fmt.Errorf("%w: %s is not from 0 (never expires) to %s", ErrBadTTL, ttl, MaxTokenTTL)
	}
	if !owner.Role.Allows(role) {
		return "", Token{}, fmt.Errorf("%w: a %s cannot create a %s token", ErrForbidden, owner.Role, role)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", Token{}, err
	}
	secret := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	now := m.cfg.Clock.Now()
	t := Token{ID: randomString(9), Name: name, Role: role, Owner: owner.User, Hash: hashSecret(secret), Created: now, Scope: scope}
	if ttl > 0 {
		t.Expires = now.Add(ttl)
	}
	if err := m.cfg.Store.PutToken(ctx, t); err != nil {
		return "", Token{}, fmt.Errorf("store token: %w", err)
	}
	return secret, t, nil
}

// AuthenticateToken returns the principal of a bearer token.
func (m *Manager) AuthenticateToken(ctx context.Context, secret string) (Principal, error) {
	if !strings.HasPrefix(secret, tokenPrefix) || len(secret) > 100 {
		return Principal{}, ErrUnauthenticated
	}
	h := hashSecret(secret)
	t, err := m.cfg.Store.TokenByHash(ctx, h)
	if errors.Is(err, ErrNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("look up token: %w", err)
	}
	// The store looked it up by hash; compare again in constant time so a
	// store that matches loosely cannot let a wrong secret through.
	if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(h)) != 1 {
		return Principal{}, ErrUnauthenticated
	}
	if !t.Expires.IsZero() && !m.cfg.Clock.Now().Before(t.Expires) {
		return Principal{}, ErrUnauthenticated
	}
	role := t.Role
	sc := []Scope{t.Scope}
	// A token never outranks its local owner's current role (a demoted
	// user's tokens are demoted with it), and its owner's scope binds it.
	u, err := m.cfg.Store.User(ctx, t.Owner)
	switch {
	case err == nil:
		if !u.Role.Allows(role) {
			role = u.Role
		}
		sc = append(sc, u.Scope)
	case !errors.Is(err, ErrNotFound):
		return Principal{}, fmt.Errorf("look up token owner: %w", err)
	}
	return Principal{User: t.Owner, Role: role, Method: "token", TokenID: t.ID, Scopes: scopes(sc...)}, nil
}

// Tokens lists the stored tokens (without secrets).
func (m *Manager) Tokens(ctx context.Context) ([]Token, error) { return m.cfg.Store.Tokens(ctx) }

// SetTokenScope replaces a token's scope (an empty one removes it).
func (m *Manager) SetTokenScope(ctx context.Context, id string, scope Scope) (Token, error) {
	scope, err := scope.Normalize()
	if err != nil {
		return Token{}, err
	}
	m.usersMu.Lock() // serialises token changes too
	defer m.usersMu.Unlock()
	ts, err := m.cfg.Store.Tokens(ctx)
	if err != nil {
		return Token{}, fmt.Errorf("list tokens: %w", err)
	}
	for _, t := range ts {
		if t.ID != id {
			continue
		}
		if err := checkScopeRole(t.Role, scope); err != nil {
			return Token{}, err
		}
		t.Scope = scope
		if err := m.cfg.Store.PutToken(ctx, t); err != nil {
			return Token{}, fmt.Errorf("store token: %w", err)
		}
		return t, nil
	}
	return Token{}, fmt.Errorf("token %s: %w", id, ErrNotFound)
}

// DeleteToken revokes a token.
func (m *Manager) DeleteToken(ctx context.Context, id string) error {
	return m.cfg.Store.DeleteToken(ctx, id)
}
