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
}

// Store persists the administrator's hash and API tokens. Implementations
// are safe for concurrent use.
type Store interface {
	AdminHash(ctx context.Context) (string, error) // "" when none is set
	SetAdminHash(ctx context.Context, hash string) error
	PutToken(ctx context.Context, t Token) error
	// TokenByHash returns the token with that hex SHA-256, or ErrNotFound.
	TokenByHash(ctx context.Context, hash string) (Token, error)
	Tokens(ctx context.Context) ([]Token, error)
	DeleteToken(ctx context.Context, id string) error // ErrNotFound when unknown
}

// Principal is who made a request.
type Principal struct {
	User    string `json:"user"`
	Role    Role   `json:"role"`
	Method  string `json:"method"` // "session" or "token"
	Session string `json:"-"`      // session id (cookie sessions)
	CSRF    string `json:"-"`      // the session's CSRF token
	TokenID string `json:"tokenId,omitempty"`
}

// Session is a browser session.
type Session struct {
	ID      string
	CSRF    string
	User    string
	Role    Role
	Expires time.Time
}

// Config wires a Manager. Clock and Store are required.
type Config struct {
	Clock     clock.Clock
	Store     Store
	AdminUser string // the local administrator's name; default "admin"
	// VerifyVCenter checks vCenter credentials; nil disables vCenter logins.
	// It returns nil for valid credentials, an error wrapping
	// ErrBadCredentials for wrong ones, any other error when vCenter could
	// not answer.
	VerifyVCenter func(ctx context.Context, user, password string) error
	VCenterRole   Role          // role of vCenter users; default administrator
	SessionTTL    time.Duration // default 12h
	MaxSessions   int           // default 1000 (oldest dropped beyond)
	// Login rate limits: a burst of attempts, then one per interval.
	IPBurst   int           // default 10
	IPEvery   time.Duration // default 1m
	UserBurst int           // default 5
	UserEvery time.Duration // default 1m
	Hash      HashParams    // default DefaultHashParams
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
	cfg    Config
	ipLim  *Limiter
	usrLim *Limiter

	mu       sync.Mutex
	sessions map[string]*Session
}

// NewManager returns a manager.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Clock == nil || cfg.Store == nil {
		return nil, errors.New("auth config: Clock and Store are required")
	}
	if cfg.AdminUser == "" {
		cfg.AdminUser = "admin"
	}
	if cfg.VCenterRole == "" {
		cfg.VCenterRole = RoleAdministrator
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
	if cfg.Hash == (HashParams{}) {
		cfg.Hash = DefaultHashParams
	}
	return &Manager{
		cfg:      cfg,
		ipLim:    NewLimiter(cfg.Clock, cfg.IPBurst, cfg.IPEvery, 0),
		usrLim:   NewLimiter(cfg.Clock, cfg.UserBurst, cfg.UserEvery, 0),
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

// EnsureAdmin sets the administrator's password at first start: to
// password when given, else to a generated one it returns (for printing
// once). When a hash is already stored it changes nothing and returns "".
func (m *Manager) EnsureAdmin(ctx context.Context, password string) (generated string, err error) {
	h, err := m.cfg.Store.AdminHash(ctx)
	if err != nil {
		return "", fmt.Errorf("read admin password: %w", err)
	}
	if h != "" {
		return "", nil
	}
	if password == "" {
		password = randomString(18)
		generated = password
	}
	if err := m.SetAdminPassword(ctx, password); err != nil {
		return "", err
	}
	return generated, nil
}

// SetAdminPassword replaces the administrator's password.
func (m *Manager) SetAdminPassword(ctx context.Context, password string) error {
	if len(password) < 8 {
		return errors.New("administrator password must have at least 8 characters")
	}
	h, err := HashPassword(password, m.cfg.Hash)
	if err != nil {
		return err
	}
	if err := m.cfg.Store.SetAdminHash(ctx, h); err != nil {
		return fmt.Errorf("store admin password: %w", err)
	}
	return nil
}

// Login checks credentials (the local administrator first, then vCenter)
// and opens a session. Every attempt costs a token from the client's and
// the username's bucket, so guessing is slow whichever one varies.
func (m *Manager) Login(ctx context.Context, clientIP, user, password string) (Session, error) {
	userKey := strings.ToLower(user)
	okIP, waitIP := m.ipLim.Allow(clientIP)
	okUser, waitUser := m.usrLim.Allow(userKey)
	if !okIP || !okUser {
		return Session{}, &RateLimitError{RetryAfter: max(waitIP, waitUser)}
	}
	if user == "" || password == "" {
		return Session{}, ErrBadCredentials
	}
	role, err := m.check(ctx, user, password)
	if err != nil {
		return Session{}, err
	}
	s := &Session{ID: randomString(32), CSRF: randomString(32), User: user, Role: role, Expires: m.cfg.Clock.Now().Add(m.cfg.SessionTTL)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	m.sessions[s.ID] = s
	return *s, nil
}

func (m *Manager) check(ctx context.Context, user, password string) (Role, error) {
	if user == m.cfg.AdminUser {
		h, err := m.cfg.Store.AdminHash(ctx)
		if err != nil {
			return "", fmt.Errorf("read admin password: %w", err)
		}
		if h != "" {
			ok, err := CheckPassword(h, password)
			if err != nil {
				return "", fmt.Errorf("admin password hash: %w", err)
			}
			if ok {
				return RoleAdministrator, nil
			}
			return "", ErrBadCredentials
		}
	}
	if m.cfg.VerifyVCenter == nil {
		return "", ErrBadCredentials
	}
	if err := m.cfg.VerifyVCenter(ctx, user, password); err != nil {
		if errors.Is(err, ErrBadCredentials) {
			return "", ErrBadCredentials
		}
		return "", fmt.Errorf("%w: %v", ErrVCenterUnavailable, err)
	}
	return m.cfg.VCenterRole, nil
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
	return Principal{User: s.User, Role: s.Role, Method: "session", Session: s.ID, CSRF: s.CSRF}, nil
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

// CreateToken creates an API token for owner with at most owner's role and
// returns its secret, which is never stored and cannot be shown again.
// ttl <= 0 means it does not expire.
func (m *Manager) CreateToken(ctx context.Context, owner Principal, name string, role Role, ttl time.Duration) (string, Token, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return "", Token{}, err
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
	t := Token{ID: randomString(9), Name: name, Role: role, Owner: owner.User, Hash: hashSecret(secret), Created: now}
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
	return Principal{User: t.Owner, Role: t.Role, Method: "token", TokenID: t.ID}, nil
}

// Tokens lists the stored tokens (without secrets).
func (m *Manager) Tokens(ctx context.Context) ([]Token, error) { return m.cfg.Store.Tokens(ctx) }

// DeleteToken revokes a token.
func (m *Manager) DeleteToken(ctx context.Context, id string) error {
	return m.cfg.Store.DeleteToken(ctx, id)
}
