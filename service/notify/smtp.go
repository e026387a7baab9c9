package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
)

// The SMTP client is the standard library's net/smtp: it lets the sender
// check the server's extensions itself before STARTTLS (so "STARTTLS
// required but not offered" is refused before any credential or message
// leaves), its PlainAuth refuses to authenticate over an unencrypted
// connection to anything but localhost (a second guard), and its replies are
// *textproto.Error values whose codes separate transient 4xx failures from
// permanent 5xx ones. Deadlines and cancellation come from the connection,
// which the sender dials itself. LOGIN, which net/smtp lacks, is below.

// TLSMode says how the connection to the SMTP server is encrypted.
type TLSMode string

// TLS modes.
const (
	TLSStartTLS TLSMode = "starttls" // plain connect, then STARTTLS, required (default; port 587)
	TLSImplicit TLSMode = "implicit" // TLS from the first byte (port 465)
	TLSNone     TLSMode = "none"     // no encryption: loopback hosts only (a local relay)
)

// SMTPConfig configures a Sender.
type SMTPConfig struct {
	Host string // required
	// Port defaults to 587 (starttls), 465 (implicit) or 25 (none).
	Port int
	TLS  TLSMode // default TLSStartTLS
	// Username enables AUTH (PLAIN when offered, else LOGIN); "" sends
	// without authenticating.
	Username string
	Password string
	From     string   // RFC 5322 address, e.g. "vmvault <backup@example.com>"; required
	To       []string // default recipients; at least one
	// RootCAs verifies the server's certificate; nil uses the system roots.
	RootCAs *x509.CertPool
	// HelloName is the name sent in EHLO; default the host name.
	HelloName string
	// Timeout bounds one attempt, from connect to the end of DATA; default 60s.
	Timeout time.Duration
	// Attempts is how many times a transient failure is tried; default 4.
	Attempts int
	// Backoff is the wait before the first retry, doubled each time; default 15s.
	Backoff time.Duration
	Clock   clock.Clock  // default clock.Real()
	Logger  *slog.Logger // default: discard
}

// IsLoopbackHost reports whether host names this machine's loopback
// interface (where an unencrypted SMTP connection cannot be observed).
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Validate checks the configuration and fills in defaults. Its errors wrap
// ErrConfig and name the field.
func (c *SMTPConfig) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, a...)))
	}
	if c.Host == "" {
		bad("host", "required")
	} else if strings.ContainsAny(c.Host, " \t\r\n/") {
		bad("host", "%q is not a host name or address", c.Host)
	}
	if c.TLS == "" {
		c.TLS = TLSStartTLS
	}
	switch c.TLS {
	case TLSStartTLS, TLSImplicit:
	case TLSNone:
		if c.Host != "" && !IsLoopbackHost(c.Host) {
			bad("tls", "none is allowed only for a loopback host (localhost, 127.0.0.1, ::1), not %q: use starttls or implicit", c.Host)
		}
	default:
		bad("tls", "%q: starttls, implicit or none", c.TLS)
	}
	if c.Port == 0 {
		c.Port = map[TLSMode]int{TLSStartTLS: 587, TLSImplicit: 465, TLSNone: 25}[c.TLS]
	}
	if c.Port < 1 || c.Port > 65535 {
		bad("port", "%d is not a TCP port", c.Port)
	}
	if c.Username == "" && c.Password != "" {
		bad("username", "required with a password")
	}
	if c.Username != "" && c.Password == "" {
		bad("password", "required with a username")
	}
	if strings.ContainsAny(c.Username, "\r\n\x00") {
		bad("username", "must not contain line breaks or NUL")
	}
	if c.From == "" {
		bad("from", "required")
	} else if _, err := parseAddress(c.From); err != nil {
		bad("from", "%v", err)
	}
	if len(c.To) == 0 {
		bad("to", "at least one recipient")
	}
	for i, t := range c.To {
		if _, err := parseAddress(t); err != nil {
			bad(fmt.Sprintf("to[%d]", i), "%v", err)
		}
	}
	if c.Timeout < 0 || c.Attempts < 0 || c.Backoff < 0 {
		bad("timeout/attempts/backoff", "must not be negative")
	}
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.Attempts == 0 {
		c.Attempts = 4
	}
	if c.Backoff == 0 {
		c.Backoff = 15 * time.Second
	}
	if c.HelloName == "" {
		c.HelloName, _ = os.Hostname()
		if c.HelloName == "" || strings.ContainsAny(c.HelloName, " \r\n") {
			c.HelloName = "localhost"
		}
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return errors.Join(errs...)
}

// parseAddress accepts one RFC 5322 address ("Name <a@b>" or "a@b").
func parseAddress(s string) (*mail.Address, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("%q: line breaks in an address", s)
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not an email address: %v", s, err)
	}
	return a, nil
}

// Sender sends mail through one SMTP server. It is safe for concurrent use;
// every Send opens its own connection (a few mails a day do not justify
// keeping one).
type Sender struct {
	cfg  SMTPConfig
	from *mail.Address
	to   []*mail.Address
}

// NewSender validates cfg and returns a Sender.
func NewSender(cfg SMTPConfig) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sender{cfg: cfg}
	s.from, _ = parseAddress(cfg.From)
	for _, t := range cfg.To {
		a, _ := parseAddress(t)
		s.to = append(s.to, a)
	}
	return s, nil
}

// Send delivers m, retrying transient failures (4xx replies, connection
// failures, timeouts) with a doubling backoff. Permanent failures (5xx,
// refused authentication, no STARTTLS, a bad certificate) are returned at
// once. It returns when the server accepted the message, or with ctx's
// error once ctx ends.
func (s *Sender) Send(ctx context.Context, m Message) error {
	return s.send(ctx, m, s.cfg.Attempts)
}

func (s *Sender) send(ctx context.Context, m Message, attempts int) error {
	to := s.to
	if len(m.To) > 0 {
		to = nil
		for _, t := range m.To {
			a, err := parseAddress(t)
			if err != nil {
				return fmt.Errorf("send mail: recipient: %w", err)
			}
			to = append(to, a)
		}
	}
	raw, err := compose(m, s.from, to, s.cfg.Clock.Now())
	if err != nil {
		return fmt.Errorf("compose mail %q: %w", m.Subject, err)
	}
	rcpts := make([]string, len(to))
	for i, a := range to {
		rcpts[i] = a.Address
	}
	log := s.cfg.Logger.With("subject", m.Subject, "smtp", net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port)))
	wait := s.cfg.Backoff
	for attempt := 1; ; attempt++ {
		err := s.attempt(ctx, rcpts, raw)
		if err == nil {
			log.Info("mail sent", "to", strings.Join(rcpts, ","), "attempt", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("send mail %q: %w", m.Subject, ctx.Err())
		}
		if !transient(err) {
			return fmt.Errorf("send mail %q: %w", m.Subject, err)
		}
		if attempt >= attempts {
			return fmt.Errorf("send mail %q: %w after %d attempts: %w", m.Subject, ErrTemporary, attempt, err)
		}
		log.Warn("mail: transient failure, will retry", "attempt", attempt, "retry_in", wait, "err", err)
		t := s.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("send mail %q: %w (last failure: %v)", m.Subject, ctx.Err(), err)
		case <-t.C():
		}
		wait *= 2
	}
}

// attempt runs one SMTP session.
func (s *Sender) attempt(ctx context.Context, rcpts []string, raw []byte) error {
	addr := net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port))
	actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	d := net.Dialer{Timeout: s.cfg.Timeout}
	conn, err := d.DialContext(actx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer conn.Close()
	// One deadline for the whole session, and an immediate one when ctx
	// ends, so that no server can hold a send (or the daemon's shutdown).
	dl, _ := actx.Deadline()
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(actx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	tlsCfg := &tls.Config{ServerName: s.cfg.Host, RootCAs: s.cfg.RootCAs, MinVersion: tls.VersionTLS12}
	if s.cfg.TLS == TLSImplicit {
		tc := tls.Client(conn, tlsCfg)
		if err := tc.HandshakeContext(actx); err != nil {
			return fmt.Errorf("TLS with %s: %w", addr, err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, s.cfg.Host)
	if err != nil {
		return fmt.Errorf("greeting from %s: %w", addr, err)
	}
	defer c.Close()
	if err := c.Hello(s.cfg.HelloName); err != nil {
		return fmt.Errorf("EHLO to %s: %w", addr, err)
	}
	if s.cfg.TLS == TLSStartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fmt.Errorf("%s: %w; nothing was sent (use tls: implicit if the server speaks TLS on another port)", addr, ErrNoSTARTTLS)
		}
		if err := c.StartTLS(tlsCfg); err != nil {
			return fmt.Errorf("STARTTLS with %s: %w", addr, err)
		}
	}
	if s.cfg.Username != "" {
		ok, mechs := c.Extension("AUTH")
		if !ok {
			return fmt.Errorf("%s offers no AUTH but a username is configured: %w", addr, ErrAuth)
		}
		var a smtp.Auth
		switch {
		case hasWord(mechs, "PLAIN"):
			a = smtp.PlainAuth("", s.cfg.Username, s.cfg.Password, s.cfg.Host)
		case hasWord(mechs, "LOGIN"):
			a = &loginAuth{user: s.cfg.Username, pass: s.cfg.Password, host: s.cfg.Host}
		default:
			return fmt.Errorf("%s offers AUTH %s, neither PLAIN nor LOGIN: %w", addr, mechs, ErrAuth)
		}
		if err := c.Auth(a); err != nil {
			if transient(err) {
				return fmt.Errorf("authenticate as %q at %s: %w", s.cfg.Username, addr, err)
			}
			return fmt.Errorf("authenticate as %q at %s: %w: %w", s.cfg.Username, addr, ErrAuth, err)
		}
	}
	if err := c.Mail(s.from.Address); err != nil {
		return rejected(fmt.Sprintf("MAIL FROM %s", s.from.Address), err)
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			return rejected("RCPT TO "+r, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return rejected("DATA", err)
	}
	if _, err := w.Write(raw); err != nil {
		return fmt.Errorf("write message: %w", err)
	}
	if err := w.Close(); err != nil {
		return rejected("end of DATA", err)
	}
	// The message is accepted: a failed QUIT must not resend it.
	_ = c.Quit()
	return nil
}

func rejected(what string, err error) error {
	var te *textproto.Error
	if errors.As(err, &te) && te.Code >= 500 {
		return fmt.Errorf("%s: %w: %w", what, ErrRejected, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// transient reports whether err may go away by itself: a 4xx reply, a
// connection that failed or timed out. A refused login, a missing
// STARTTLS, a certificate that does not verify and 5xx replies do not.
func transient(err error) bool {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code >= 400 && te.Code < 500
	}
	var cve *tls.CertificateVerificationError
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	var rhe tls.RecordHeaderError
	switch {
	case errors.Is(err, ErrNoSTARTTLS), errors.Is(err, ErrAuth), errors.Is(err, ErrRejected),
		errors.As(err, &cve), errors.As(err, &uae), errors.As(err, &hne), errors.As(err, &cie), errors.As(err, &rhe):
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

func hasWord(list, w string) bool {
	for _, f := range strings.Fields(list) {
		if strings.EqualFold(f, w) {
			return true
		}
	}
	return false
}

// loginAuth is the LOGIN mechanism (a de-facto standard that older relays
// and Exchange offer instead of PLAIN). Like smtp.PlainAuth it refuses to
// send the password over an unencrypted connection except to localhost.
type loginAuth struct {
	user, pass, host string
	step             int
}

func (a *loginAuth) Start(server *smtp.ServerInfo) (string, []byte, error) {
	if !server.TLS && !IsLoopbackHost(server.Name) {
		return "", nil, errors.New("unencrypted connection")
	}
	if server.Name != a.host {
		return "", nil, errors.New("wrong host name")
	}
	a.step = 0
	return "LOGIN", nil, nil
}

func (a *loginAuth) Next(fromServer []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	a.step++
	prompt := strings.ToLower(string(fromServer))
	switch {
	case strings.Contains(prompt, "user"):
		return []byte(a.user), nil
	case strings.Contains(prompt, "pass"):
		return []byte(a.pass), nil
	case a.step == 1:
		return []byte(a.user), nil
	case a.step == 2:
		return []byte(a.pass), nil
	}
	return nil, fmt.Errorf("unexpected LOGIN challenge %q", fromServer)
}
