package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// openPty returns a pseudo-terminal's master and slave ends, made with
// /dev/ptmx as a terminal emulator does (no library: creack/pty is not a
// dependency).
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("SKIP LOUDLY: no pseudo-terminals on this machine (%v): the bar's terminal detection is untested here; TestProgressForced still covers its rendering", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open pty slave: %v", err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100}); err != nil {
		t.Fatalf("set pty size: %v", err)
	}
	return m, s
}

// runCLIStderr runs the command in process with stderr going to w.
func runCLIStderr(t *testing.T, w io.Writer, vars map[string]string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	if vars == nil {
		vars = map[string]string{}
	}
	vars["VMVAULT_PASSWORD"] = testPassword
	env := &cliEnv{stdout: &out, stderr: w, getenv: func(k string) string { return vars[k] }}
	return run(context.Background(), env, args), out.String()
}

// barDrawn reports whether s holds a redrawn progress line.
func barDrawn(s string) bool {
	return strings.Contains(s, "\x1b[K") && strings.Contains(s, "%") && strings.Contains(s, "/s")
}

// TestProgressOnTerminal: on a terminal, image backup, image restore and
// repo check draw a bar on stderr; with --json, or when stderr is a pipe,
// they print nothing extra.
func TestProgressOnTerminal(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	img := makeRandom(t, dir, 24<<20, 7)

	type step struct {
		name  string
		args  []string
		wantJ bool // --json: no bar even on a terminal
	}
	out := filepath.Join(dir, "out.img")
	steps := []step{
		{"image backup", []string{"image", "backup", "--repo", repo, "--vm", "vm1", "--force-read", img}, false},
		{"image backup --json", []string{"image", "backup", "--repo", repo, "--vm", "vm1", "--force-read", "--json", img}, true},
		{"image restore", []string{"image", "restore", "--repo", repo, "--restore-point", "", "--force", out}, false},
		{"repo check", []string{"repo", "check", "--repo", repo, "--read-data"}, false},
		{"repo check --json", []string{"repo", "check", "--repo", repo, "--read-data", "--json"}, true},
		{"restore-disk --output", []string{"restore-disk", "--repo", repo, "--restore-point", "", "--disk", "0", "--output", "OUT"}, false},
		{"restore-disk --output --json", []string{"restore-disk", "--repo", repo, "--restore-point", "", "--disk", "0", "--output", "OUT", "--json"}, true},
		{"repo reclaim", []string{"repo", "reclaim", "--repo", repo}, false},
		{"repo recatalog", []string{"repo", "recatalog", "--repo", repo}, false},
	}
	var point string
	outs := 0
	// fill replaces "" by the restore point and OUT by a new file.
	fill := func(args []string) []string {
		args = append([]string(nil), args...)
		for i, a := range args {
			switch a {
			case "":
				args[i] = point
			case "OUT":
				outs++
				args[i] = filepath.Join(dir, fmt.Sprintf("disk-%d.img", outs))
			}
		}
		return args
	}
	for _, st := range steps {
		t.Run(st.name+" on a pty", func(t *testing.T) {
			args := fill(st.args)
			m, s := openPty(t)
			defer m.Close()
			var buf bytes.Buffer
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(&buf, m) }()
			code, stdout := runCLIStderr(t, s, nil, args...)
			s.Close()
			wg.Wait() // the master reads EIO once the slave is closed
			if code != 0 {
				t.Fatalf("exit %d: %s", code, buf.String())
			}
			if st.name == "image backup" {
				point = lastLine(stdout)
			}
			// Reclaim and recatalog of a small repository may finish
			// between two reports: their phases are drawn without a rate.
			drawn := barDrawn(buf.String())
			if strings.HasPrefix(st.name, "repo re") {
				drawn = strings.Contains(buf.String(), "\x1b[K")
			}
			if drawn == st.wantJ {
				t.Fatalf("bar drawn %v, want %v; stderr on the pty: %q", drawn, !st.wantJ, buf.String())
			}
		})
		t.Run(st.name+" on a pipe", func(t *testing.T) {
			args := fill(st.args)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(&buf, r) }()
			code, _ := runCLIStderr(t, w, nil, args...)
			w.Close()
			wg.Wait()
			r.Close()
			if code != 0 {
				t.Fatalf("exit %d: %s", code, buf.String())
			}
			if s := buf.String(); strings.ContainsAny(s, "\r\x1b") {
				t.Fatalf("stderr on a pipe holds terminal control characters: %q", s)
			}
		})
	}
}

// TestProgressForced: VMVAULT_PROGRESS=always draws the bar on any stderr
// (for `script` and CI logs that want it), =never suppresses it on a tty.
func TestProgressForced(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	img := makeRandom(t, dir, 8<<20, 8)
	var buf bytes.Buffer
	code, _ := runCLIStderr(t, &buf, map[string]string{"VMVAULT_PROGRESS": "always"},
		"image", "backup", "--repo", repo, "--vm", "vm1", "--force-read", img)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, buf.String())
	}
	if !barDrawn(buf.String()) || !strings.Contains(buf.String(), "back up "+filepath.Base(img)) {
		t.Fatalf("VMVAULT_PROGRESS=always drew no bar: %q", buf.String())
	}
	m, s := openPty(t)
	defer m.Close()
	var pbuf bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); io.Copy(&pbuf, m) }()
	code, _ = runCLIStderr(t, s, map[string]string{"VMVAULT_PROGRESS": "never"},
		"image", "backup", "--repo", repo, "--vm", "vm1", "--force-read", img)
	s.Close()
	wg.Wait()
	if code != 0 || strings.Contains(pbuf.String(), "\x1b[K") {
		t.Fatalf("VMVAULT_PROGRESS=never: exit %d, stderr %q", code, pbuf.String())
	}
}

// TestBackupProgressBar: `backup` (VMs from vCenter) draws one bar for all
// VMs; with --json it draws none.
func TestBackupProgressBar(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 4 << 20})
	repo := initRepo(t)
	vars := backupEnv(l.URL().String(), l.Username(), l.Password())
	vars["VMVAULT_PROGRESS"] = "always"
	vc := []string{"--thumbprint", l.Thumbprint(), "--unsafe-no-fsync", "--quiesce", "off"}
	for _, asJSON := range []bool{false, true} {
		args := append([]string{"backup", "--repo", repo, "--vm", "DC0_H0_VM0", "--vm", "DC0_C0_RP0_VM1"}, vc...)
		if asJSON {
			args = append(args, "--json")
		}
		var buf bytes.Buffer
		code, stdout := runCLIStderr(t, &buf, vars, args...)
		if code != 0 {
			t.Fatalf("backup: exit %d\n%s\n%s", code, stdout, buf.String())
		}
		if drawn := strings.Contains(buf.String(), "\x1b[K") && strings.Contains(buf.String(), "back up 2 VMs"); drawn == asJSON {
			t.Errorf("--json %v: bar drawn %v; stderr %q", asJSON, drawn, buf.String())
		}
	}
}
