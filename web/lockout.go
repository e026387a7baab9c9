package web

import (
	"context"
	"fmt"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
)

// EventLoginLockout is the kind of the event recorded when a login lockout
// episode starts (an address refused, a user refused from one address, a
// user's attempts slowed).
const EventLoginLockout = "auth.lockout"

// EventRecorder stores events; internal/state.DB implements it. When
// Config.Events implements it too, login lockouts are recorded there.
type EventRecorder interface {
	AddEvent(ctx context.Context, e policy.Event) error
}

// observeLockout turns a lockout into a metric, a log line, an event in
// the event log and on /stream. The address and user name are what the
// client sent: no password or secret is in a lockout.
func (s *Server) observeLockout(l auth.Lockout) {
	s.metrics.lockouts.WithLabelValues(l.Scope).Inc()
	e := policy.Event{Time: l.Time, Severity: policy.SeverityWarning, Kind: EventLoginLockout}
	switch l.Scope {
	case auth.LockoutAddress:
		e.Subject = l.Address
		e.Message = fmt.Sprintf("logins from %s refused for %s: too many failed attempts from that address", l.Address, l.RetryAfter.Round(time.Second))
	case auth.LockoutUserAddress:
		e.Subject = l.User
		e.Message = fmt.Sprintf("logins as %q from %s refused for %s: too many wrong passwords from that address", l.User, l.Address, l.RetryAfter.Round(time.Second))
	default:
		e.Subject = l.User
		e.Message = fmt.Sprintf("%d recent failed logins as %q from any address: each attempt for it now waits %s, growing to a bound; it is slowed, not locked", l.Failures, l.User, l.Delay)
	}
	s.cfg.Logger.Warn("login lockout", "scope", l.Scope, "user", l.User, "address", l.Address, "retryAfter", l.RetryAfter, "delay", l.Delay)
	if rec, ok := s.cfg.Events.(EventRecorder); ok {
		// A short local write, detached from the failing request so that a
		// client hanging up cannot keep the event out.
		if err := rec.AddEvent(context.Background(), e); err != nil {
			s.cfg.Logger.Error("record lockout event", "err", err)
		}
	}
	s.metrics.observe(e)
	s.hub.publish(e)
}
