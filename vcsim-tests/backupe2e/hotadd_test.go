package backupe2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// hotAddRig is a lab with the appliance VM and an engine that can HotAdd.
type hotAddRig struct {
	l   *lab.Lab
	c   *vsphere.Client
	r   *repository.Repository
	app string
	loc *lab.HotAddLocator
	h   *vsphere.HotAdder
	e   *backup.Engine
}

func newHotAddRig(t *testing.T, opts lab.Options, mod ...func(*backup.EngineOptions)) *hotAddRig {
	t.Helper()
	l := labtest.Start(t, opts)
	c := connect(t, l)
	app, err := l.AddAppliance(context.Background())
	must(t, err)
	loc := l.HotAddLocator(app)
	h, err := c.HotAdder(context.Background(), vsphere.HotAddOptions{ApplianceVM: app, Locator: loc,
		DeviceTimeout: 200 * time.Millisecond, PollEvery: 10 * time.Millisecond})
	must(t, err)
	r := labtest.Repo(t)
	o := testEngineOptions()
	for _, m := range mod {
		m(&o)
	}
	e := backup.NewEngine(backup.FromClientHotAdd(c, vsphere.ReaderOptions{}, h), backup.RepoStore(r), o)
	return &hotAddRig{l: l, c: c, r: r, app: app, loc: loc, h: h, e: e}
}

// nothingAttached: no disk left on the appliance VM, no device left open,
// no snapshot left on vm.
func (g *hotAddRig) nothingAttached(t *testing.T, vm string) {
	t.Helper()
	g.h.Wait()
	if got, err := g.l.HotAdded(g.app); err != nil || len(got) != 0 {
		t.Fatalf("left attached to the appliance VM: %v %v", got, err)
	}
	if n := g.loc.OpenDevices(); n != 0 {
		t.Fatalf("%d hot-added devices left open", n)
	}
	noSnapshots(t, g.l, vm)
}

// TestHotAddBackupRestoresByteIdentical: with the appliance as a VM, auto
// reads every disk through HotAdd (never the file service), the point
// says so, reads back byte-identical and nothing stays attached.
func TestHotAddBackupRestoresByteIdentical(t *testing.T) {
	g := newHotAddRig(t, lab.Options{DiskCapacity: diskSize})
	const vm = "DC0_H0_VM0"
	rng := rand.New(rand.NewPCG(30, 1))
	write(t, g.l, vm, 0, 0, randomData(rng, 2<<20))
	write(t, g.l, vm, 0, 9<<20, randomData(rng, 1<<20))
	img := diskImage(t, g.l, vm, 0)
	gets := g.l.FolderGets()
	res := run(t, g.e, vm)
	d := res.Disks[0]
	if d.Reader != backup.ReaderHotAdd || d.TransportReason != "" {
		t.Fatalf("disk read by %q (reason %q), want hotadd first time", d.Reader, d.TransportReason)
	}
	if n := g.l.FolderGets() - gets; n != 0 {
		t.Errorf("%d datastore GETs during a HotAdd backup", n)
	}
	labtest.SameBytes(t, "hotadd backup", labtest.PointDisk(t, g.r, res.RestorePoint, 0), img)
	p, err := g.r.Point(context.Background(), res.RestorePoint)
	must(t, err)
	if p.Tags[fmt.Sprintf("disk.%d.reader", d.Key)] != "hotadd" || p.Tags["transport"] != "auto" {
		t.Errorf("point tags %v", p.Tags)
	}
	if g.loc.BytesRead() != res.BytesRead {
		t.Errorf("lab counted %d bytes read through HotAdd, the engine %d", g.loc.BytesRead(), res.BytesRead)
	}
	g.nothingAttached(t, vm)
	checkRepo(t, g.r)
}

// TestHotAddIncrementalReadsCBTBytes: an incremental through HotAdd reads
// from the device exactly the CBT blocks, as the lab counts them.
func TestHotAddIncrementalReadsCBTBytes(t *testing.T) {
	g := newHotAddRig(t, lab.Options{DiskCapacity: diskSize}, func(o *backup.EngineOptions) { o.CBTVerifyFraction = -1 })
	const vm = "DC0_H0_VM0"
	rng := rand.New(rand.NewPCG(31, 1))
	write(t, g.l, vm, 0, 0, randomData(rng, 4<<20))
	prev := run(t, g.e, vm).RestorePoint
	for round := 1; round <= 3; round++ {
		blocks := map[int64]bool{}
		for range 25 {
			off := rng.Int64N(diskSize/4096) * 4096
			write(t, g.l, vm, 0, off, randomData(rng, 4096))
			markBlocks(blocks, off, 4096)
		}
		off := rng.Int64N(diskSize / 2)
		write(t, g.l, vm, 0, off, randomData(rng, 1<<20))
		markBlocks(blocks, off, 1<<20)
		img := diskImage(t, g.l, vm, 0)
		before := g.loc.BytesRead()
		res := run(t, g.e, vm)
		if res.Mode != backup.ModeIncremental || res.Parent != prev || res.Disks[0].Reader != backup.ReaderHotAdd {
			t.Fatalf("round %d: mode %s parent %s reader %s (warnings %q)", round, res.Mode, res.Parent, res.Disks[0].Reader, res.Warnings)
		}
		if got, want := g.loc.BytesRead()-before, cbtBlocks(blocks); got != want {
			t.Errorf("round %d: %d bytes read from the hot-added device, CBT reports %d", round, got, want)
		}
		labtest.SameBytes(t, "hotadd incremental", labtest.PointDisk(t, g.r, res.RestorePoint, 0), img)
		prev = res.RestorePoint
		g.nothingAttached(t, vm)
	}
}

// TestTransportPolicyWithLockedExtents: the file service refuses running
// VMs' extents (403 "file locked", ESXi's reported behaviour). Auto reads
// through HotAdd without touching it; when HotAdd cannot see the disk,
// auto goes on to network (refused) and NFC, and the point and the warnings
// carry the chain of reasons; network only fails clearly.
func TestTransportPolicyWithLockedExtents(t *testing.T) {
	cases := []struct {
		name       string
		transport  backup.Transport
		hidden     bool // the hot-added disk never appears in the guest
		wantReader string
		wantReason []string // substrings, in order
		wantErr    bool
	}{
		{name: "auto via hotadd", transport: backup.TransportAuto, wantReader: backup.ReaderHotAdd},
		{name: "auto falls back past hotadd and network", transport: backup.TransportAuto, hidden: true, wantReader: backup.ReaderNFC,
			wantReason: []string{"hotadd: ", "not visible in the guest", " -> network: ", "403", "file locked", " -> nfc"}},
		{name: "hotadd only", transport: backup.TransportHotAdd, wantReader: backup.ReaderHotAdd},
		{name: "network only refused", transport: backup.TransportNetwork, wantErr: true, wantReason: []string{"transport network only", "file locked"}},
		{name: "nfc only", transport: backup.TransportNFC, wantReader: backup.ReaderNFC},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newHotAddRig(t, lab.Options{DiskCapacity: 8 << 20})
			const vm = "DC0_H0_VM0"
			write(t, g.l, vm, 0, 0, randomData(rand.New(rand.NewPCG(32, 1)), 3<<20))
			img := diskImage(t, g.l, vm, 0)
			g.l.LockRunningExtents(true)
			g.loc.Hidden.Store(tc.hidden)
			started := time.Now()
			res, err := g.e.BackupVM(context.Background(), backup.Request{VM: vm, Transport: tc.transport})
			if tc.wantErr {
				if err == nil || !errors.Is(err, backup.ErrTransport) {
					t.Fatalf("err = %v, want ErrTransport", err)
				}
				inOrder(t, err.Error(), tc.wantReason)
				g.nothingAttached(t, vm)
				return
			}
			if err != nil {
				t.Fatalf("backup: %v", err)
			}
			d := res.Disks[0]
			if d.Reader != tc.wantReader {
				t.Fatalf("reader %s, want %s (reason %q)", d.Reader, tc.wantReader, d.TransportReason)
			}
			if tc.wantReader == backup.ReaderHotAdd && g.l.LockedRefusals() != 0 {
				t.Errorf("%d refused file-service reads although HotAdd read the disk", g.l.LockedRefusals())
			}
			if len(tc.wantReason) == 0 && d.TransportReason != "" {
				t.Errorf("unexpected fallback %q", d.TransportReason)
			}
			if len(tc.wantReason) > 0 {
				inOrder(t, d.TransportReason, tc.wantReason)
				p, err := g.r.Point(context.Background(), res.RestorePoint)
				must(t, err)
				if got := p.Tags[fmt.Sprintf("disk.%d.transport_reason", d.Key)]; got != d.TransportReason {
					t.Errorf("point tag %q, report %q", got, d.TransportReason)
				}
				if !hasWarning(res.Warnings, "transport fallback: "+d.TransportReason) {
					t.Errorf("warnings %q lack the fallback", res.Warnings)
				}
				// The per-disk decision is cheap besides the device wait.
				if el := time.Since(started); el > 10*time.Second {
					t.Errorf("backup with fallbacks took %s", el)
				}
			}
			labtest.SameBytes(t, tc.name, labtest.PointDisk(t, g.r, res.RestorePoint, 0), img)
			g.nothingAttached(t, vm)
		})
	}
}

func inOrder(t *testing.T, s string, subs []string) {
	t.Helper()
	rest := s
	for _, sub := range subs {
		i := strings.Index(rest, sub)
		if i < 0 {
			t.Fatalf("%q lacks %q (in order %q)", s, sub, subs)
		}
		rest = rest[i+len(sub):]
	}
}

// TestHotAddOnlyWithoutApplianceFails: a job set to hotadd on an appliance
// that is not a VM fails clearly, before any snapshot.
func TestHotAddOnlyWithoutApplianceFails(t *testing.T) {
	l := labtest.Start(t, lab.Options{DiskCapacity: 8 << 20})
	c := connect(t, l)
	// The appliance is not a VM: its BIOS UUID is no VM's.
	_, err := c.HotAdder(context.Background(), vsphere.HotAddOptions{BIOSUUIDFile: writeTemp(t, "00000000-1111-2222-3333-444444444444\n")})
	if !errors.Is(err, vsphere.ErrHotAddUnavailable) {
		t.Fatalf("HotAdder on a non-VM appliance: %v, want ErrHotAddUnavailable", err)
	}
	e := newEngine(t, c, labtest.Repo(t))
	const vm = "DC0_H0_VM0"
	res, err := e.BackupVM(context.Background(), backup.Request{VM: vm, Transport: backup.TransportHotAdd})
	if !errors.Is(err, backup.ErrTransport) || !strings.Contains(err.Error(), "not set up for HotAdd") {
		t.Fatalf("err = %v, want ErrTransport saying HotAdd is not set up", err)
	}
	if res.RestorePoint != "" {
		t.Fatal("a restore point was committed")
	}
	noSnapshots(t, l, vm)
	// Auto on the same appliance quietly uses the network.
	if d := run(t, e, vm).Disks[0]; d.Reader != backup.ReaderDatastore || d.TransportReason != "" {
		t.Fatalf("auto without HotAdd: reader %s reason %q", d.Reader, d.TransportReason)
	}
}

// TestHotAddAlwaysDetached: the attached disk goes whatever happens — a
// device that fails mid-read (hotadd only: the backup fails; auto: the
// disk is read again over the network), a cancelled backup.
func TestHotAddAlwaysDetached(t *testing.T) {
	const vm = "DC0_H0_VM0"
	t.Run("device fails mid-read, hotadd only", func(t *testing.T) {
		g := newHotAddRig(t, lab.Options{DiskCapacity: 8 << 20})
		write(t, g.l, vm, 0, 0, randomData(rand.New(rand.NewPCG(33, 1)), 6<<20))
		g.loc.FailAfter.Store(1 << 20)
		_, err := g.e.BackupVM(context.Background(), backup.Request{VM: vm, Transport: backup.TransportHotAdd})
		if err == nil || !strings.Contains(err.Error(), "input/output error") {
			t.Fatalf("err = %v, want the device's I/O error", err)
		}
		if g.loc.Opens() != 1 {
			t.Fatalf("%d devices opened", g.loc.Opens())
		}
		g.nothingAttached(t, vm)
	})
	t.Run("device fails mid-read, auto", func(t *testing.T) {
		g := newHotAddRig(t, lab.Options{DiskCapacity: 8 << 20})
		write(t, g.l, vm, 0, 0, randomData(rand.New(rand.NewPCG(33, 2)), 6<<20))
		img := diskImage(t, g.l, vm, 0)
		g.loc.FailAfter.Store(1 << 20)
		res := run(t, g.e, vm)
		d := res.Disks[0]
		if d.Reader != backup.ReaderDatastore || !strings.HasPrefix(d.TransportReason, "hotadd: ") || !strings.HasSuffix(d.TransportReason, " -> network") {
			t.Fatalf("reader %s reason %q, want hotadd -> network", d.Reader, d.TransportReason)
		}
		labtest.SameBytes(t, "after a failed device", labtest.PointDisk(t, g.r, res.RestorePoint, 0), img)
		g.nothingAttached(t, vm)
	})
	t.Run("cancelled", func(t *testing.T) {
		g := newHotAddRig(t, lab.Options{DiskCapacity: 8 << 20})
		write(t, g.l, vm, 0, 0, randomData(rand.New(rand.NewPCG(33, 3)), 6<<20))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var attachedSeen bool
		res, err := g.e.BackupVM(ctx, backup.Request{VM: vm, Progress: func(p backup.VMProgress) {
			if p.BytesRead > 0 && !attachedSeen {
				got, _ := g.l.HotAdded(g.app)
				attachedSeen = len(got) == 1
				cancel()
			}
		}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v (point %q), want context.Canceled", err, res.RestorePoint)
		}
		if !attachedSeen {
			t.Fatal("the disk was not attached while it was being read")
		}
		g.nothingAttached(t, vm)
	})
}

func writeTemp(t *testing.T, body string) string {
	t.Helper()
	p := t.TempDir() + "/product_uuid"
	must(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

// TestHotAddOverUserSnapshotChain: a VM carrying the administrator's
// snapshots is read through HotAdd too (ESXi opens the frozen chain; the
// lab hands out the chain consolidated up to our snapshot): the point is
// byte-identical to the disk at our snapshot, incremental, and the user's
// snapshots stay.
func TestHotAddOverUserSnapshotChain(t *testing.T) {
	g := newHotAddRig(t, lab.Options{DiskCapacity: 8 << 20})
	const vm = "DC0_H0_VM1"
	rng := rand.New(rand.NewPCG(34, 1))
	write(t, g.l, vm, 0, 0, randomData(rng, 1<<20))
	run(t, g.e, vm)
	write(t, g.l, vm, 0, 2<<20, randomData(rng, 256<<10))
	userSnapshot(t, g.l, vm, "before-upgrade")
	write(t, g.l, vm, 0, 3<<20, randomData(rng, 128<<10))
	userSnapshot(t, g.l, vm, "after-upgrade")
	write(t, g.l, vm, 0, 100<<10, randomData(rng, 64<<10))
	want := diskImage(t, g.l, vm, 0)
	res := run(t, g.e, vm)
	if d := res.Disks[0]; d.Reader != backup.ReaderHotAdd || d.Mode != backup.ModeIncremental {
		t.Fatalf("disk read by %q in mode %q (%s; reason %q)", d.Reader, d.Mode, d.Reason, d.TransportReason)
	}
	labtest.SameBytes(t, "hotadd over a snapshot chain", labtest.PointDisk(t, g.r, res.RestorePoint, 0), want)
	g.h.Wait()
	if got, _ := g.l.HotAdded(g.app); len(got) != 0 {
		t.Fatalf("left attached: %v", got)
	}
	if user, ours := userSnapshots(t, g.c, vm); len(user) != 2 || ours != 0 {
		t.Fatalf("snapshots after: user %v, ours %d", user, ours)
	}
}
