package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// The API under load: 50 clients with bearer tokens poll GET /tasks and
// GET /tasks/{id} and list GET /restore-points while backups of four lab
// VMs run, round after round (two backup tasks at a time, new data between
// rounds). Every request must answer 200 and the 99th percentile must stay
// under a bound generous enough for -race on two shared cores; the
// percentiles per endpoint are logged. BenchmarkServeAPIUnderLoad is the
// same load without the race detector, for docs/PERFORMANCE.md.

const (
	loadClients   = 50
	loadPerClient = 120 // requests per client in the test: the load overlaps the backup rounds
	loadP99Bound  = 2 * time.Second
)

// loadEndpoints are the polled endpoints, in the order a client cycles them.
var loadEndpoints = []string{"GET /tasks", "GET /tasks/{id}", "GET /restore-points"}

// loadEnv is a daemon on a lab with backups running in the background.
type loadEnv struct {
	addr, token string
	taskIDs     atomic.Pointer[[]string] // backup tasks created so far
	rounds      atomic.Int32             // backup rounds completed
	backupErr   atomic.Pointer[string]
	stopBackups func() // stops after the current round; waits
}

// startLoadDaemon runs `appliance serve` in process (so -race watches the
// server under concurrent load) and returns its address.
func startLoadDaemon(tb testing.TB, dir, cfgYAML string, vars map[string]string) string {
	tb.Helper()
	cfgPath := filepath.Join(dir, "vmvault.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgYAML), 0o600); err != nil {
		tb.Fatal(err)
	}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	env := &cliEnv{stdout: io.Discard, stderr: &lockedWriter{w: &stderr}, getenv: func(k string) string { return vars[k] },
		serveReady: func(addr string) { ready <- addr }}
	go func() { done <- run(ctx, env, []string{"serve", "--config", cfgPath}) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				tb.Errorf("serve exit %d", code)
			}
		case <-time.After(shutdownGrace + 10*time.Second):
			tb.Error("serve did not stop")
		}
	})
	select {
	case addr := <-ready:
		return addr
	case code := <-done:
		tb.Fatalf("serve exited %d", code)
	case <-time.After(60 * time.Second):
		tb.Fatal("serve did not start")
	}
	return ""
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// newLoadEnv starts the lab, the daemon and the backup rounds, and returns
// once the first backup task runs.
func newLoadEnv(tb testing.TB) *loadEnv {
	tb.Helper()
	const capacity = 16 << 20
	l, err := lab.Start(context.Background(), lab.Options{DiskCapacity: capacity})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Close)
	names := l.VMNames()
	for i, vm := range names {
		if err := l.WriteDisk(vm, 0, 0, randBytes(uint64(300+i), 4<<20)); err != nil {
			tb.Fatal(err)
		}
	}
	dir := tb.TempDir()
	repoDir := filepath.Join(dir, "repo")
	if err := repository.Init(context.Background(), repoDir, []byte("repo-pass"), repository.InitOptions{Chunker: repository.TestChunker, KDF: repository.TestKDF}); err != nil {
		tb.Fatal(err)
	}
	cfgYAML := fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: %s
log_level: warn
vcenter: {url: %q, username: %s, password_env: VC_PASS, thumbprint: %q}
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
limits: {max_running_tasks: 2}
`, filepath.Join(dir, "state"), l.URL().String(), l.Username(), l.Thumbprint(), repoDir)
	addr := startLoadDaemon(tb, dir, cfgYAML, map[string]string{"MAIN_PASS": "repo-pass", "VC_PASS": l.Password(), "VMVAULT_ADMIN_PASSWORD": "admin-secret-8"})
	e := &loadEnv{addr: addr, token: loadToken(tb, addr, "admin-secret-8")}
	e.taskIDs.Store(&[]string{})

	c := &http.Client{Timeout: 60 * time.Second}
	do := func(method, path string, body any) (int, []byte, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, "http://"+addr+path, rd)
		req.Header.Set("Authorization", "Bearer "+e.token)
		res, err := c.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, b, err
	}
	code, body, err := do("GET", "/api/v1/vms", nil)
	var inv []struct {
		InstanceUUID, Name string
		InInventory        bool
	}
	if err != nil || code != 200 || json.Unmarshal(body, &inv) != nil {
		tb.Fatalf("vms: %d %v %s", code, err, body)
	}
	var uuids []string
	for _, v := range inv {
		if v.InInventory {
			uuids = append(uuids, v.InstanceUUID)
		}
	}
	if len(uuids) < 4 {
		tb.Fatalf("inventory %s", body)
	}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		e.backupErr.CompareAndSwap(nil, &msg)
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	firstRunning := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(finished)
		defer once.Do(func() { close(firstRunning) })
		rng := rand.New(rand.NewPCG(5, 6))
		for round := 0; ; round++ {
			// Two tasks of two VMs each run side by side (max_running_tasks: 2).
			var ids []string
			for _, half := range [][]string{uuids[:2], uuids[2:4]} {
				code, body, err := do("POST", "/api/v1/backups", map[string]any{"vms": half})
				var tk struct{ ID string }
				if err != nil || code != 202 || json.Unmarshal(body, &tk) != nil {
					fail("backup round %d: %d %v %s", round, code, err, body)
					return
				}
				ids = append(ids, tk.ID)
				all := append(slices.Clone(*e.taskIDs.Load()), tk.ID)
				e.taskIDs.Store(&all)
			}
			for _, id := range ids {
				for {
					code, body, err := do("GET", "/api/v1/tasks/"+id, nil)
					var info task.Info
					if err != nil || code != 200 || json.Unmarshal(body, &info) != nil {
						fail("task %s: %d %v %s", id, code, err, body)
						return
					}
					if info.State == task.Running {
						once.Do(func() { close(firstRunning) })
					}
					if info.State.Final() {
						if info.State != task.Succeeded {
							fail("backup task %s ended %s: %s", id, info.State, info.Error)
							return
						}
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			e.rounds.Add(1)
			select {
			case <-stop:
				if round >= 1 {
					return
				}
			default:
			}
			// New data, so the next round's incrementals have work.
			for i, vm := range names {
				off := rng.Int64N(capacity>>20-1) << 20
				if err := l.WriteDisk(vm, 0, off, randBytes(uint64(1000*round+i), 1<<20)); err != nil {
					fail("write %s: %v", vm, err)
					return
				}
			}
		}
	}()
	e.stopBackups = func() {
		close(stop)
		<-finished
	}
	tb.Cleanup(func() {
		select {
		case <-finished:
		default:
			e.stopBackups()
		}
	})
	<-firstRunning
	if p := e.backupErr.Load(); p != nil {
		tb.Fatal(*p)
	}
	return e
}

// loadToken logs in as the administrator and creates an operator token.
func loadToken(tb testing.TB, addr, password string) string {
	tb.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	post := func(path string, body any, hdr map[string]string, cookies []*http.Cookie) (*http.Response, []byte) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", "http://"+addr+path, bytes.NewReader(b))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		res, err := hc.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		defer res.Body.Close()
		rb, _ := io.ReadAll(res.Body)
		return res, rb
	}
	res, body := post("/api/v1/auth/login", map[string]string{"username": "admin", "password": password}, nil, nil)
	var login struct{ CSRFToken string }
	if res.StatusCode != 200 || json.Unmarshal(body, &login) != nil {
		tb.Fatalf("login %d %s", res.StatusCode, body)
	}
	res, body = post("/api/v1/auth/tokens", map[string]string{"name": "load", "role": "operator"}, map[string]string{"X-CSRF-Token": login.CSRFToken}, res.Cookies())
	var tok struct{ Token string }
	if res.StatusCode != 201 || json.Unmarshal(body, &tok) != nil || tok.Token == "" {
		tb.Fatalf("token %d %s", res.StatusCode, body)
	}
	return tok.Token
}

// loadStats is what the clients saw, per endpoint.
type loadStats struct {
	lat       map[string][]time.Duration
	errors    map[string]int
	serverErr map[string]int // 5xx answers
	samples   []string       // the first few failures, for the report
}

// poll runs clients concurrent clients, each making perClient requests
// cycling through loadEndpoints, and returns their latencies.
func (e *loadEnv) poll(clients, perClient int) *loadStats {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	st := &loadStats{lat: map[string][]time.Duration{}, errors: map[string]int{}, serverErr: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 99))
			lat := map[string][]time.Duration{}
			errs, fives := map[string]int{}, map[string]int{}
			var samples []string
			for i := range perClient {
				ep := loadEndpoints[(c+i)%len(loadEndpoints)]
				path := "/api/v1/tasks"
				switch ep {
				case "GET /tasks/{id}":
					ids := *e.taskIDs.Load()
					path = "/api/v1/tasks/" + ids[rng.IntN(len(ids))]
				case "GET /restore-points":
					path = "/api/v1/restore-points"
				}
				req, _ := http.NewRequest("GET", "http://"+e.addr+path, nil)
				req.Header.Set("Authorization", "Bearer "+e.token)
				start := time.Now()
				res, err := hc.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				d := time.Since(start)
				switch {
				case err != nil:
					errs[ep]++
					samples = append(samples, fmt.Sprintf("%s: %v", path, err))
				case res.StatusCode >= 500:
					fives[ep]++
					samples = append(samples, fmt.Sprintf("%s: %d", path, res.StatusCode))
				case res.StatusCode != 200:
					errs[ep]++
					samples = append(samples, fmt.Sprintf("%s: %d", path, res.StatusCode))
				}
				lat[ep] = append(lat[ep], d)
			}
			mu.Lock()
			defer mu.Unlock()
			for ep, l := range lat {
				st.lat[ep] = append(st.lat[ep], l...)
			}
			for ep, n := range errs {
				st.errors[ep] += n
			}
			for ep, n := range fives {
				st.serverErr[ep] += n
			}
			if len(st.samples) < 10 {
				st.samples = append(st.samples, samples[:min(len(samples), 10-len(st.samples))]...)
			}
		})
	}
	wg.Wait()
	return st
}

// percentile returns the q-quantile (nearest rank) of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// table renders the percentiles as a Markdown table.
func (st *loadStats) table() string {
	var b strings.Builder
	b.WriteString("| endpoint | requests | p50 | p90 | p99 | max | errors | 5xx |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, ep := range loadEndpoints {
		l := slices.Clone(st.lat[ep])
		slices.Sort(l)
		r := func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d | %d |\n", ep, len(l),
			r(percentile(l, 0.50)), r(percentile(l, 0.90)), r(percentile(l, 0.99)), r(percentile(l, 1)), st.errors[ep], st.serverErr[ep])
	}
	return b.String()
}

func TestServeAPIUnderLoad(t *testing.T) {
	e := newLoadEnv(t)
	start := time.Now()
	st := e.poll(loadClients, loadPerClient)
	elapsed := time.Since(start)
	roundsDuring := e.rounds.Load()
	e.stopBackups()
	if p := e.backupErr.Load(); p != nil {
		t.Fatalf("backups under load: %s", *p)
	}
	total := 0
	for _, l := range st.lat {
		total += len(l)
	}
	t.Logf("%d clients, %d requests in %v (%.0f/s) while backup rounds ran (%d finished during the load, %d in all)\n%s",
		loadClients, total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), roundsDuring, e.rounds.Load(), st.table())
	if total != loadClients*loadPerClient {
		t.Fatalf("%d requests, want %d", total, loadClients*loadPerClient)
	}
	for _, ep := range loadEndpoints {
		if st.errors[ep] > 0 || st.serverErr[ep] > 0 {
			t.Errorf("%s: %d errors, %d 5xx: %q", ep, st.errors[ep], st.serverErr[ep], st.samples)
		}
		l := slices.Clone(st.lat[ep])
		slices.Sort(l)
		if p99 := percentile(l, 0.99); p99 > loadP99Bound {
			t.Errorf("%s: p99 %v above %v", ep, p99, loadP99Bound)
		}
	}
	if e.rounds.Load() < 2 {
		t.Errorf("%d backup rounds, want at least 2", e.rounds.Load())
	}
}

// BenchmarkServeAPIUnderLoad is the test's load without -race, for the
// figures in docs/PERFORMANCE.md ("API under load"); b.N requests are spread
// over the 50 clients:
//
//	go test -run XXX -bench ServeAPIUnderLoad -benchtime 40000x -v ./cmd/appliance
func BenchmarkServeAPIUnderLoad(b *testing.B) {
	e := newLoadEnv(b)
	per := max(1, b.N/loadClients)
	b.ResetTimer()
	start := time.Now()
	st := e.poll(loadClients, per)
	elapsed := time.Since(start)
	b.StopTimer()
	during := e.rounds.Load()
	e.stopBackups()
	if p := e.backupErr.Load(); p != nil {
		b.Fatalf("backups under load: %s", *p)
	}
	for _, ep := range loadEndpoints {
		if st.errors[ep] > 0 || st.serverErr[ep] > 0 {
			b.Errorf("%s: %d errors, %d 5xx: %q", ep, st.errors[ep], st.serverErr[ep], st.samples)
		}
	}
	var all []time.Duration
	for _, l := range st.lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	b.ReportMetric(float64(percentile(all, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(all, 0.99).Microseconds())/1000, "p99-ms")
	b.Logf("%d clients x %d requests in %v (%.0f/s); backup rounds finished during the load: %d, in all: %d\n%s",
		loadClients, per, elapsed.Round(time.Millisecond), float64(loadClients*per)/elapsed.Seconds(), during, e.rounds.Load(), st.table())
}
