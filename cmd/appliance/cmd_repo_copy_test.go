package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/repository"
)

const targetPassword = "offsite passphrase"

func copyEnv() map[string]string {
	return map[string]string{"VMVAULT_PASSWORD": testPassword, "VMVAULT_TO_PASSWORD": targetPassword}
}

// initTarget creates an encrypted repository with targetPassword.
func initTarget(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "offsite")
	r := runCLIEnv(t, map[string]string{"VMVAULT_PASSWORD": targetPassword}, "repo", "init", "--repo", dir, "--kdf-memory", "1024", "--kdf-time", "1")
	if r.code != 0 {
		t.Fatalf("init target: %s", r.stderr)
	}
	return dir
}

func mustCopy(t *testing.T, args ...string) repository.CopyResult {
	t.Helper()
	r := runCLIEnv(t, copyEnv(), append([]string{"repo", "copy", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("repo copy %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return decodeJSON[repository.CopyResult](t, r.stdout)
}

func TestRepoCopy(t *testing.T) {
	src := initRepo(t, "--chunk-size", "65536")
	dir := t.TempDir()
	imgA, imgB := makeRandom(t, dir, 3<<20, 61), makeRandom(t, dir, 2<<20, 62)
	pa := lastLine(mustCLI(t, "image", "backup", "--repo", src, "--vm", "alpha", imgA))
	pb := lastLine(mustCLI(t, "image", "backup", "--repo", src, "--vm", "beta", imgB))
	dst := initTarget(t)

	res := mustCopy(t, "--from", src, "--to", dst)
	if res.PointsCopied != 2 || res.BlobsSent == 0 || res.BytesSent == 0 || res.BlobsVerified != res.BlobsSent {
		t.Fatalf("first copy %+v", res)
	}
	// The copy restores byte-identical from the target, with its passphrase.
	for _, c := range []struct{ src, img string }{{pa, imgA}, {pb, imgB}} {
		var target string
		for _, p := range res.Points {
			if strings.HasPrefix(p.Source, c.src) || strings.HasPrefix(c.src, p.Source) {
				target = p.Target
			}
		}
		if target == "" {
			t.Fatalf("point %s not in the result %+v", c.src, res.Points)
		}
		out := filepath.Join(dir, "restored-"+target[:8])
		r := runCLIEnv(t, map[string]string{"VMVAULT_PASSWORD": targetPassword}, "image", "restore", "--repo", dst, "--restore-point", target, out)
		if r.code != 0 {
			t.Fatalf("restore from the target: %s", r.stderr)
		}
		assertSameFile(t, c.img, out)
	}
	// Idempotent: the second run sends nothing.
	res = mustCopy(t, "--from", src, "--to", dst)
	if res.PointsCopied != 0 || res.PointsSkipped != 2 || res.BlobsSent != 0 || res.BytesSent != 0 {
		t.Fatalf("second copy %+v", res)
	}
	// Filters.
	dst2 := initTarget(t)
	if res = mustCopy(t, "--from", src, "--to", dst2, "--vm", "beta"); res.PointsCopied != 1 || res.Points[0].VM != "beta" {
		t.Fatalf("--vm beta: %+v", res)
	}
	if res = mustCopy(t, "--from", src, "--to", dst2, "--restore-point", pa[:10], "--restore-point", pb); res.PointsCopied != 1 || res.PointsSkipped != 1 {
		t.Fatalf("--restore-point: %+v", res)
	}
	// Human output.
	r := runCLIEnv(t, copyEnv(), "repo", "copy", "--from", src, "--to", dst2)
	if r.code != 0 || !strings.Contains(r.stdout, "0 points copied, 2 already in the target") {
		t.Fatalf("human output: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestRepoCopyErrors(t *testing.T) {
	src := initRepo(t)
	dst := initTarget(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no target", copyEnv(), []string{"--from", src}, "--from and --to are required"},
		{"no target passphrase", map[string]string{"VMVAULT_PASSWORD": testPassword}, []string{"--from", src, "--to", dst}, "VMVAULT_TO_PASSWORD"},
		{"wrong target passphrase", map[string]string{"VMVAULT_PASSWORD": testPassword, "VMVAULT_TO_PASSWORD": "nope"}, []string{"--from", src, "--to", dst}, "wrong passphrase"},
		{"unknown point", copyEnv(), []string{"--from", src, "--to", dst, "--restore-point", "abcdef"}, "not found"},
		{"unknown scheme", copyEnv(), []string{"--from", src, "--to", "ftp://x/y"}, "unknown repository location scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLIEnv(t, tc.env, append([]string{"repo", "copy"}, tc.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q, want %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

// kill -9 of a copy after the packs of its second point are written and
// before that point's commit record: the target checks clean, and the next
// copy finishes without sending those blobs again.
func TestRepoCopyKill9Resumes(t *testing.T) {
	bin := applianceBinary(t)
	src := initRepo(t, "--chunk-size", "65536")
	dir := t.TempDir()
	imgs := []string{makeRandom(t, dir, 2<<20, 63), makeRandom(t, dir, 2<<20, 64)}
	for i, img := range imgs {
		mustCLI(t, "image", "backup", "--repo", src, "--vm", []string{"one", "two"}[i], img)
	}
	dst := initTarget(t)
	cmd := exec.Command(bin, "repo", "copy", "--from", src, "--to", dst)
	cmd.Env = append(os.Environ(), "VMVAULT_PASSWORD="+testPassword, "VMVAULT_TO_PASSWORD="+targetPassword, "VMVAULT_FAILPOINTS=copy.commit=kill@2")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("copy was not killed: %v\n%s", err, errb.String())
	}
	r := runCLIEnv(t, map[string]string{"VMVAULT_PASSWORD": targetPassword}, "repo", "check", "--repo", dst, "--read-data")
	if r.code != 0 {
		t.Fatalf("check of the target after the kill: %s%s", r.stdout, r.stderr)
	}
	res := mustCopy(t, "--from", src, "--to", dst)
	if res.PointsCopied != 1 || res.PointsSkipped != 1 || res.BlobsSent != 0 {
		t.Fatalf("resumed copy %+v: want 1 copied, 1 skipped, nothing sent again", res)
	}
	res = mustCopy(t, "--from", src, "--to", dst)
	if res.PointsSkipped != 2 || res.BlobsSent != 0 {
		t.Fatalf("third copy %+v", res)
	}
}

// --immutable needs an s3: repository; bad modes and periods are refused.
func TestRepoInitImmutableRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--repo", filepath.Join(t.TempDir(), "r"), "--immutable", "7"}, "needs an s3: location"},
		{[]string{"--repo", "s3:http://127.0.0.1:1/bucket", "--immutable", "7", "--lock-mode", "strict"}, "want governance or compliance"},
		{[]string{"--repo", "s3:http://127.0.0.1:1/bucket", "--immutable", "-1"}, "want 1 to"},
	} {
		r := runCLI(t, append([]string{"repo", "init", "--kdf-memory", "1024", "--kdf-time", "1"}, tc.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Fatalf("init %v: exit %d, %q; want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
