package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// lockoutRig is a manager with the default limits, a recorded sleep
// instead of a real one, and the lockouts it reports.
type lockoutRig struct {
	m *Manager

	mu       sync.Mutex
	delays   []time.Duration
	lockouts []Lockout
}

func newLockoutRig(t *testing.T, mod func(*Config)) *lockoutRig {
	t.Helper()
	r := &lockoutRig{}
	r.m, _ = newManager(t, func(c *Config) {
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.delays = append(r.delays, d)
			return nil
		}
		if mod != nil {
			mod(c)
		}
	})
	r.m.OnLockout(func(l Lockout) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lockouts = append(r.lockouts, l)
	})
	if _, err := r.m.EnsureAdmin(context.Background(), "a-good-password"); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *lockoutRig) scopes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, l := range r.lockouts {
		out[l.Scope]++
	}
	return out
}

// The audit's reproduction: 30 wrong passwords for the administrator
// (here from one address, then 30 more spread over ten others) must not
// keep the right password out from an address that has not failed. It
// gets in, after at most the bounded per-user delay.
func TestLoginNoLockoutOfUser(t *testing.T) {
	r := newLockoutRig(t, nil)
	ctx := context.Background()
	var limited, bad int
	for range 30 {
		_, err := r.m.Login(ctx, "198.51.100.1", "admin", "wrong-password")
		switch {
		case errors.Is(err, ErrRateLimited):
			limited++
		case errors.Is(err, ErrBadCredentials):
			bad++
		default:
			t.Fatalf("attacker attempt: %v", err)
		}
	}
	if bad != 5 || limited != 25 {
		t.Fatalf("one address: %d checked, %d refused; want 5 and 25 (per user and address)", bad, limited)
	}
	if _, err := r.m.Login(ctx, "203.0.113.7", "admin", "a-good-password"); err != nil {
		t.Fatalf("right password from a clean address after 30 wrong ones elsewhere: %v", err)
	}
	for i := range 30 {
		if _, err := r.m.Login(ctx, fmt.Sprintf("198.51.100.%d", 10+i%10), "ADMIN", "wrong-password"); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("spread attempt %d: %v", i, err)
		}
	}
	r.mu.Lock()
	r.delays = nil
	r.mu.Unlock()
	for i := range 3 {
		if _, err := r.m.Login(ctx, fmt.Sprintf("203.0.113.%d", 20+i), "admin", "a-good-password"); err != nil {
			t.Fatalf("right password from a clean address after 60 failures: %v", err)
		}
	}
	r.mu.Lock()
	delays := r.delays
	r.mu.Unlock()
	if len(delays) != 3 {
		t.Fatalf("delays %v: the user under attack must be slowed", delays)
	}
	for _, d := range delays {
		if d <= 0 || d > r.m.cfg.UserDelayMax {
			t.Fatalf("delay %v outside (0, %v]", d, r.m.cfg.UserDelayMax)
		}
	}
	if sc := r.scopes(); sc[LockoutUserAddress] != 1 || sc[LockoutUser] != 1 || sc[LockoutAddress] != 0 {
		t.Fatalf("lockout events %v: want one user-address (198.51.100.1) and one user slow-down", sc)
	}
	r.mu.Lock()
	l := r.lockouts[0]
	r.mu.Unlock()
	if l.Scope != LockoutUserAddress || l.User != "admin" || l.Address != "198.51.100.1" || l.RetryAfter <= 0 || l.Time.IsZero() {
		t.Fatalf("first lockout %+v", l)
	}
}

// The per-user delay grows with the failures and stops at UserDelayMax;
// it decays as failures are forgotten.
func TestLoginUserDelayGrowsBounded(t *testing.T) {
	r := newLockoutRig(t, nil)
	ctx := context.Background()
	var prev time.Duration
	for i := range 40 {
		want := r.m.UserDelay("admin")
		if want < prev {
			t.Fatalf("attempt %d: delay shrank %v -> %v", i, prev, want)
		}
		if i < r.m.cfg.UserDelayAfter && want != 0 {
			t.Fatalf("attempt %d: delay %v before the threshold", i, want)
		}
		prev = want
		if _, err := r.m.Login(ctx, fmt.Sprintf("10.1.%d.1", i), "admin", "wrong-password"); !errors.Is(err, ErrBadCredentials) {
			t.Fatal(err)
		}
	}
	if prev != r.m.cfg.UserDelayMax {
		t.Fatalf("after 40 failures the delay is %v, want the bound %v", prev, r.m.cfg.UserDelayMax)
	}
	if r.m.userDelay(float64(r.m.cfg.UserDelayAfter)) != r.m.cfg.UserDelayBase || r.m.userDelay(float64(r.m.cfg.UserDelayAfter+1)) != 2*r.m.cfg.UserDelayBase {
		t.Fatal("delay does not start at UserDelayBase and double")
	}
	if d := r.m.userDelay(1e18); d != r.m.cfg.UserDelayMax {
		t.Fatalf("huge failure count: %v", d)
	}
	r.m.cfg.Clock.(interface{ Advance(time.Duration) }).Advance(time.Hour)
	if d := r.m.UserDelay("admin"); d != 0 {
		t.Fatalf("an hour later the delay is %v", d)
	}
}

// Per address: the address is refused whatever the user name, other
// addresses are not; successful logins do not use up the address.
func TestLoginPerAddress(t *testing.T) {
	r := newLockoutRig(t, nil)
	ctx := context.Background()
	for i := range 20 {
		if _, err := r.m.Login(ctx, "192.0.2.50", "admin", "a-good-password"); err != nil {
			t.Fatalf("success %d from one address: %v", i, err)
		}
	}
	for i := range 10 {
		if _, err := r.m.Login(ctx, "192.0.2.1", fmt.Sprintf("user%d", i), "x-password"); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	_, err := r.m.Login(ctx, "192.0.2.1", "admin", "a-good-password")
	var rl *RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter <= 0 {
		t.Fatalf("exhausted address with the right password: %v", err)
	}
	if _, err := r.m.Login(ctx, "192.0.2.1", "other", "x"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("exhausted address, another name: %v", err)
	}
	if _, err := r.m.Login(ctx, "192.0.2.2", "admin", "a-good-password"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	if sc := r.scopes(); sc[LockoutAddress] != 1 {
		t.Fatalf("lockouts %v: want one address lockout for two refusals", sc)
	}
	r.m.cfg.Clock.(interface{ Advance(time.Duration) }).Advance(time.Minute)
	if _, err := r.m.Login(ctx, "192.0.2.1", "admin", "a-good-password"); err != nil {
		t.Fatalf("after a refill: %v", err)
	}
	// A new episode is a new event.
	for range 10 {
		_, _ = r.m.Login(ctx, "192.0.2.1", "nobody", "x")
	}
	if sc := r.scopes(); sc[LockoutAddress] != 2 {
		t.Fatalf("lockouts %v: want a second address episode", sc)
	}
}

// Per (user, address): the address that failed for a user is refused for
// that user, even with the right password, while it may still try other
// names; parallel guesses cannot outrun the limit.
func TestLoginPerUserAddress(t *testing.T) {
	r := newLockoutRig(t, func(c *Config) { c.IPBurst = 1000 })
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	checked := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.m.Login(ctx, "192.0.2.9", "admin", "wrong-password")
			if errors.Is(err, ErrBadCredentials) {
				mu.Lock()
				checked++
				mu.Unlock()
			} else if !errors.Is(err, ErrRateLimited) {
				t.Errorf("parallel guess: %v", err)
			}
		}()
	}
	wg.Wait()
	if checked != r.m.cfg.UserBurst {
		t.Fatalf("%d of 50 parallel guesses were checked, want %d", checked, r.m.cfg.UserBurst)
	}
	if _, err := r.m.Login(ctx, "192.0.2.9", "admin", "a-good-password"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("right password from the address that failed: %v", err)
	}
	if _, err := r.m.CreateUser(ctx, "bob", "bob-password", RoleOperator); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Login(ctx, "192.0.2.9", "bob", "bob-password"); err != nil {
		t.Fatalf("another user from that address: %v", err)
	}
	if _, err := r.m.Login(ctx, "192.0.2.10", "admin", "a-good-password"); err != nil {
		t.Fatalf("the user from another address: %v", err)
	}
	if sc := r.scopes(); sc[LockoutUserAddress] != 1 {
		t.Fatalf("lockouts %v: want one user-address episode", sc)
	}
}

// vCenter not answering is not the user's failure: it neither uses up
// the limits nor counts towards the per-user delay.
func TestLoginVCenterDownNotCounted(t *testing.T) {
	r := newLockoutRig(t, func(c *Config) {
		c.VerifyVCenter = func(ctx context.Context, user, pw string) error { return errors.New("connection refused") }
		c.VCenterRole = RoleOperator
	})
	ctx := context.Background()
	for i := range 30 {
		if _, err := r.m.Login(ctx, "192.0.2.77", "vsphere.local\\carol", "pw"); !errors.Is(err, ErrVCenterUnavailable) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if d := r.m.UserDelay("vsphere.local\\carol"); d != 0 {
		t.Fatalf("delay %v", d)
	}
}
