package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/inventory"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/web"
)

func init() {
	register(&command{name: "serve", summary: "run the appliance daemon: REST API, repositories, scheduler (--config FILE)", run: runServe})
}

// serveReady, when set (tests), is called with the listening address once
// the daemon accepts connections.
var serveReady func(addr string)

// shutdownGrace bounds how long running requests and tasks may take to end
// after SIGTERM.
const shutdownGrace = 30 * time.Second

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (required)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		return fmt.Errorf("%w: --config is required", errUsage)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	return serve(ctx, env, cfg)
}

func newLogger(env *cliEnv, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: l}))
}

// daemon holds what serve opened, to close it in reverse order.
type daemon struct {
	closers []func() error
	log     *slog.Logger
}

func (d *daemon) onClose(name string, f func() error) {
	d.closers = append(d.closers, func() error {
		if err := f(); err != nil {
			d.log.Error("close", "what", name, "err", err)
			return err
		}
		return nil
	})
}

func (d *daemon) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		_ = d.closers[i]()
	}
}

func serve(ctx context.Context, env *cliEnv, cfg *serveConfig) error {
	log := newLogger(env, cfg.LogLevel)
	d := &daemon{log: log}
	defer d.close()
	loc, _ := time.LoadLocation(cfg.TimeZone) // validated
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	db, err := state.Open(filepath.Join(cfg.StateDir, "state.db"))
	if err != nil {
		return err
	}
	d.onClose("state db", db.Close)
	wdb, err := bolt.Open(filepath.Join(cfg.StateDir, "web.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("open %s: %w (is another daemon running on this state directory?)", filepath.Join(cfg.StateDir, "web.db"), err)
	}
	d.onClose("web db", wdb.Close)

	repos := map[string]*repository.Repository{}
	for _, rc := range cfg.Repositories {
		pass, err := readSecret(env, rc.PassphraseFile, rc.PassphraseEnv, "passphrase of repository "+rc.Name)
		if err != nil {
			return err
		}
		var pw []byte
		if pass != "" {
			pw = []byte(pass)
		}
		r, err := repository.Open(ctx, rc.Path, pw, repository.OpenOptions{})
		if err != nil {
			if errors.Is(err, repository.ErrLocked) {
				return fmt.Errorf("repository %s (%s) is in use by another daemon or command: %w", rc.Name, rc.Path, err)
			}
			return fmt.Errorf("open repository %s (%s): %w", rc.Name, rc.Path, err)
		}
		d.onClose("repository "+rc.Name, r.Close)
		repos[rc.Name] = r
		log.Info("repository opened", "name", rc.Name, "path", rc.Path, "encrypted", r.Config().Encrypted)
	}
	rs := web.NewRepoSet(repos)
	rs.Maintenance = db.Maintenance

	clk := clock.Real()
	authStore, err := auth.NewBoltStore(wdb)
	if err != nil {
		return err
	}
	acfg := auth.Config{Clock: clk, Store: authStore, AdminUser: cfg.Admin.User}
	if cfg.Sessions.TTL != "" {
		acfg.SessionTTL, _ = time.ParseDuration(cfg.Sessions.TTL) // validated
	}
	var inv policy.Inventory
	if vc := cfg.VCenter; vc != nil {
		pw, err := readSecret(env, vc.PasswordFile, vc.PasswordEnv, "vCenter password")
		if err != nil {
			return err
		}
		vcfg := vsphere.Config{URL: vc.URL, Username: vc.Username, Password: pw, Thumbprint: vc.Thumbprint, CAFile: vc.CAFile, Insecure: vc.Insecure}
		acfg.VCenterRole = auth.Role(vc.Role)
		acfg.VerifyVCenter = func(ctx context.Context, user, password string) error {
			c := vcfg
			c.Username, c.Password, c.KeepAlive = user, password, -1
			cl, err := vsphere.Connect(ctx, c)
			if errors.Is(err, vsphere.ErrLogin) {
				return fmt.Errorf("vCenter refused %s: %w", user, auth.ErrBadCredentials)
			}
			if err != nil {
				return err
			}
			return cl.Close(context.WithoutCancel(ctx))
		}
		client, err := vsphere.Connect(ctx, vcfg)
		if err != nil {
			return fmt.Errorf("connect to vCenter %s: %w", vc.URL, err)
		}
		d.onClose("vCenter session", func() error { return client.Close(context.Background()) })
		inv = inventory.New(client)
		log.Info("vCenter connected", "url", vc.URL, "about", client.About())
	}
	am, err := auth.NewManager(acfg)
	if err != nil {
		return err
	}
	adminPw, err := readSecret(env, cfg.Admin.PasswordFile, "", "administrator password")
	if err != nil {
		return err
	}
	if adminPw == "" {
		adminPw = env.getenv("VMVAULT_ADMIN_PASSWORD")
	}
	generated, err := am.EnsureAdmin(ctx, adminPw)
	if err != nil {
		return err
	}
	if generated != "" {
		// Printed once, on stdout only, never logged.
		fmt.Fprintf(env.stdout, "administrator %q password (shown once, change it after logging in): %s\n", cfg.Admin.User, generated)
	}

	taskStore, err := task.NewBoltStore(wdb)
	if err != nil {
		return err
	}
	maxTasks := cfg.Limits.MaxRunningTasks
	if maxTasks == 0 {
		maxTasks = 2
	}
	tasks := task.New(task.Config{Clock: clk, Store: taskStore, MaxRunning: maxTasks, Logf: func(f string, a ...any) { log.Error(fmt.Sprintf(f, a...)) }})
	settings, err := web.NewBoltSettings(wdb)
	if err != nil {
		return err
	}
	srv, err := web.New(web.Config{
		Clock: clk, Logger: log, Auth: am, Tasks: tasks, Jobs: db, Inventory: inv,
		Points: rs, Repositories: rs, KnownRepository: rs.Has, Events: db, VMStates: db, Settings: settings,
		DefaultSettings: web.Settings{TimeZone: loc.String(), EventRetentionDays: 90},
		TrustProxy:      cfg.API.TrustProxy,
	})
	if err != nil {
		return err
	}
	// The scheduler needs a backup runner; the engine is not wired into the
	// daemon yet, so jobs are stored and validated but do not run (run now
	// answers 503). See the report of issue 7.

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	scheme := "http"
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if !cfg.TLS.Disable {
		certFile, keyFile := cfg.TLS.CertFile, cfg.TLS.KeyFile
		if certFile == "" {
			certFile, keyFile, err = selfSigned(filepath.Join(cfg.StateDir, "tls"), cfg.Listen, log)
			if err != nil {
				ln.Close()
				return err
			}
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			ln.Close()
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
	if serveReady != nil {
		serveReady(addr)
	}
	select {
	case err := <-errc:
		_ = tasks.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Stop accepting requests (SSE streams end as their contexts are
	// cancelled), then cancel running tasks and wait for them.
	go func() {
		<-sctx.Done()
		_ = hs.Close()
	}()
	if err := tasks.Close(sctx); err != nil {
		log.Error("tasks did not end in time", "err", err)
	}
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	<-errc
	log.Info("stopped")
	return nil
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
