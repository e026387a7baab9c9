package notify

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

func senderFor(t *testing.T, ts *testServer, mut func(*SMTPConfig)) (*Sender, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	cfg := SMTPConfig{
		Host: ts.Host, Port: ts.Port, Username: "backup", Password: "s3cret-Pa55",
		From: "vmvault <vmvault@example.com>", To: []string{"ops@example.com", "Second Admin <admin2@example.com>"},
		RootCAs: ts.Pool, Timeout: 10 * time.Second, Backoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mut != nil {
		mut(&cfg)
	}
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, &logs
}

var testMessage = Message{Subject: "[vmvault] FAILED backup: job Nightly, VM web-01", Text: "backup of web-01 failed\nline two", HTML: "<p>backup of <b>web-01</b> failed</p>", Kind: "alert"}

// STARTTLS plus AUTH PLAIN against a real server: the message arrives over
// TLS, authenticated, with every header and both MIME parts.
func TestSendSTARTTLSAuthPlain(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55", Mechs: []string{"PLAIN"}})
	s, logs := senderFor(t, ts, nil)
	if err := s.Send(context.Background(), testMessage); err != nil {
		t.Fatal(err)
	}
	got := ts.next(t)
	if !got.TLS || got.User != "backup" || got.From != "vmvault@example.com" || strings.Join(got.To, ",") != "ops@example.com,admin2@example.com" {
		t.Fatalf("envelope %+v", got)
	}
	_, auths, authTLS := ts.counts()
	if len(auths) != 1 || auths[0] != "PLAIN backup" || !authTLS[0] {
		t.Fatalf("auths %v over TLS %v", auths, authTLS)
	}
	p := parseMail(t, got.Data)
	if d, err := p.Header.Date(); err != nil || time.Since(d) > time.Minute {
		t.Errorf("Date %q: %v", p.Header.Get("Date"), err)
	}
	if id := p.Header.Get("Message-ID"); !regexp.MustCompile(`^<[0-9a-f]{32}@example\.com>$`).MatchString(id) {
		t.Errorf("Message-ID %q", id)
	}
	if from, err := p.Header.AddressList("From"); err != nil || len(from) != 1 || from[0].Address != "vmvault@example.com" {
		t.Errorf("From %q", p.Header.Get("From"))
	}
	if to, err := p.Header.AddressList("To"); err != nil || len(to) != 2 || to[1].Name != "Second Admin" {
		t.Errorf("To %q", p.Header.Get("To"))
	}
	for k, want := range map[string]string{"MIME-Version": "1.0", "Auto-Submitted": "auto-generated", "X-Vmvault-Report": "alert"} {
		if p.Header.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, p.Header.Get(k), want)
		}
	}
	if p.subject(t) != testMessage.Subject {
		t.Errorf("subject %q", p.subject(t))
	}
	if !strings.HasPrefix(p.Header.Get("Content-Type"), "multipart/alternative;") {
		t.Errorf("Content-Type %q", p.Header.Get("Content-Type"))
	}
	if p.Parts["text/plain"] != strings.ReplaceAll(testMessage.Text, "\n", "\r\n") || p.Parts["text/html"] != testMessage.HTML {
		t.Errorf("parts %q", p.Parts)
	}
	if strings.Contains(logs.String(), "s3cret-Pa55") {
		t.Error("the password reached the log")
	}
}

// Implicit TLS with a server that offers only LOGIN.
func TestSendImplicitTLSAuthLogin(t *testing.T) {
	ts := startServer(t, serverOpts{Implicit: true, User: "backup", Pass: "s3cret-Pa55", Mechs: []string{"LOGIN"}})
	s, _ := senderFor(t, ts, func(c *SMTPConfig) { c.TLS = TLSImplicit; c.To = []string{"ops@example.com"} })
	if err := s.Send(context.Background(), Message{Subject: "plain only", Text: "just text"}); err != nil {
		t.Fatal(err)
	}
	got := ts.next(t)
	_, auths, _ := ts.counts()
	if !got.TLS || got.User != "backup" || len(auths) != 1 || auths[0] != "LOGIN backup" {
		t.Fatalf("envelope %+v auths %v", got, auths)
	}
	p := parseMail(t, got.Data)
	if !strings.HasPrefix(p.Header.Get("Content-Type"), "text/plain; charset=utf-8") || strings.TrimRight(p.Parts["text/plain"], "\r\n") != "just text" {
		t.Fatalf("single part: %q %q", p.Header.Get("Content-Type"), p.Parts)
	}
}

// A wrong password is a clear, permanent error: one attempt, the username
// named, the password nowhere.
func TestSendAuthFailure(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "right"})
	s, logs := senderFor(t, ts, nil)
	err := s.Send(context.Background(), testMessage)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), `"backup"`) || !strings.Contains(err.Error(), "535") {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(err.Error(), "s3cret-Pa55") || strings.Contains(logs.String(), "s3cret-Pa55") {
		t.Fatal("the password is in the error or the log")
	}
	if sessions, auths, _ := ts.counts(); sessions != 1 || len(auths) != 1 {
		t.Fatalf("a refused login was retried: %d sessions, auths %v", sessions, auths)
	}
	ts.none(t)
}

// 451 once, then accepted: the sender retries and the mail arrives once.
func TestSendRetriesTransientFailure(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55", FailMail: []int{451}})
	s, logs := senderFor(t, ts, nil)
	if err := s.Send(context.Background(), testMessage); err != nil {
		t.Fatal(err)
	}
	ts.next(t)
	ts.none(t)
	if sessions, _, _ := ts.counts(); sessions != 2 {
		t.Fatalf("%d sessions, want 2", sessions)
	}
	if !strings.Contains(logs.String(), "451") {
		t.Errorf("the transient failure was not logged: %s", logs)
	}

	// Always 451: ErrTemporary after the configured attempts.
	ts2 := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55", FailMail: []int{451, 451, 451}})
	s2, _ := senderFor(t, ts2, func(c *SMTPConfig) { c.Attempts = 3 })
	if err := s2.Send(context.Background(), testMessage); !errors.Is(err, ErrTemporary) || !strings.Contains(err.Error(), "451") {
		t.Fatalf("err %v", err)
	}
	if sessions, _, _ := ts2.counts(); sessions != 3 {
		t.Fatalf("%d sessions, want 3", sessions)
	}

	// 550 is permanent: not retried.
	ts3 := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55", FailMail: []int{550}})
	s3, _ := senderFor(t, ts3, nil)
	if err := s3.Send(context.Background(), testMessage); !errors.Is(err, ErrRejected) {
		t.Fatalf("err %v", err)
	}
	if sessions, _, _ := ts3.counts(); sessions != 1 {
		t.Fatalf("a 550 was retried: %d sessions", sessions)
	}
}

// STARTTLS required and not offered (the server even offers AUTH in clear
// text): refused before any credential or message is sent.
func TestSendRefusesWithoutSTARTTLS(t *testing.T) {
	ts := startServer(t, serverOpts{InsecureAuth: true, User: "backup", Pass: "s3cret-Pa55"})
	s, _ := senderFor(t, ts, nil)
	err := s.Send(context.Background(), testMessage)
	if !errors.Is(err, ErrNoSTARTTLS) {
		t.Fatalf("err %v", err)
	}
	if sessions, auths, _ := ts.counts(); sessions != 1 || len(auths) != 0 {
		t.Fatalf("%d sessions, auths %v: credentials sent or retried", sessions, auths)
	}
	ts.none(t)
}

// A certificate the sender does not trust is refused, not retried.
func TestSendUntrustedCertificate(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	s, _ := senderFor(t, ts, func(c *SMTPConfig) { c.RootCAs = nil })
	err := s.Send(context.Background(), testMessage)
	if err == nil || errors.Is(err, ErrTemporary) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("err %v", err)
	}
	if sessions, auths, _ := ts.counts(); sessions != 1 || len(auths) != 0 {
		t.Fatalf("%d sessions, auths %v", sessions, auths)
	}
}

// tls: none to a local relay without AUTH works.
func TestSendPlainToLoopbackRelay(t *testing.T) {
	ts := startServer(t, serverOpts{})
	s, _ := senderFor(t, ts, func(c *SMTPConfig) { c.TLS = TLSNone; c.Username, c.Password = "", "" })
	if err := s.Send(context.Background(), testMessage); err != nil {
		t.Fatal(err)
	}
	if got := ts.next(t); got.TLS {
		t.Fatal("TLS on a plain relay?")
	}
}

// A server that accepts the connection and never answers: the timeout ends
// the attempt, and cancelling ctx ends Send at once.
func TestSendTimeoutAndCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent: never greets
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ts := &testServer{Host: "127.0.0.1"}
	ts.Port = atoi(port)
	s, _ := senderFor(t, ts, func(c *SMTPConfig) { c.Timeout = 200 * time.Millisecond; c.Attempts = 2 })
	start := time.Now()
	err = s.Send(context.Background(), testMessage)
	if !errors.Is(err, ErrTemporary) || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: err %v after %v", err, time.Since(start))
	}

	s2, _ := senderFor(t, ts, func(c *SMTPConfig) { c.Timeout = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	err = s2.Send(ctx, testMessage)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("cancel: err %v after %v", err, time.Since(start))
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestSMTPConfigValidate(t *testing.T) {
	ok := SMTPConfig{Host: "smtp.example.com", From: "a@example.com", To: []string{"b@example.com"}}
	tests := []struct {
		name string
		mut  func(*SMTPConfig)
		want string // "" valid
		port int
	}{
		{"defaults", func(*SMTPConfig) {}, "", 587},
		{"implicit port", func(c *SMTPConfig) { c.TLS = TLSImplicit }, "", 465},
		{"none on loopback", func(c *SMTPConfig) { c.TLS, c.Host = TLSNone, "127.0.0.1" }, "", 25},
		{"none on localhost", func(c *SMTPConfig) { c.TLS, c.Host = TLSNone, "localhost" }, "", 25},
		{"none on ::1", func(c *SMTPConfig) { c.TLS, c.Host = TLSNone, "::1" }, "", 25},
		{"none on a remote host", func(c *SMTPConfig) { c.TLS = TLSNone }, "tls: none is allowed only for a loopback host", 0},
		{"bad tls", func(c *SMTPConfig) { c.TLS = "ssl" }, "tls:", 0},
		{"no host", func(c *SMTPConfig) { c.Host = "" }, "host: required", 0},
		{"bad port", func(c *SMTPConfig) { c.Port = 70000 }, "port:", 0},
		{"password without user", func(c *SMTPConfig) { c.Password = "x" }, "username: required", 0},
		{"user without password", func(c *SMTPConfig) { c.Username = "x" }, "password: required", 0},
		{"no from", func(c *SMTPConfig) { c.From = "" }, "from: required", 0},
		{"bad from", func(c *SMTPConfig) { c.From = "not an address" }, "from:", 0},
		{"header injection", func(c *SMTPConfig) { c.From = "a@example.com\r\nBcc: x@evil" }, "from:", 0},
		{"no to", func(c *SMTPConfig) { c.To = nil }, "to: at least one", 0},
		{"bad to", func(c *SMTPConfig) { c.To = []string{"ok@example.com", "nope"} }, "to[1]:", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mut(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrConfig)):
				t.Fatalf("err %v, want %q", err, tc.want)
			case tc.want == "" && c.Port != tc.port:
				t.Fatalf("port %d, want %d", c.Port, tc.port)
			}
		})
	}
}

// Names from vCenter end up in headers: line breaks cannot inject headers,
// non-ASCII is encoded.
func TestComposeHeaderSafety(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	s, _ := senderFor(t, ts, nil)
	if err := s.Send(context.Background(), Message{Subject: "VM évier\r\nBcc: victim@example.org", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	got := ts.next(t)
	p := parseMail(t, got.Data)
	if p.Header.Get("Bcc") != "" || p.subject(t) != "VM évier Bcc: victim@example.org" {
		t.Fatalf("subject %q, Bcc %q", p.subject(t), p.Header.Get("Bcc"))
	}
	if len(got.To) != 2 {
		t.Fatalf("recipients %v", got.To)
	}
}
