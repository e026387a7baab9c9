package backupe2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// The kill test re-executes the test binary as the backup process: with
// BACKUPE2E_CHILD set, TestMain runs one backup and never returns.
func TestMain(m *testing.M) {
	if os.Getenv("BACKUPE2E_CHILD") == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child backs up one VM described by the environment, printing its phases.
func child() int {
	ctx := context.Background()
	cfg := vsphere.Config{URL: os.Getenv("LAB_URL"), Username: os.Getenv("LAB_USER"), Password: os.Getenv("LAB_PASSWORD"),
		Thumbprint: os.Getenv("LAB_THUMBPRINT"), ApplianceID: applianceID}
	c, err := vsphere.Connect(ctx, cfg)
	if err != nil {
		fmt.Println("connect:", err)
		return 1
	}
	r, err := repository.Open(ctx, os.Getenv("REPO_DIR"), []byte(repository.TestPassword), repository.OpenOptions{NoFsync: true})
	if err != nil {
		fmt.Println("open repository:", err)
		return 1
	}
	e := backup.NewEngine(backup.FromClient(c, vsphere.ReaderOptions{}), backup.RepoStore(r), testEngineOptions())
	_, err = e.BackupVM(ctx, backup.Request{VM: os.Getenv("VM"), Progress: func(p backup.VMProgress) {
		fmt.Println("phase", p.Phase)
	}})
	fmt.Println("finished:", err)
	return 0
}

// TestKilledMidBackup: the backup process dies (SIGKILL) while reading the
// disk, its snapshot still on the VM. The next run sweeps the snapshot and
// completes, and the repository checks clean.
func TestKilledMidBackup(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 8 << 20})
	const vm = "DC0_H0_VM0"
	write(t, l, vm, 0, 0, randomData(rand.New(rand.NewPCG(13, 14)), 8<<20))
	dir := t.TempDir()
	ctx := context.Background()
	must(t, repository.Init(ctx, dir, []byte(repository.TestPassword), repository.InitOptions{Chunker: labtest.Chunker, KDF: repository.TestKDF}))

	// The read stalls after 1 MiB: the child is mid-disk when killed.
	l.InjectReadFault(lab.ReadFault{PathContains: "-flat.vmdk", AfterBytes: 1 << 20, Stall: true, Times: 1000})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BACKUPE2E_CHILD=1", "LAB_URL="+l.URL().String(), "LAB_USER="+l.Username(),
		"LAB_PASSWORD="+l.Password(), "LAB_THUMBPRINT="+l.Thumbprint(), "REPO_DIR="+dir, "VM="+vm)
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("child exited before reading the disk")
			}
			if strings.HasPrefix(line, "finished") || strings.HasPrefix(line, "connect") || strings.HasPrefix(line, "open") {
				t.Fatalf("child: %s", line)
			}
			if line == "phase disks" {
				break wait
			}
		case <-deadline:
			t.Fatal("child never reached the disks")
		}
	}
	// Let it get into the stalled read, then kill it hard.
	for i := 0; ; i++ {
		if l.FolderGets() > 0 || i > 200 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	must(t, cmd.Process.Kill())
	_ = cmd.Wait()
	l.ClearReadFaults()
	if names, _ := l.Snapshots(vm); len(names) != 1 {
		t.Fatalf("snapshots after the kill: %v, want the killed run's one", names)
	}

	r, err := repository.Open(ctx, dir, []byte(repository.TestPassword), repository.OpenOptions{NoFsync: true})
	must(t, err)
	defer r.Close()
	if len(points(t, r)) != 0 {
		t.Fatal("the killed run committed a point")
	}
	c := connect(t, l)
	img := diskImage(t, l, vm, 0)
	res := run(t, newEngine(t, c, r), vm)
	if !hasWarning(res.Warnings, "removed stale snapshot") {
		t.Errorf("no sweep reported: %q", res.Warnings)
	}
	noSnapshots(t, l, vm)
	labtest.SameBytes(t, "after the kill", labtest.PointDisk(t, r, res.RestorePoint, 0), img)
	checkRepo(t, r)
}
