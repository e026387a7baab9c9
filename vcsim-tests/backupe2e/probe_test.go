package backupe2e

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// TestProbeTransports: the probe says which transports read a VM's disks
// before a job relies on them, and leaves no snapshot or attached disk.
func TestProbeTransports(t *testing.T) {
	const vm = "DC0_H0_VM0"
	byTransport := func(res backup.ProbeResult) map[backup.Transport]backup.TransportProbe {
		out := map[backup.Transport]backup.TransportProbe{}
		for _, p := range res.Probes {
			out[p.Transport] = p
		}
		return out
	}
	t.Run("appliance VM, extents locked", func(t *testing.T) {
		g := newHotAddRig(t, lab.Options{DiskCapacity: 8 << 20})
		write(t, g.l, vm, 0, 0, randomData(rand.New(rand.NewPCG(3, 1)), 2<<20))
		g.l.LockRunningExtents(true)
		res, err := g.e.ProbeTransports(context.Background(), vm)
		if err != nil {
			t.Fatal(err)
		}
		got := byTransport(res)
		if p := got[backup.TransportHotAdd]; !p.OK || p.Bytes != 1<<20 {
			t.Errorf("hotadd %+v", p)
		}
		if p := got[backup.TransportNetwork]; p.OK || !strings.Contains(p.Reason, "file locked") {
			t.Errorf("network %+v, want refused as file locked", p)
		}
		if p := got[backup.TransportNFC]; !p.OK {
			t.Errorf("nfc %+v", p)
		}
		for _, tr := range res.Auto {
			if tr != backup.TransportHotAdd {
				t.Errorf("auto would use %s", tr)
			}
		}
		g.nothingAttached(t, vm)
	})
	t.Run("not a VM", func(t *testing.T) {
		l := labtest.Start(t, lab.Options{DiskCapacity: 8 << 20})
		e := newEngine(t, connect(t, l), labtest.Repo(t))
		res, err := e.ProbeTransports(context.Background(), vm)
		if err != nil {
			t.Fatal(err)
		}
		got := byTransport(res)
		if p := got[backup.TransportHotAdd]; p.OK || !strings.Contains(p.Reason, "not set up for HotAdd") {
			t.Errorf("hotadd %+v", p)
		}
		if p := got[backup.TransportNetwork]; !p.OK {
			t.Errorf("network %+v", p)
		}
		if len(res.Auto) != 1 {
			t.Errorf("auto %v", res.Auto)
		}
		for _, tr := range res.Auto {
			if tr != backup.TransportNetwork {
				t.Errorf("auto would use %s", tr)
			}
		}
		noSnapshots(t, l, vm)
	})
}
