package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
)

// login opens a session and returns options that send its cookie and CSRF header.
func (f *fixture) login(t *testing.T, user, pw string) (reqOpt, loginResponse) {
	t.Helper()
	r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": user, "password": pw})
	if r.status != 200 {
		t.Fatalf("login %s: %d %s", user, r.status, r.body)
	}
	var lr loginResponse
	r.json(t, &lr)
	var session string
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie {
			session = c.Value
		}
	}
	return func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
		r.Header.Set(csrfHeader, lr.CSRFToken)
	}, lr
}

func (f *fixture) users(t *testing.T) []auth.User {
	t.Helper()
	var us []auth.User
	r := f.admin("GET", "/api/v1/users", nil)
	if r.status != 200 {
		t.Fatalf("users: %d %s", r.status, r.body)
	}
	r.json(t, &us)
	return us
}

func TestUsersAPI(t *testing.T) {
	f := newFixture(t, nil)
	us := f.users(t)
	if len(us) != 1 || us[0].Username != "admin" || us[0].Role != auth.RoleAdministrator || us[0].Source != "local" || us[0].Created.IsZero() {
		t.Fatalf("initial users %+v", us)
	}
	// Bad input changes nothing.
	bad := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"unknown field", "POST", "/api/v1/users", `{"username":"u1","password":"long-password","role":"operator","admin":true}`, 400, "admin"},
		{"wrong type", "POST", "/api/v1/users", `{"username":"u1","password":12345678,"role":"operator"}`, 400, "password"},
		{"no username", "POST", "/api/v1/users", `{"password":"long-password","role":"operator"}`, 422, "username"},
		{"bad username", "POST", "/api/v1/users", `{"username":"a b","password":"long-password","role":"operator"}`, 422, "username"},
		{"vCenter-style name", "POST", "/api/v1/users", `{"username":"vsphere.local\\bob","password":"long-password","role":"operator"}`, 422, "username"},
		{"short password", "POST", "/api/v1/users", `{"username":"u1","password":"short","role":"operator"}`, 422, "password"},
		{"bad role", "POST", "/api/v1/users", `{"username":"u1","password":"long-password","role":"root"}`, 422, "role"},
		{"no role", "POST", "/api/v1/users", `{"username":"u1","password":"long-password"}`, 422, "role"},
		{"duplicate", "POST", "/api/v1/users", `{"username":"ADMIN","password":"long-password","role":"operator"}`, 409, ""},
		{"huge", "POST", "/api/v1/users", `{"username":"` + strings.Repeat("u", MaxBodyBytes) + `"}`, 413, ""},
		{"update nothing", "PUT", "/api/v1/users/admin", `{}`, 422, "role"},
		{"update bad role", "PUT", "/api/v1/users/admin", `{"role":"root"}`, 422, "role"},
		{"update short password", "PUT", "/api/v1/users/admin", `{"password":"x"}`, 422, "password"},
		{"update unknown field", "PUT", "/api/v1/users/admin", `{"name":"x"}`, 400, "name"},
		{"update unknown user", "PUT", "/api/v1/users/nobody", `{"role":"operator"}`, 404, ""},
		{"demote last admin", "PUT", "/api/v1/users/admin", `{"role":"operator"}`, 409, ""},
		{"delete last admin", "DELETE", "/api/v1/users/admin", ``, 409, ""},
		{"delete unknown", "DELETE", "/api/v1/users/nobody", ``, 404, ""},
	}
	for _, tc := range bad {
		r := f.admin(tc.method, tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: %d %s", tc.name, r.status, truncate(string(r.body), 200))
			continue
		}
		if tc.field != "" {
			r.fieldNamed(t, tc.field)
		} else if d := r.errBody(t); tc.status == 409 && strings.Contains(tc.name, "last admin") && d.Code != "last_administrator" {
			t.Errorf("%s: code %q", tc.name, d.Code)
		}
	}
	if got := f.users(t); len(got) != 1 || got[0].Role != auth.RoleAdministrator {
		t.Fatalf("bad input changed users: %+v", got)
	}
	if _, err := f.srv.cfg.Auth.Login(context.Background(), "x", "admin", testAdminPassword); err != nil {
		t.Fatalf("bad input changed the admin password: %v", err)
	}

	// Create an operator; it logs in, gets its role, and is held to it.
	r := f.admin("POST", "/api/v1/users", map[string]string{"username": "op1", "password": "op1-password", "role": "operator"})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var u auth.User
	r.json(t, &u)
	if u.Username != "op1" || u.Role != auth.RoleOperator || strings.Contains(string(r.body), "argon2") {
		t.Fatalf("created %s", r.body)
	}
	opSess, lr := f.login(t, "op1", "op1-password")
	if lr.Role != auth.RoleOperator {
		t.Fatalf("login role %s", lr.Role)
	}
	var me meResponse
	f.do("GET", "/api/v1/auth/me", nil, opSess).json(t, &me)
	if me.Username != "op1" || me.Role != auth.RoleOperator || me.CSRFToken != lr.CSRFToken || me.Source != "local" {
		t.Fatalf("me %+v", me)
	}
	if r := f.do("GET", "/api/v1/users", nil, opSess); r.status != 403 {
		t.Fatalf("operator lists users: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/repositories/main/check", nil, opSess); r.status != 202 {
		t.Fatalf("operator runs a check: %d %s", r.status, r.body)
	}
	// Promote: the live session gets the role.
	if r := f.admin("PUT", "/api/v1/users/op1", map[string]string{"role": "administrator"}); r.status != 200 {
		t.Fatalf("promote: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/api/v1/users", nil, opSess); r.status != 200 {
		t.Fatalf("promoted session lists users: %d", r.status)
	}
	// Two administrators now: admin can be demoted, then op1 is the last one.
	if r := f.admin("PUT", "/api/v1/users/admin", map[string]string{"role": "restore-only"}); r.status != 200 {
		t.Fatalf("demote admin: %d %s", r.status, r.body)
	}
	if r := f.do("DELETE", "/api/v1/users/op1", nil, opSess); r.status != 409 || r.errBody(t).Code != "last_administrator" {
		t.Fatalf("delete the last admin: %d %s", r.status, r.body)
	}
	if r := f.do("PUT", "/api/v1/users/admin", map[string]string{"role": "administrator"}, opSess); r.status != 200 {
		t.Fatalf("re-promote admin: %d %s", r.status, r.body)
	}
	// Deleting a user ends its sessions.
	if r := f.admin("DELETE", "/api/v1/users/op1", nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/api/v1/auth/me", nil, opSess); r.status != 401 {
		t.Fatalf("deleted user's session: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "op1", "password": "op1-password"}); r.status != 401 {
		t.Fatalf("deleted user logs in: %d", r.status)
	}
	// A password change through the API works for login; the caller's session survives.
	adminSess, _ := f.login(t, "admin", testAdminPassword)
	if r := f.do("PUT", "/api/v1/users/admin", map[string]string{"password": "new-admin-password"}, adminSess); r.status != 200 {
		t.Fatalf("change password: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/api/v1/auth/me", nil, adminSess); r.status != 200 {
		t.Fatalf("own session after password change: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "new-admin-password"}); r.status != 200 {
		t.Fatalf("login with the new password: %d", r.status)
	}
}

// Login of local users is rate limited like the administrator's.
func TestUsersLoginRateLimited(t *testing.T) {
	f := newFixture(t, nil)
	am, _ := auth.NewManager(auth.Config{Clock: f.clk, Store: mustAuthStore(t, f), UserBurst: 2, IPBurst: 100, Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}})
	f.srv.cfg.Auth = am
	if _, err := am.CreateUser(context.Background(), "op1", "op1-password", auth.RoleOperator); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		f.do("POST", "/api/v1/auth/login", map[string]string{"username": "op1", "password": "wrong-one"})
	}
	r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "op1", "password": "op1-password"})
	if r.status != 429 || r.errBody(t).Code != "rate_limited" {
		t.Fatalf("third attempt: %d %s", r.status, r.body)
	}
}

func TestSettingsTests(t *testing.T) {
	mailer := &recordingMailer{}
	f := newFixture(t, func(c *Config) { c.Mailer = mailer; c.VCenter = staticVCenter{} })
	tests := []struct {
		name, path, body string
		status           int
		field, code      string
	}{
		{"smtp ok", "/api/v1/settings/smtp/test", `{"to":"ops@example.com"}`, 200, "", ""},
		{"smtp no to", "/api/v1/settings/smtp/test", `{}`, 422, "to", ""},
		{"smtp bad address", "/api/v1/settings/smtp/test", `{"to":"not an address"}`, 422, "to", ""},
		{"smtp with name", "/api/v1/settings/smtp/test", `{"to":"Ops <ops@example.com>"}`, 422, "to", ""},
		{"smtp two", "/api/v1/settings/smtp/test", `{"to":"a@example.com, b@example.com"}`, 422, "to", ""},
		{"smtp unknown field", "/api/v1/settings/smtp/test", `{"to":"ops@example.com","cc":"x"}`, 400, "cc", ""},
		{"smtp empty body", "/api/v1/settings/smtp/test", ``, 400, "", ""},
		{"vcenter configured", "/api/v1/settings/vcenter/test", ``, 200, "", ""},
		{"vcenter given", "/api/v1/settings/vcenter/test", `{"url":"https://vc.example.com","username":"u","password":"p"}`, 200, "", ""},
		{"vcenter bad url", "/api/v1/settings/vcenter/test", `{"url":"ftp://vc"}`, 422, "url", ""},
		{"vcenter pin and insecure", "/api/v1/settings/vcenter/test", `{"url":"https://vc","thumbprint":"AA:BB","insecure":true}`, 422, "insecure", ""},
		{"vcenter newline", "/api/v1/settings/vcenter/test", `{"username":"a\nb"}`, 422, "username", ""},
		{"vcenter wrong type", "/api/v1/settings/vcenter/test", `{"insecure":"yes"}`, 400, "insecure", ""},
	}
	for _, tc := range tests {
		r := f.admin("POST", tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
			continue
		}
		if tc.field != "" {
			r.fieldNamed(t, tc.field)
		}
	}
	if len(mailer.to) != 1 || mailer.to[0] != "ops@example.com" {
		t.Fatalf("mails sent %v", mailer.to)
	}
	var res VCenterTestResult
	f.admin("POST", "/api/v1/settings/vcenter/test", `{"password":"wrong"}`).json(t, &res)
	if res.OK || res.Message == "" {
		t.Fatalf("refused test %+v", res)
	}
	mailer.err = errors.New("535 5.7.8 authentication failed")
	r := f.admin("POST", "/api/v1/settings/smtp/test", `{"to":"ops@example.com"}`)
	if d := r.errBody(t); r.status != 502 || d.Code != "smtp_failed" || !strings.Contains(d.Message, "535") {
		t.Fatalf("smtp failure: %d %s", r.status, r.body)
	}
	// Not configured.
	g := newFixture(t, nil)
	r = g.admin("POST", "/api/v1/settings/smtp/test", `{"to":"ops@example.com"}`)
	if r.status != 409 || r.errBody(t).Code != "smtp_not_configured" {
		t.Fatalf("no mailer: %d %s", r.status, r.body)
	}
	if r := g.admin("POST", "/api/v1/settings/vcenter/test", ``); r.status != 501 {
		t.Fatalf("no tester: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/api/v1/settings/smtp/test", `{"to":"ops@example.com"}`, bearer(f.tokens[auth.RoleOperator])); r.status != 403 {
		t.Fatalf("operator: %d", r.status)
	}
}

// sseClient reads one /stream connection.
type sseClient struct {
	res     *http.Response
	events  chan sseEvent
	cancel  context.CancelFunc
	skipped []sseEvent // passed over by next
}

type sseEvent struct {
	name, data string
}

func (f *fixture) openStream(t *testing.T, opt reqOpt) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/api/v1/stream", nil)
	opt(req)
	res, err := f.http.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	c := &sseClient{res: res, events: make(chan sseEvent, 1000), cancel: cancel}
	go func() {
		defer close(c.events)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ": "):
				c.events <- sseEvent{name: "comment", data: line[2:]}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			case line == "" && ev.name != "":
				c.events <- ev
				ev = sseEvent{}
			}
		}
	}()
	return c
}

// next returns the next event of a kind (skipping others), or fails.
func (c *sseClient) next(t *testing.T, name string) sseEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatalf("stream ended while waiting for %q", name)
			}
			if ev.name == name {
				return ev
			}
			c.skipped = append(c.skipped, ev)
		case <-timeout:
			t.Fatalf("no %q event", name)
		}
	}
}

// ended waits for the stream to end and returns the events it still got.
func (c *sseClient) ended(t *testing.T) []sseEvent {
	t.Helper()
	var rest []sseEvent
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return rest
			}
			rest = append(rest, ev)
		case <-timeout:
			t.Fatal("stream did not end")
		}
	}
}

// nextTask returns the next "task" event of the stream, which must be about id.
func nextTask(t *testing.T, c *sseClient, id string) task.Info {
	t.Helper()
	var ti task.Info
	if err := json.Unmarshal([]byte(c.next(t, "task").data), &ti); err != nil {
		t.Fatal(err)
	}
	if ti.ID != id {
		t.Fatalf("task %s, want %s", ti.ID, id)
	}
	return ti
}

func waitGoroutines(t *testing.T, max int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if runtime.NumGoroutine() <= max {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	t.Fatalf("%d goroutines, want <= %d:\n%s", runtime.NumGoroutine(), max, buf[:n])
}

func TestStream(t *testing.T) {
	// A registry that passes every progress report on: the stream's own
	// throttle is what keeps clients at 4 a second per task.
	fast := task.New(task.Config{ProgressEvery: time.Nanosecond})
	t.Cleanup(func() { fast.Close(context.Background()) })
	f := newFixture(t, func(c *Config) { c.StreamKeepAlive = 50 * time.Millisecond; c.Tasks = fast })
	f.http.Client().Transport.(*http.Transport).DisableKeepAlives = true
	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	before := runtime.NumGoroutine()

	a := f.openStream(t, ro)
	sess, _ := f.login(t, "admin", testAdminPassword)
	b := f.openStream(t, sess) // a browser session (GET: no CSRF needed, sent anyway)
	a.next(t, "comment")       // connected
	waitStreams(t, f, 2)

	// Task updates: queued, running, progress (throttled on the server's
	// clock, f.clk), final state. Running starts the task's interval: a
	// progress report is held until the fake clock passes it, then sent;
	// reports held when the task ends are dropped (the final state carries
	// the progress).
	steps := make(chan int64)
	var endTask sync.Once // the task ends even when the test fails midway
	defer endTask.Do(func() { close(steps) })
	info, err := fast.Start("check", "main", func(ctx context.Context, rep *task.Reporter) (any, error) {
		for n := range steps {
			rep.Progress("read", n, 400)
		}
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	timers := f.clk.Pending()
	steps <- 1
	// Both streams hold it and arm a flush timer on the fake clock.
	wait, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	if !f.clk.BlockUntil(timers+2, wait.Done()) {
		t.Fatal("the streams armed no flush timer on the server's clock")
	}
	f.clk.Advance(streamTaskEvery)
	var progress [2][]int64
	for i, c := range []*sseClient{a, b} {
		for len(progress[i]) == 0 {
			ti := nextTask(t, c, info.ID)
			if ti.State == task.Running && ti.Progress.Done > 0 {
				progress[i] = append(progress[i], ti.Progress.Done)
			}
		}
	}
	steps <- 2 // held: the clock has not moved since the last send
	steps <- 3
	endTask.Do(func() { close(steps) })
	for i, c := range []*sseClient{a, b} {
		for {
			ti := nextTask(t, c, info.ID)
			if ti.State.Final() {
				if ti.State != task.Succeeded {
					t.Fatalf("final state %s", ti.State)
				}
				break
			}
			if ti.Progress.Done > 0 {
				progress[i] = append(progress[i], ti.Progress.Done)
			}
		}
		if !slices.Equal(progress[i], []int64{1}) {
			t.Fatalf("stream %d: progress events %v, want [1] (2 and 3 held by the throttle until the task ended)", i, progress[i])
		}
	}

	// Scheduler events.
	f.srv.ObserveEvent(policy.Event{Time: f.clk.Now(), Severity: policy.SeverityError, Kind: policy.EventVMFailed, Subject: "web01", Message: "snapshot failed"})
	for _, c := range []*sseClient{a, b} {
		var e policy.Event
		if err := json.Unmarshal([]byte(c.next(t, "event").data), &e); err != nil || e.Message != "snapshot failed" {
			t.Fatalf("event %+v %v", e, err)
		}
		if ev := c.next(t, "comment"); ev.data != "keepalive" {
			t.Fatalf("comment %q", ev.data)
		}
	}

	// Client disconnect releases the subscriptions.
	a.cancel()
	a.ended(t)
	waitStreams(t, f, 1)

	// Server shutdown (Close) ends the remaining stream; nothing is left running.
	f.srv.Close()
	b.ended(t)
	waitStreams(t, f, 0)
	if n := fast.Subscribers(); n != 0 {
		t.Fatalf("task subscribers left: %d", n)
	}
	f.http.CloseClientConnections()
	waitGoroutines(t, before)
	// After Close, a new stream ends at once.
	c := f.openStream(t, ro)
	c.ended(t)
}

// Closing the task registry (the daemon does it at shutdown) ends streams
// with an error event telling clients to reconnect.
func TestStreamEndsWithRegistry(t *testing.T) {
	f := newFixture(t, nil)
	c := f.openStream(t, bearer(f.tokens[auth.RoleRestoreOnly]))
	waitStreams(t, f, 1)
	if err := f.tasks.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rest := c.ended(t)
	if len(rest) == 0 || rest[len(rest)-1].name != "error" {
		t.Fatalf("last events %+v", rest)
	}
	waitStreams(t, f, 0)
}

// A subscriber that does not read is dropped by the event hub without
// blocking publishers; the others keep receiving.
func TestEventHubDropsSlow(t *testing.T) {
	h := newEventHub()
	slow, _ := h.subscribe(2)
	fast, unsub := h.subscribe(100)
	defer unsub()
	done := make(chan struct{})
	go func() {
		for i := range 50 {
			h.publish(policy.Event{Message: string(rune('a' + i%26))})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publish blocked on a slow subscriber")
	}
	n := 0
	for range slow {
		n++
	}
	if n != 2 {
		t.Fatalf("slow subscriber got %d events before being dropped, buffer 2", n)
	}
	if len(fast) != 50 || h.count() != 1 {
		t.Fatalf("fast got %d, subscribers %d", len(fast), h.count())
	}
	h.close()
	if _, ok := <-fast; !ok {
		t.Fatal("buffered events are still delivered after close")
	}
	if ch, _ := h.subscribe(1); ch != nil {
		if _, ok := <-ch; ok {
			t.Fatal("subscribe after close must be closed")
		}
	}
}

func waitStreams(t *testing.T, f *fixture, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f.srv.Streams() == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("streams %d, want %d", f.srv.Streams(), n)
}

// blockingRunner is the backup engine's side of policy.Runner for web's
// tests: it reports progress and waits to be released.
type blockingRunner struct {
	started chan string
	release chan struct{}
}

func (b *blockingRunner) RunBackup(ctx context.Context, job policy.Job, vm policy.VM, progress func(policy.Progress)) (policy.BackupResult, error) {
	progress(policy.Progress{Phase: "disk 1/1", BytesDone: 1 << 20, BytesTotal: 4 << 20})
	b.started <- vm.Name
	select {
	case <-b.release:
		return policy.BackupResult{PointID: "0123456789abcdef", Bytes: 4 << 20}, nil
	case <-ctx.Done():
		return policy.BackupResult{}, ctx.Err()
	}
}

// The scheduler's backups are not registry tasks: the dashboard and the
// stream show them from the scheduler's status, with their progress, and
// the stream says when the scheduler goes idle.
func TestSchedulerActivity(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.admin("POST", "/api/v1/jobs", validJob("nightly")); r.status != 201 {
		t.Fatal(r.status)
	}
	runner := &blockingRunner{started: make(chan string, 1), release: make(chan struct{})}
	sched, err := policy.New(policy.Config{Clock: clock.Real(), Store: f.db, Runner: runner, Inventory: f.inv, OnEvent: f.srv.ObserveEvent})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f.srv.cfg.Scheduler = sched

	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	c := f.openStream(t, ro)
	defer c.cancel()
	if r := f.do("POST", "/api/v1/jobs/nightly/run", nil, bearer(f.tokens[auth.RoleOperator])); r.status != 202 {
		t.Fatalf("run now: %d %s", r.status, r.body)
	}
	select {
	case <-runner.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the backup did not start")
	}
	var a Activity
	if err := json.Unmarshal([]byte(c.next(t, "scheduler").data), &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Backups) != 1 || a.Backups[0].VM != "web01" || a.Backups[0].Job != "nightly" || a.Backups[0].Done != 1<<20 || a.Backups[0].Total != 4<<20 || a.Backups[0].Run == "" {
		t.Fatalf("activity %+v", a)
	}
	var d Dashboard
	f.do("GET", "/api/v1/dashboard", nil, ro).json(t, &d)
	if len(d.Scheduler.Backups) != 1 || d.Scheduler.Backups[0].InstanceUUID != testVM.InstanceUUID {
		t.Fatalf("dashboard scheduler %+v", d.Scheduler)
	}
	close(runner.release)
	if err := json.Unmarshal([]byte(c.next(t, "scheduler").data), &a); err != nil || len(a.Backups) != 0 {
		t.Fatalf("after the backup: %+v %v", a, err)
	}
	// The run is in the job's history.
	var runs []JobRunView
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.do("GET", "/api/v1/jobs/nightly/runs", nil, ro).json(t, &runs)
		if len(runs) == 1 && runs[0].State == "succeeded" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(runs) != 1 || runs[0].State != "succeeded" || runs[0].Trigger != "manual" || len(runs[0].VMs) != 1 || runs[0].VMs[0].RestorePoint != "0123456789abcdef" {
		t.Fatalf("runs %+v", runs)
	}
	// And the scheduler's events reached the stream.
	kinds := map[string]bool{}
	for _, ev := range c.skipped {
		var e policy.Event
		if ev.name == "event" && json.Unmarshal([]byte(ev.data), &e) == nil && e.Job == "nightly" {
			kinds[e.Kind] = true
		}
	}
	if !kinds[policy.EventJobStarted] {
		t.Fatalf("scheduler events on the stream: %v (all: %+v)", kinds, c.skipped)
	}
}
