package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCrashKill9 kills `appliance image backup` with SIGKILL at many points of
// its write path (pack writes, renames, catalog transactions, the commit) and
// proves the crash-safety contract after every kill: the repository opens,
// `check --read-data` is clean, every committed restore point restores
// byte-identical; at the end reclaim removes the orphans the kills left.
func TestCrashKill9(t *testing.T) {
	bin := applianceBinary(t)
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	// Small chunks and packs so that one backup crosses many pack boundaries
	// and catalog transactions: the kills land all over the write path.
	mustCLI(t, "repo", "init", "--repo", repo, "--kdf-memory", "1024", "--kdf-time", "1",
		"--chunk-size", "32768", "--pack-size", "131072")

	const kills = 40
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	work := makeRandom(t, dir, 6<<20, 71)
	// A hole in the middle makes the image sparse like a VM disk.
	if err := punchZeros(work, 2<<20, 2<<20); err != nil {
		t.Fatal(err)
	}

	type committed struct{ id, image string }
	var points []committed
	backupChild := func() *exec.Cmd {
		cmd := exec.Command(bin, "image", "backup", "--repo", repo, "--vm", "crash", work)
		cmd.Env = append(os.Environ(), "VMVAULT_PASSWORD="+testPassword)
		return cmd
	}
	keep := func(id string) {
		snap := filepath.Join(dir, fmt.Sprintf("point-%d.img", len(points)))
		copyFile(t, work, snap)
		points = append(points, committed{id, snap})
	}
	// Three clean runs commit the first points and time the write path; the
	// fastest is the yardstick (the first one pays for a cold start).
	var full time.Duration
	for i := range 3 {
		if i > 0 {
			if err := scribble(work, rng); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		out, err := backupChild().Output()
		if err != nil {
			t.Fatalf("uninterrupted backup: %v", err)
		}
		if d := time.Since(start); full == 0 || d < full {
			full = d
		}
		keep(lastLine(string(out)))
	}
	t.Logf("an uninterrupted backup takes %v and writes %d pack files", full, countFiles(t, filepath.Join(repo, "packs"))/3)

	packsDir := filepath.Join(repo, "packs")
	perRun := countFiles(t, packsDir) / 3
	if perRun < 8 {
		t.Fatalf("a backup writes only %d packs: too few to spread kills over", perRun)
	}
	survived := 0
	for i := range kills {
		// New data every round, so every run has packs to write.
		if err := scribble(work, rng); err != nil {
			t.Fatal(err)
		}
		// Kill once the child has created `target` new pack files (.tmp
		// included), a few hundred microseconds into writing the next one;
		// the last targets land in the final flush and the commit.
		target := i % (perRun + 3)
		base := countFiles(t, packsDir)
		cmd := backupChild()
		var stdout strings.Builder
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(30 * time.Second)
		var err error
	poll:
		for {
			select {
			case err = <-exited:
				break poll
			default:
			}
			if countFiles(t, packsDir)-base >= target {
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
				_ = cmd.Process.Signal(syscall.SIGKILL)
				err = <-exited
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				<-exited
				t.Fatalf("kill %d: backup made no progress in 30s", i)
			}
			time.Sleep(200 * time.Microsecond)
		}
		if err == nil {
			survived++
			keep(lastLine(stdout.String()))
		} else {
			// Killed after its commit record landed: the point is real.
			list := decodeJSON[[]pointJSON](t, mustCLI(t, "repo", "list", "--repo", repo, "--json"))
			if len(list) > len(points) {
				keep(list[len(list)-1].ID)
			}
		}
		if r := runCLI(t, "repo", "check", "--repo", repo, "--read-data"); r.code != 0 {
			t.Fatalf("kill %d (after %d new pack files): check --read-data failed:\n%s%s", i, target, r.stdout, r.stderr)
		}
		if list := decodeJSON[[]pointJSON](t, mustCLI(t, "repo", "list", "--repo", repo, "--json")); len(list) != len(points) {
			t.Fatalf("kill %d: repository lists %d restore points, %d were committed", i, len(list), len(points))
		}
		for _, p := range points {
			restored := filepath.Join(dir, "restored.img")
			if r := runCLI(t, "image", "restore", "--repo", repo, "--restore-point", p.id, restored); r.code != 0 {
				t.Fatalf("kill %d: restore %s: %s", i, p.id, r.stderr)
			}
			assertSameFile(t, p.image, restored)
			os.Remove(restored)
		}
	}
	t.Logf("%d kills, %d runs finished before their kill; %d restore points", kills, survived, len(points))
	if kills-survived < 30 {
		t.Fatalf("only %d runs were killed mid-way (want at least 30): the delays do not cover the write path", kills-survived)
	}

	packsBefore := countFiles(t, filepath.Join(repo, "packs"))
	mustCLI(t, "repo", "reclaim", "--repo", repo)
	packsAfter := countFiles(t, filepath.Join(repo, "packs"))
	if packsAfter >= packsBefore {
		t.Errorf("reclaim removed no orphan packs (%d before, %d after) although %d backups were killed", packsBefore, packsAfter, kills-survived)
	}
	mustCLI(t, "repo", "check", "--repo", repo, "--read-data")
	for _, p := range points {
		restored := filepath.Join(dir, "restored.img")
		mustCLI(t, "image", "restore", "--repo", repo, "--restore-point", p.id, restored)
		assertSameFile(t, p.image, restored)
		os.Remove(restored)
	}
	// A second reclaim finds nothing left to remove.
	mustCLI(t, "repo", "reclaim", "--repo", repo)
	if n := countFiles(t, filepath.Join(repo, "packs")); n != packsAfter {
		t.Errorf("second reclaim changed the pack count %d -> %d", packsAfter, n)
	}
}

// scribble gives the image new content outside its hole, so that every
// backup writes a full set of new packs (dedup would otherwise leave the
// kills little to interrupt).
func scribble(path string, rng *rand.Rand) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 2<<20)
	for _, off := range []int64{0, 4 << 20} {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
	}
	return nil
}

// punchZeros zeroes a range with fallocate(PUNCH_HOLE) so the file is sparse.
func punchZeros(path string, off, n int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	const punchHole, keepSize = 0x02, 0x01
	return syscall.Fallocate(int(f.Fd()), punchHole|keepSize, off, n)
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
