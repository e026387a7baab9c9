package s3store

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// VersitygwEnv names the versitygw binary the S3 tests run (set by
// `make test`, which builds it once into $(HOME)/.cache/vmvault/bin).
const VersitygwEnv = "VMVAULT_VERSITYGW"

// versitygwVersion is the S3 server the tests run.
const versitygwVersion = "v1.8.0"

// TestServer is a real S3 server (versitygw's posix backend) on loopback,
// with its credentials set in the environment for the test.
type TestServer struct {
	Endpoint string // 127.0.0.1:port
	Dir      string // the posix backend's root
	PID      int    // the server process (benchmarks read its CPU time)
}

// CPUSeconds returns the server process's user+system CPU seconds so far
// (/proc/PID/stat): benchmarks charge the gateway, which shares the
// machine's cores with the appliance, with what it spent.
func (s *TestServer) CPUSeconds(tb testing.TB) float64 {
	tb.Helper()
	return ProcessCPU(tb, s.PID)
}

// ProcessCPU returns a process's user+system CPU seconds so far.
func ProcessCPU(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatalf("CPU of process %d: %v", pid, err)
	}
	// The command name may hold spaces: fields start after the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64) // utime (field 14)
	st, _ := strconv.ParseFloat(f[12], 64) // stime (field 15)
	return (ut + st) / 100                 // USER_HZ is 100 on Linux
}

// Location returns s3:http://endpoint/bucket[/prefix].
func (s *TestServer) Location(bucket, prefix string) string {
	l := "s3:http://" + s.Endpoint + "/" + bucket
	if prefix != "" {
		l += "/" + prefix
	}
	return l
}

// versitygwBinary finds the server: $VMVAULT_VERSITYGW, the make cache, or
// builds it into the cache (about 2 minutes); it never skips.
func versitygwBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(VersitygwEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v (run make versitygw)", VersitygwEnv, p, err)
		}
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatalf("no home directory for the versitygw cache (set %s): %v", VersitygwEnv, err)
	}
	bin := filepath.Join(home, ".cache", "vmvault", "bin")
	p := filepath.Join(bin, "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Logf("versitygw not found: building %s into %s (about 2 minutes; `make versitygw` does it once)", versitygwVersion, bin)
	cmd := exec.Command("go", "install", "github.com/versity/versitygw/cmd/versitygw@"+versitygwVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build versitygw (needed by the S3 suite; set %s to a binary): %v\n%s", VersitygwEnv, err, out)
	}
	return p
}

// StartTestServer starts versitygw on a free loopback port for t and sets
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_REGION (t.Setenv).
func StartTestServer(t testing.TB) *TestServer {
	t.Helper()
	return StartTestServerWith(t)
}

// StartTestServerWith is StartTestServer with flags for the posix backend
// (e.g. "--data-integrity-etag": CRC-derived ETags instead of MD5).
func StartTestServerWith(t testing.TB, posixFlags ...string) *TestServer {
	t.Helper()
	bin := versitygwBinary(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	endpoint := "127.0.0.1:" + strconv.Itoa(port)
	access, secret := "vmvaulttest", fmt.Sprintf("secret-%d", time.Now().UnixNano())
	args := append([]string{"--access", access, "--secret", secret, "--port", endpoint, "posix"}, posixFlags...)
	cmd := exec.Command(bin, append(args, root)...)
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", endpoint, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("versitygw did not listen on %s: %v\n%s", endpoint, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_REGION", "us-east-1")
	return &TestServer{Endpoint: endpoint, Dir: root, PID: cmd.Process.Pid}
}

// NewTestStore starts a server and returns a Store on a fresh bucket.
func NewTestStore(t testing.TB, bucket, prefix string) (*Store, *TestServer) {
	t.Helper()
	srv := StartTestServer(t)
	tg, err := ParseTarget(srv.Location(bucket, prefix)[len("s3:"):])
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(context.Background(), tg, Options{StageDir: t.TempDir(), CreateBucket: true, PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return st, srv
}
