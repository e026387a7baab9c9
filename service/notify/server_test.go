package notify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// testServer is a real SMTP server (go-smtp) on 127.0.0.1:0.
type testServer struct {
	Addr     string
	Host     string
	Port     int
	Pool     *x509.CertPool // trusts the server's self-signed certificate
	mu       sync.Mutex
	sessions int      // TCP connections accepted
	auths    []string // "MECH user" of every AUTH attempt
	authTLS  []bool   // whether each AUTH came over TLS
	mails    chan received
	failMail []int // SMTP codes returned by successive MAIL commands before accepting
}

type received struct {
	From string
	To   []string
	Data []byte
	TLS  bool
	User string
}

type serverOpts struct {
	STARTTLS bool     // offer STARTTLS
	Implicit bool     // TLS from the first byte
	Mechs    []string // AUTH mechanisms offered ("PLAIN", "LOGIN"); nil: PLAIN and LOGIN
	User     string   // "" accepts mail without AUTH
	Pass     string
	FailMail []int // e.g. {451}: the first MAIL gets 451
	// InsecureAuth offers AUTH before TLS (a badly configured server).
	InsecureAuth bool
}

func selfSignedCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test smtp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func startServer(t *testing.T, o serverOpts) *testServer {
	t.Helper()
	cert, pool := selfSignedCert(t)
	ts := &testServer{Pool: pool, mails: make(chan received, 16), failMail: o.FailMail}
	mechs := o.Mechs
	if mechs == nil {
		mechs = []string{sasl.Plain, sasl.Login}
	}
	be := smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &testSession{ts: ts, c: c, o: o, mechs: mechs}, nil
	})
	s := smtp.NewServer(be)
	s.Domain = "localhost"
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	s.AllowInsecureAuth = o.InsecureAuth
	s.ErrorLog = testLogger{}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if o.STARTTLS {
		s.TLSConfig = tlsCfg
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = countingListener{ln, ts}
	if o.Implicit {
		ln = tls.NewListener(ln, tlsCfg)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	ts.Addr = ln.Addr().String()
	h, p, _ := net.SplitHostPort(ts.Addr)
	ts.Host = h
	ts.Port, _ = strconv.Atoi(p)
	return ts
}

// countingListener counts TCP connections (go-smtp makes a new session
// after STARTTLS, so sessions are not connections).
type countingListener struct {
	net.Listener
	ts *testServer
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.ts.mu.Lock()
		l.ts.sessions++
		l.ts.mu.Unlock()
	}
	return c, err
}

type testLogger struct{}

func (testLogger) Printf(string, ...any) {}
func (testLogger) Println(...any)        {}

func (ts *testServer) counts() (sessions int, auths []string, authTLS []bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.sessions, append([]string(nil), ts.auths...), append([]bool(nil), ts.authTLS...)
}

// next returns the next received message or fails the test.
func (ts *testServer) next(t *testing.T) received {
	t.Helper()
	select {
	case m := <-ts.mails:
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("no mail received")
	}
	return received{}
}

// none asserts that no mail has arrived. A mail is in ts.mails before the
// server acknowledges its data, so once the sender is done (Sender.Send
// returned, the notifier settled or stopped) nothing more can come: no
// waiting.
func (ts *testServer) none(t *testing.T) {
	t.Helper()
	select {
	case m := <-ts.mails:
		t.Fatalf("unexpected mail: %s", m.Data)
	default:
	}
}

type testSession struct {
	ts    *testServer
	c     *smtp.Conn
	o     serverOpts
	mechs []string
	user  string
	cur   received
}

func (s *testSession) AuthMechanisms() []string { return s.mechs }

func (s *testSession) Auth(mech string) (sasl.Server, error) {
	_, isTLS := s.c.TLSConnectionState()
	check := func(user, pass string) error {
		s.ts.mu.Lock()
		s.ts.auths = append(s.ts.auths, mech+" "+user)
		s.ts.authTLS = append(s.ts.authTLS, isTLS)
		s.ts.mu.Unlock()
		if user != s.o.User || pass != s.o.Pass {
			return smtp.ErrAuthFailed
		}
		s.user = user
		return nil
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, user, pass string) error { return check(user, pass) }), nil
	case sasl.Login:
		return &loginServer{check: check}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

func (s *testSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.o.User != "" && s.user == "" {
		return smtp.ErrAuthRequired
	}
	s.ts.mu.Lock()
	var code int
	if len(s.ts.failMail) > 0 {
		code, s.ts.failMail = s.ts.failMail[0], s.ts.failMail[1:]
	}
	s.ts.mu.Unlock()
	if code != 0 {
		return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{code / 100, 3, 0}, Message: "try again later"}
	}
	_, isTLS := s.c.TLSConnectionState()
	s.cur = received{From: from, TLS: isTLS, User: s.user}
	return nil
}

func (s *testSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.To = append(s.cur.To, to)
	return nil
}

func (s *testSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.Data = b
	s.ts.mails <- s.cur
	return nil
}

func (s *testSession) Reset()        { s.cur = received{} }
func (s *testSession) Logout() error { return nil }

// loginServer is the server side of AUTH LOGIN (go-sasl has only the client).
type loginServer struct {
	check      func(user, pass string) error
	step       int
	user, pass string
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	l.step++
	switch l.step {
	case 1:
		if len(resp) > 0 { // initial response carries the username
			l.user = string(resp)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 2:
		l.user = string(resp)
		return []byte("Password:"), false, nil
	case 3:
		l.pass = string(resp)
		return nil, true, l.check(l.user, l.pass)
	}
	return nil, false, errors.New("unexpected LOGIN step")
}

// parsed is a received message taken apart.
type parsed struct {
	Header mail.Header
	Parts  map[string]string // decoded body by media type
}

func parseMail(t *testing.T, raw []byte) parsed {
	t.Helper()
	if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) {
		t.Errorf("bare LF in the message")
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse mail: %v\n%s", err, raw)
	}
	p := parsed{Header: m.Header, Parts: map[string]string{}}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil {
		t.Fatalf("Content-Type %q: %v", m.Header.Get("Content-Type"), err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		b, _ := io.ReadAll(quotedprintable.NewReader(m.Body))
		p.Parts[mt] = string(b)
		return p
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("multipart: %v", err)
		}
		pt, pp, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if pp["charset"] != "utf-8" || part.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
			t.Errorf("part %s headers %v", pt, part.Header)
		}
		b, err := io.ReadAll(quotedprintable.NewReader(part))
		if err != nil {
			t.Fatalf("part %s: %v", pt, err)
		}
		p.Parts[pt] = string(b)
	}
	return p
}

func (p parsed) subject(t *testing.T) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(p.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("subject: %v", err)
	}
	return s
}
