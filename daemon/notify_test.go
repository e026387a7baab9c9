package daemon

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"mime"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/vmware/govmomi/vim25/types"
	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/state/schema"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/notify/feed"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// mailbox is a real SMTP server (go-smtp) on 127.0.0.1 with STARTTLS (a
// certificate made here) and AUTH PLAIN, collecting what it is sent.
type mailbox struct {
	port   int
	caFile string
	mu     sync.Mutex
	mails  []*mail.Message
	raw    []string
	got    chan struct{}
}

func startMailbox(t *testing.T, dir, user, pass string) *mailbox {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "mail.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	mb := &mailbox{caFile: filepath.Join(dir, "smtp-ca.pem"), got: make(chan struct{}, 16)}
	if err := os.WriteFile(mb.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &mailboxSession{mb: mb, user: user, pass: pass}, nil }))
	s.Domain = "mail.test"
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.ReadTimeout, s.WriteTimeout = 30*time.Second, 30*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	mb.port = ln.Addr().(*net.TCPAddr).Port
	return mb
}

// wait returns the first mail whose subject starts with prefix.
func (mb *mailbox) wait(t *testing.T, prefix string, d time.Duration) (*mail.Message, string) {
	t.Helper()
	deadline := time.After(d)
	for {
		mb.mu.Lock()
		for i, m := range mb.mails {
			subj, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
			if strings.HasPrefix(subj, prefix) {
				mb.mu.Unlock()
				return m, mb.raw[i]
			}
		}
		mb.mu.Unlock()
		select {
		case <-mb.got:
		case <-deadline:
			t.Fatalf("no mail with subject %q", prefix)
		}
	}
}

type mailboxSession struct {
	mb         *mailbox
	user, pass string
	authed     bool
}

func (s *mailboxSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *mailboxSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, u, p string) error {
		if u != s.user || p != s.pass {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}
func (s *mailboxSession) Mail(string, *smtp.MailOptions) error {
	if !s.authed && s.user != "" { // a mailbox without a user takes mail unauthenticated
		return smtp.ErrAuthRequired
	}
	return nil
}
func (s *mailboxSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *mailboxSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m, err := mail.ReadMessage(strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	s.mb.mu.Lock()
	s.mb.mails = append(s.mb.mails, m)
	s.mb.raw = append(s.mb.raw, string(b))
	s.mb.mu.Unlock()
	s.mb.got <- struct{}{}
	return nil
}
func (s *mailboxSession) Reset()        {}
func (s *mailboxSession) Logout() error { return nil }

// The daemon with an smtp section against the lab: a job whose VM's
// snapshot fails sends a failure alert over STARTTLS with AUTH that names
// the job and the VM; the settings page's test mail goes through the same
// server; the SMTP password never reaches the log.
func TestServeMailsAlertOnFailedBackup(t *testing.T) {
	l, err := lab.Start(context.Background(), lab.Options{DiskCapacity: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	dir := t.TempDir()
	const smtpPass = "smtp-Secret-77"
	mb := startMailbox(t, dir, "vmvault", smtpPass)
	if err := os.WriteFile(filepath.Join(dir, "smtp.pass"), []byte(smtpPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-3", fmt.Sprintf(`time_zone: Europe/Paris
smtp:
  host: 127.0.0.1
  port: %d
  ca_file: smtp-ca.pem
  username: vmvault
  password_file: smtp.pass
  from: "vmvault <vmvault@example.com>"
  to: [ops@example.com]
  daily_report_at: "07:00"
`, mb.port), Options{AlertDebounce: 200 * time.Millisecond})
	api, csrf := cookieLogin(t, sd.addr, "admin-secret-3")

	// The settings page's test mail reaches the server through the daemon.
	if code, body := api.call("POST", "/api/v1/settings/smtp/test", map[string]string{"to": "someone@example.com"}, csrf); code != 200 {
		t.Fatalf("test mail: %d %s", code, body)
	}
	mb.wait(t, "[vmvault] test mail from ", 30*time.Second)

	uuid := api.vmUUID("DC0_H0_VM0")
	// Several faults: enabling CBT takes a snapshot of its own before the
	// backup's snapshot.
	for range 3 {
		if err := l.FailNextSnapshot("DC0_H0_VM0", &types.FileFault{File: "[LocalDS_0] DC0_H0_VM0/disk.vmdk"}); err != nil {
			t.Fatal(err)
		}
	}
	job := map[string]any{"id": "nightly", "name": "Nightly", "enabled": true, "repository": "main", "quiesce": "none",
		"selection": map[string]any{"vms": []string{uuid}},
		"window":    map[string]any{"location": "UTC", "days": map[string]any{"monday": []string{"22:00-06:00"}}},
		"retention": map[string]any{"last": 3}}
	if code, body := api.call("POST", "/api/v1/jobs", job, csrf); code != 201 {
		t.Fatalf("job: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/jobs/nightly/run", nil, csrf); code != 202 {
		t.Fatalf("run now: %d %s", code, body)
	}
	m, raw := mb.wait(t, "[vmvault] FAILED backup: job Nightly, VM DC0_H0_VM0", 90*time.Second)
	if m.Header.Get("X-Vmvault-Report") != "alert" || !strings.Contains(m.Header.Get("Content-Type"), "multipart/alternative") {
		t.Errorf("alert headers %v", m.Header)
	}
	if !strings.Contains(raw, "DC0_H0_VM0") || !strings.Contains(raw, "Nightly") || !strings.Contains(raw, "snapshot") {
		t.Errorf("alert body:\n%s", raw)
	}

	sd.stop(t, ShutdownGrace+notify.FlushTimeout+10*time.Second)
	logs := sd.stderr.String()
	if strings.Contains(logs, smtpPass) {
		t.Error("the SMTP password reached the log")
	}
	if !strings.Contains(logs, "email enabled") || !strings.Contains(logs, "mail sent") {
		t.Errorf("log lacks the mail lines:\n%s", logs)
	}
}

// The smtp section's defaults, relative paths and an unquoted time of day.
func TestSMTPConfigDefaults(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "vmvault.yaml")
	y := minimalConfig + "smtp: {host: mx.example.com, username: u, password_file: smtp.pass, ca_file: ca.pem, from: v@example.com, to: [o@example.com]}\n"
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.SMTP
	if s.TLS != "starttls" || *s.DailyReportAt != "07:00" || !*s.Alerts || s.PasswordFile != filepath.Join(dir, "smtp.pass") || s.CAFile != filepath.Join(dir, "ca.pem") {
		t.Fatalf("defaults %+v", s)
	}
	cfg2, err := ParseConfig([]byte(minimalConfig + "smtp: {host: localhost, tls: none, from: v@example.com, to: [o@example.com], daily_report_at: 06:45, alerts: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if *cfg2.SMTP.DailyReportAt != "06:45" || *cfg2.SMTP.Alerts {
		t.Fatalf("%+v", cfg2.SMTP)
	}
}

// The example configuration in dist/ is valid.
func TestExampleConfigIsValid(t *testing.T) {
	b, err := os.ReadFile("../dist/appliance.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		t.Fatalf("dist/appliance.example.yaml: %v", err)
	}
	if cfg.SMTP == nil || cfg.VCenter == nil || len(cfg.Repositories) == 0 || cfg.Maintenance.Window == nil {
		t.Fatalf("the example leaves out sections: %+v", cfg)
	}
}

// dist/vmvault.service: systemd accepts it (systemd-analyze verify, with
// the binary path pointed at an executable that exists here) and it keeps
// the settings the daemon relies on: stop timeout above the daemon's own
// shutdown deadlines, SIGTERM, the hardening.
func TestSystemdUnit(t *testing.T) {
	const path = "../dist/vmvault.service"
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unit := map[string][]string{} // "Section.Key" -> values
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not key=value in a section: %q", path, n, line)
			}
			unit[section+"."+k] = append(unit[section+"."+k], v)
		}
	}
	get := func(k string) string {
		v := unit[k]
		if len(v) == 0 {
			t.Errorf("%s missing", k)
			return ""
		}
		return v[len(v)-1]
	}
	for k, want := range map[string]string{
		"Service.Type": "simple", "Service.User": "vmvault", "Service.StateDirectory": "vmvault",
		"Service.ExecStart":       "/usr/local/bin/appliance serve --config /etc/vmvault/appliance.yaml",
		"Service.NoNewPrivileges": "yes", "Service.ProtectSystem": "strict", "Service.PrivateTmp": "yes",
		"Service.ProtectHome": "yes", "Service.KillSignal": "SIGTERM", "Service.Restart": "on-failure",
		"Install.WantedBy": "multi-user.target",
	} {
		if got := get(k); got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	rw := get("Service.ReadWritePaths")
	if !strings.Contains(rw, "/var/lib/vmvault") || !strings.Contains(rw, "/srv/vmvault") {
		t.Errorf("ReadWritePaths=%q: the state and repository directories must be writable", rw)
	}
	if fams := get("Service.RestrictAddressFamilies"); !strings.Contains(fams, "AF_INET") || !strings.Contains(fams, "AF_INET6") {
		t.Errorf("RestrictAddressFamilies=%q", fams)
	}
	if n, err := strconv.Atoi(get("Service.LimitNOFILE")); err != nil || n < 4096 {
		t.Errorf("LimitNOFILE=%q", get("Service.LimitNOFILE"))
	}
	stop, err := time.ParseDuration(get("Service.TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", get("Service.TimeoutStopSec"), err)
	}
	// SIGKILL must not come while the daemon still ends its backups (grace)
	// and sends its last alerts (flush), with room for closing.
	if need := ShutdownGrace + notify.FlushTimeout + 15*time.Second; stop < need {
		t.Errorf("TimeoutStopSec=%v, want at least %v (shutdown grace %v + mail flush %v + closing)", stop, need, ShutdownGrace, notify.FlushTimeout)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not found: install systemd (make test does)")
	}
	// verify checks that ExecStart's binary exists: point it at one that does.
	b, _ := os.ReadFile(path)
	tmp := filepath.Join(t.TempDir(), "vmvault.service")
	self, _ := os.Executable()
	if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/appliance", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", tmp).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// smtp.repeat_after: strict type, bounds, "off", default 6h.
func TestNotifyConfigRepeatAfter(t *testing.T) {
	const base = "smtp: {host: mx, from: v@example.com, to: [o@example.com]"
	tests := []struct {
		name string
		yaml string
		want time.Duration // for valid rows
		err  string        // "" = valid
	}{
		{"default", base + "}\n", 6 * time.Hour, ""},
		{"hours", base + ", repeat_after: 12h}\n", 12 * time.Hour, ""},
		{"minutes", base + ", repeat_after: 90m}\n", 90 * time.Minute, ""},
		{"off", base + ", repeat_after: \"off\"}\n", -1, ""},
		{"too short", base + ", repeat_after: 10s}\n", 0, "smtp.repeat_after"},
		{"too long", base + ", repeat_after: 200h}\n", 0, "smtp.repeat_after"},
		{"not a duration", base + ", repeat_after: forever}\n", 0, "smtp.repeat_after"},
		{"a bare number", base + ", repeat_after: 6}\n", 0, "smtp.repeat_after: wrong type"},
		{"misspelt", base + ", repeat: 6h}\n", 0, `unknown field "repeat"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(minimalConfig + tc.yaml))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q lacks %q", err, tc.err)
			case tc.err == "":
				if got := repeatAfter(cfg.SMTP); got != tc.want {
					t.Fatalf("repeat_after %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// The daily report's memory in a real state.db: empty at first, kept
// across a reopen, in a bucket of its own that leaves the state's records
// alone; a damaged value is an error, not a panic. Over it, a notifier
// started after a downtime sends the missed report once through a real
// SMTP server, and one restarted after that sends none.
func TestNotifyReportLogAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "state.db")
	open := func() *state.DB {
		t.Helper()
		db, err := state.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	if err := db.PutJob(ctx, policy.NewJob("j1", "Nightly", "main", time.UTC)); err != nil {
		t.Fatal(err)
	}
	rl := db
	if last, err := rl.LastReport(ctx); err != nil || !last.IsZero() {
		t.Fatalf("fresh database: %v %v", last, err)
	}
	at := func(d, h, m int) time.Time { return time.Date(2026, 5, d, h, m, 0, 0, time.UTC) }
	if err := rl.SetLastReport(ctx, at(2, 7, 0)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	const smtpPass = "smtp-Secret-77"
	mb := startMailbox(t, dir, "vmvault", smtpPass)
	pemBytes, err := os.ReadFile(mb.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	clk := clock.NewFake(at(5, 12, 0))
	tod := notify.TimeOfDay{Hour: 7}
	run := func(db *state.DB) (stop func()) {
		t.Helper()
		sender, err := notify.NewSender(notify.SMTPConfig{Host: "127.0.0.1", Port: mb.port, TLS: notify.TLSStartTLS, Username: "vmvault", Password: smtpPass,
			From: "vmvault@example.com", To: []string{"ops@example.com"}, RootCAs: pool, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		nt, err := notify.New(notify.Config{Sender: sender, Source: &feed.Source{DB: db, Repos: repos.New(nil), Log: slog.New(slog.DiscardHandler)},
			Clock: clk, DailyAt: &tod, ReportLog: db, Appliance: "t"})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = nt.Run(rctx) }()
		// Run has armed its daily timer once catch-up is over.
		wait := make(chan struct{})
		timer := time.AfterFunc(20*time.Second, func() { close(wait) })
		defer timer.Stop()
		if !clk.BlockUntil(1, wait) {
			t.Fatal("the notifier did not arm its daily timer")
		}
		return func() { cancel(); <-done }
	}
	count := func() int {
		mb.mu.Lock()
		defer mb.mu.Unlock()
		return len(mb.mails)
	}

	db = open()
	stop := run(db)
	m, _ := mb.wait(t, "[vmvault] daily report", 20*time.Second)
	if b, _ := io.ReadAll(m.Body); !strings.Contains(string(b), "late") {
		t.Errorf("catch-up report does not say it is late")
	}
	stop()
	if n := count(); n != 1 {
		t.Fatalf("%d mails after the catch-up, want 1", n)
	}
	if last, err := db.LastReport(ctx); err != nil || !last.Equal(at(5, 7, 0)) {
		t.Fatalf("recorded %v %v, want %v", last, err, at(5, 7, 0))
	}
	if jobs, err := db.Jobs(ctx); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs beside the notify bucket: %v %v", jobs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = open()
	clk.Set(at(5, 12, 30))
	// run returns once the notifier has armed its daily timer, which it
	// does after its catch-up: a second catch-up report would be in the
	// mailbox by then. Its next wake-up (an hour on, long before tomorrow's
	// report) sends nothing either.
	stop = run(db)
	clk.Advance(time.Hour)
	rearmed := make(chan struct{})
	rearmTimer := time.AfterFunc(20*time.Second, func() { close(rearmed) })
	if !clk.BlockUntil(1, rearmed) {
		t.Fatal("the notifier did not re-arm its daily timer")
	}
	rearmTimer.Stop()
	stop()
	if n := count(); n != 1 {
		t.Fatalf("%d mails after a restart, want still 1", n)
	}

	if err := db.Bolt().Update(func(tx *bolt.Tx) error {
		return tx.Bucket(schema.BucketNotify).Put(schema.KeyLastDailyReport, schema.EncodeBytes([]byte("yesterday")))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LastReport(ctx); err == nil || !strings.Contains(err.Error(), "yesterday") {
		t.Fatalf("damaged value: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
