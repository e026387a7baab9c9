package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/vmvault/vmvault/repository"
)

// TestNoCommand: `appliance` alone is a mistake: usage on stderr, status 2;
// `appliance help` asks for it: usage on stdout, status 0.
func TestNoCommand(t *testing.T) {
	r := runCLI(t)
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "usage: appliance COMMAND") {
		t.Fatalf("appliance with no command: exit %d, stdout %q, stderr %q; want 2, nothing, usage", r.code, r.stdout, r.stderr)
	}
	for _, h := range []string{"help", "-h", "--help"} {
		r := runCLI(t, h)
		if r.code != 0 || !strings.Contains(r.stdout, "usage: appliance COMMAND") || r.stderr != "" {
			t.Fatalf("appliance %s: exit %d, stdout %q, stderr %q", h, r.code, r.stdout, r.stderr)
		}
	}
}

// TestImageRestoreRefusesOverwrite: an existing OUT survives unless --force.
func TestImageRestoreRefusesOverwrite(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	img := makeRandom(t, dir, 3<<20, 21)
	point := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "vm1", img))
	out := filepath.Join(dir, "precious.img")
	if err := os.WriteFile(out, []byte("do not lose me"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "image", "restore", "--repo", repo, "--restore-point", point, out)
	if r.code == 0 || !strings.Contains(r.stderr, "--force") || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("restore over an existing file: exit %d, stderr %q; want a refusal naming --force", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "do not lose me" {
		t.Fatalf("the existing file was changed to %d bytes", len(b))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".precious.img.restore-*")); len(left) != 0 {
		t.Fatalf("refused restore left %v", left)
	}
	mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", point, "--force", out)
	assertSameFile(t, img, out)
	// A new file needs no --force.
	fresh := filepath.Join(dir, "fresh.img")
	mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", point, fresh)
	assertSameFile(t, img, fresh)
}

// repeatedPhrase returns a two-word phrase, or a path, that occurs twice in
// s, or "". "open repository /r: open /r: ..." names /r twice.
func repeatedPhrase(s string) string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("/._-+", r))
	})
	seen := map[string]bool{}
	for _, w := range words {
		if strings.Contains(w, "/") {
			if seen[w] {
				return w
			}
			seen[w] = true
		}
	}
	for i := 0; i+1 < len(words); i++ {
		p := words[i] + " " + words[i+1]
		if seen[p] {
			return p
		}
		seen[p] = true
	}
	return ""
}

// TestErrorsSayThingsOnce: common failures print one line in which each
// layer adds only new context ("open repository R: open R: wrong
// passphrase" said "open R" twice).
func TestErrorsSayThingsOnce(t *testing.T) {
	dir := t.TempDir()
	repo := initRepo(t)
	img := makeRandom(t, dir, 1<<20, 22)
	point := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "vm1", img))

	locked := initRepo(t)
	holder, err := repository.Open(context.Background(), locked, []byte(testPassword), repository.OpenOptions{Holder: "daemon"})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()

	out := filepath.Join(dir, "out.img")
	cases := []struct {
		name string
		pw   string
		args []string
		want []string
	}{
		{"wrong passphrase", "not it", []string{"repo", "list", "--repo", repo}, []string{"open repository " + repo, "wrong passphrase"}},
		{"no passphrase", "", []string{"repo", "list", "--repo", repo}, []string{"open repository " + repo, "encrypted", "VMVAULT_PASSWORD"}},
		{"missing repository", testPassword, []string{"repo", "list", "--repo", filepath.Join(dir, "nowhere")}, []string{"not a vmvault repository"}},
		{"locked repository", testPassword, []string{"repo", "check", "--repo", locked}, []string{"open repository " + locked, "locked", "daemon"}},
		{"missing restore point", testPassword, []string{"image", "restore", "--repo", repo, "--restore-point", "deadbeef", out}, []string{"deadbeef", "not found"}},
		{"missing parent", testPassword, []string{"image", "backup", "--repo", repo, "--vm", "vm1", "--parent", "cafe", img}, []string{"--parent", "cafe", "not found"}},
		{"missing image", testPassword, []string{"image", "backup", "--repo", repo, "--vm", "vm1", filepath.Join(dir, "no.img")}, []string{"no.img", "no such file"}},
		{"init over a repository", testPassword, []string{"repo", "init", "--repo", repo, "--kdf-memory", "1024", "--kdf-time", "1"}, []string{repo, "not empty"}},
		{"missing disk", testPassword, []string{"image", "restore", "--repo", repo, "--restore-point", "", "--disk", "3", out}, []string{"--disk 3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string(nil), c.args...)
			for i, a := range args {
				if a == "" {
					args[i] = point
				}
			}
			vars := map[string]string{}
			if c.pw != "" {
				vars["VMVAULT_PASSWORD"] = c.pw
			}
			r := runCLIEnv(t, vars, args...)
			if r.code == 0 {
				t.Fatalf("succeeded: %s", r.stdout)
			}
			msg := strings.TrimSpace(r.stderr)
			if strings.Count(msg, "\n") != 0 {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			if p := repeatedPhrase(msg); p != "" {
				t.Errorf("error %q says %q twice", msg, p)
			}
		})
	}
}

func TestRepeatedPhrase(t *testing.T) {
	for s, want := range map[string]string{
		"appliance repo list: open repository /r: open /r: wrong passphrase": "/r",
		"appliance x: disk 0: read disk 0: eof":                              "disk 0",
		"appliance repo list: open repository /r: wrong passphrase":          "",
	} {
		if got := repeatedPhrase(s); got != want {
			t.Errorf("repeatedPhrase(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestCommandHelp: a group alone lists its commands; a near miss says
// what was meant (within the group it names); both exit 2.
func TestCommandHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"repo"}, []string{"appliance repo: a group of commands", "repo list", "repo key add"}},
		{[]string{"repo", "lst"}, []string{`did you mean "repo list"?`}},
		{[]string{"repoo", "list"}, []string{`did you mean "repo list"?`}},
		{[]string{"instnat", "start"}, []string{`did you mean "instant start"?`}},
		{[]string{"repo", "frobnicate"}, []string{`unknown command "repo frobnicate"; the repo commands are`}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "usage: appliance COMMAND"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	repo := initRepo(t)
	r := runCLI(t, "repo", "init", "--repo", repo)
	if r.code != 1 || !strings.Contains(r.stderr, "a repository exists there already") {
		t.Fatalf("repo init on a repository: %d %s", r.code, r.stderr)
	}
}
