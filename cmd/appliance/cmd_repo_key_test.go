package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func runPW(t *testing.T, pw string, args ...string) cliResult {
	t.Helper()
	return runCLIEnv(t, map[string]string{"VMVAULT_PASSWORD": pw}, args...)
}

func keyIDs(t *testing.T, repo, pw string) (ids []string, current string) {
	t.Helper()
	res := runPW(t, pw, "repo", "key", "list", "--repo", repo, "--json")
	if res.code != 0 {
		t.Fatalf("repo key list: %d %s", res.code, res.stderr)
	}
	for _, k := range decodeJSON[[]struct {
		ID      string `json:"id"`
		Current bool   `json:"current"`
	}](t, res.stdout) {
		ids = append(ids, k.ID)
		if k.Current {
			current = k.ID
		}
	}
	return ids, current
}

// repo key add / list / remove: a second passphrase opens the repository;
// the key in use and the last key are refused with a clear message; a
// removed key no longer opens it.
func TestRepoKeyCLI(t *testing.T) {
	repo := initRepo(t)
	ids, first := keyIDs(t, repo, testPassword)
	if len(ids) != 1 || first != ids[0] {
		t.Fatalf("keys %v current %q", ids, first)
	}
	res := runCLIEnv(t, map[string]string{"VMVAULT_PASSWORD": testPassword, "VMVAULT_NEW_PASSWORD": "second secret"},
		"repo", "key", "add", "--repo", repo, "--label", "laptop", "--kdf-memory", "1024", "--kdf-time", "1")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "added key ") {
		t.Fatalf("key add: %d %q %s", res.code, res.stdout, res.stderr)
	}
	second := strings.TrimSpace(strings.TrimPrefix(res.stdout, "added key "))
	out := runPW(t, "second secret", "repo", "key", "list", "--repo", repo)
	if out.code != 0 || !strings.Contains(out.stdout, "laptop") || !strings.Contains(out.stdout, "argon2id t=1 m=1024KiB") {
		t.Fatalf("key list: %d %s %s", out.code, out.stdout, out.stderr)
	}
	if _, cur := keyIDs(t, repo, "second secret"); cur != second {
		t.Fatalf("opened with the second passphrase, current key %q, want %q", cur, second)
	}
	res = runPW(t, "second secret", "repo", "key", "remove", "--repo", repo, second[:8])
	if res.code != 1 || !strings.Contains(res.stderr, "the key this passphrase opened the repository with") {
		t.Fatalf("removing the key in use: %d %s", res.code, res.stderr)
	}
	if res := runPW(t, "second secret", "repo", "key", "remove", "--repo", repo, first); res.code != 0 {
		t.Fatalf("key remove: %d %s", res.code, res.stderr)
	}
	if res := runPW(t, testPassword, "repo", "list", "--repo", repo); res.code == 0 || !strings.Contains(res.stderr, "wrong passphrase") {
		t.Fatalf("removed key still opens: %d %s", res.code, res.stderr)
	}
	res = runPW(t, "second secret", "repo", "key", "remove", "--repo", repo, second)
	if res.code != 1 || !strings.Contains(res.stderr, "only key") {
		t.Fatalf("removing the last key: %d %s", res.code, res.stderr)
	}
	if res := runPW(t, "second secret", "repo", "key", "remove", "--repo", repo); res.code != 2 {
		t.Fatalf("key remove without an id: %d %s", res.code, res.stderr)
	}
}

// repo passwd: the new passphrase opens, the old one and a wrong one do
// not, only one key is left; without a new passphrase it is a usage error.
func TestRepoPasswdCLI(t *testing.T) {
	repo := initRepo(t)
	dir := t.TempDir()
	img := makeRandom(t, dir, 1<<20, 7)
	mustCLI(t, "image", "backup", "--repo", repo, "--vm", "a", img)
	if res := runPW(t, testPassword, "repo", "passwd", "--repo", repo); res.code != 2 || !strings.Contains(res.stderr, "VMVAULT_NEW_PASSWORD") {
		t.Fatalf("passwd without a new passphrase: %d %s", res.code, res.stderr)
	}
	newFile := filepath.Join(dir, "new")
	os.WriteFile(newFile, []byte("brand new\n"), 0o600)
	res := runPW(t, testPassword, "repo", "passwd", "--repo", repo, "--new-password-file", newFile, "--kdf-memory", "1024", "--kdf-time", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "passphrase changed") {
		t.Fatalf("passwd: %d %s %s", res.code, res.stdout, res.stderr)
	}
	for _, pw := range []string{testPassword, "wrong"} {
		if res := runPW(t, pw, "repo", "list", "--repo", repo); res.code == 0 || !strings.Contains(res.stderr, "wrong passphrase") {
			t.Fatalf("passphrase %q after passwd: %d %s", pw, res.code, res.stderr)
		}
	}
	if res := runPW(t, "brand new", "repo", "list", "--repo", repo); res.code != 0 || !strings.Contains(res.stdout, "a") {
		t.Fatalf("new passphrase: %d %s", res.code, res.stderr)
	}
	if ids, _ := keyIDs(t, repo, "brand new"); len(ids) != 1 {
		t.Fatalf("keys after passwd: %v", ids)
	}
}

// --password-command: a real shell command's first line is the passphrase;
// a failing, silent or hung command is a clear error that shows neither
// the command nor what it printed; its standard error is passed through.
func TestPasswordCommand(t *testing.T) {
	repo := initRepo(t)
	none := map[string]string{}
	res := runCLIEnv(t, none, "repo", "list", "--repo", repo, "--password-command", `printf '%s\nsecond line\n' "`+testPassword+`"`)
	if res.code != 0 {
		t.Fatalf("password command: %d %s", res.code, res.stderr)
	}
	res = runCLIEnv(t, none, "repo", "list", "--repo", repo, "--password-command", `echo hunter2-leak; echo from-the-command >&2; exit 3`)
	if res.code != 1 || !strings.Contains(res.stderr, "exit status 3") || !strings.Contains(res.stderr, "from-the-command") {
		t.Fatalf("failing command: %d %s", res.code, res.stderr)
	}
	if strings.Contains(res.stderr+res.stdout, "hunter2-leak") || strings.Contains(res.stderr, "exit 3") {
		t.Fatalf("the command or its output was shown: %s", res.stderr)
	}
	res = runCLIEnv(t, none, "repo", "list", "--repo", repo, "--password-command", `echo wrong-one`)
	if res.code != 1 || !strings.Contains(res.stderr, "wrong passphrase") || strings.Contains(res.stderr, "wrong-one") {
		t.Fatalf("wrong passphrase from the command: %d %s", res.code, res.stderr)
	}
	res = runCLIEnv(t, none, "repo", "list", "--repo", repo, "--password-command", `true`)
	if res.code != 1 || !strings.Contains(res.stderr, "printed no passphrase") {
		t.Fatalf("silent command: %d %s", res.code, res.stderr)
	}
	res = runCLIEnv(t, none, "repo", "list", "--repo", repo, "--password-command", "true", "--password-file", "/dev/null")
	if res.code != 2 {
		t.Fatalf("file and command: %d %s", res.code, res.stderr)
	}
	old := passwordCommandTimeout
	passwordCommandTimeout = 300 * time.Millisecond
	t.Cleanup(func() { passwordCommandTimeout = old })
	start := time.Now()
	res = runCLIEnv(t, none, "repo", "list", "--repo", repo, "--password-command", "sleep 30")
	if res.code != 1 || !strings.Contains(res.stderr, "did not finish within 300ms") || time.Since(start) > 10*time.Second {
		t.Fatalf("hung command: %d %s after %s", res.code, res.stderr, time.Since(start))
	}
}

// repo copy takes both passphrases from commands.
func TestRepoCopyPasswordCommands(t *testing.T) {
	src := initRepo(t)
	dst := initTarget(t)
	res := runCLIEnv(t, map[string]string{}, "repo", "copy", "--from", src, "--to", dst,
		"--password-command", "echo '"+testPassword+"'", "--to-password-command", "echo '"+targetPassword+"'")
	if res.code != 0 {
		t.Fatalf("copy with password commands: %d %s", res.code, res.stderr)
	}
	res = runCLIEnv(t, map[string]string{}, "repo", "copy", "--from", src, "--to", dst,
		"--password-command", "echo '"+testPassword+"'", "--to-password-command", "exit 4")
	if res.code != 1 || !strings.Contains(res.stderr, "target: password command failed (exit status 4)") {
		t.Fatalf("failing target command: %d %s", res.code, res.stderr)
	}
}
