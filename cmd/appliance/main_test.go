package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vmvault/vmvault/repository"
)

// TestMain doubles as a helper process: with VMVAULT_TEST_HOLD_REPO set, the
// test binary opens that repository, says so, and holds it until killed,
// which lets tests prove the cross-process repository lock.
func TestMain(m *testing.M) {
	if dir := os.Getenv("VMVAULT_TEST_HOLD_REPO"); dir != "" {
		r, err := repository.Open(context.Background(), dir, []byte(os.Getenv("VMVAULT_PASSWORD")), repository.OpenOptions{})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		defer r.Close()
		fmt.Println("holding")
		select {} // until killed
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// applianceBinary builds the appliance once per test run, for tests that
// need a separate process (kill -9, cross-process locks).
func applianceBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "vmvault-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "appliance")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}
