package topology

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"

	"github.com/vmvault/vmvault/internal/cache"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/web/api"
)

func startTestLab(t *testing.T) *lab.Lab {
	t.Helper()
	l, err := lab.Start(context.Background(), lab.Options{})
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

func labClient(t *testing.T, l *lab.Lab) (*vsphere.Client, vsphere.Config) {
	t.Helper()
	cfg := vsphere.Config{URL: l.URL().String(), Username: l.Username(), Password: l.Password(), Thumbprint: l.Thumbprint(), KeepAlive: -1}
	c, err := vsphere.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, cfg
}

// The inventory tree and restore targets of the lab: every object with a
// parent that exists, VMs with their instance UUIDs under their folders,
// and datastores with vCenter's own capacity and free space (read here
// independently through a property collector view).
func TestTopologyAgainstLab(t *testing.T) {
	l := startTestLab(t)
	c, _ := labClient(t, l)
	topo := New(c)
	ctx := context.Background()
	nodes, err := topo.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]api.InventoryNode{}
	count := map[string]int{}
	for _, n := range nodes {
		if _, dup := byID[n.ID]; dup {
			t.Fatalf("duplicate id %s", n.ID)
		}
		byID[n.ID] = n
		count[n.Type]++
	}
	for _, n := range nodes {
		if n.Parent == "" {
			if n.Type != api.NodeDatacenter {
				t.Errorf("%s %s has no parent", n.Type, n.Path)
			}
			continue
		}
		p, ok := byID[n.Parent]
		if !ok {
			t.Errorf("%s: parent %s not listed", n.Path, n.Parent)
			continue
		}
		if !strings.HasPrefix(n.Path, p.Path+"/") {
			t.Errorf("%s: parent path %s", n.Path, p.Path)
		}
	}
	for typ, min := range map[string]int{api.NodeDatacenter: 1, api.NodeFolder: 4, api.NodeCluster: 1, api.NodeHost: 2, api.NodeResourcePool: 1, api.NodeVM: 4} {
		if count[typ] < min {
			t.Errorf("%d %s nodes, want at least %d", count[typ], typ, min)
		}
	}
	var vm api.InventoryNode
	for _, n := range nodes {
		if n.Name == "DC0_H0_VM1" {
			vm = n
		}
	}
	if vm.Type != api.NodeVM || vm.InstanceUUID == "" || vm.Path != "/DC0/vm/DC0_H0_VM1" || byID[vm.Parent].Path != "/DC0/vm" || vm.PowerState == "" {
		t.Fatalf("VM node %+v (parent %+v)", vm, byID[vm.Parent])
	}
	// The cluster's hosts hang under the cluster; the cluster under the host folder.
	for _, n := range nodes {
		if n.Type == api.NodeHost && strings.HasPrefix(n.Name, "DC0_C0_") && byID[n.Parent].Type != api.NodeCluster {
			t.Errorf("clustered host %s under %+v", n.Path, byID[n.Parent])
		}
	}

	rt, err := topo.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Datacenters) != 1 {
		t.Fatalf("datacenters %+v", rt.Datacenters)
	}
	dc := rt.Datacenters[0]
	if dc.Name != "DC0" || len(dc.Folders) == 0 || dc.Folders[0] != "/DC0/vm" || len(dc.Networks) == 0 {
		t.Fatalf("datacenter %+v", dc)
	}
	kinds := map[string]int{}
	for _, c := range dc.Compute {
		kinds[c.Type]++
	}
	if kinds["cluster"] < 1 || kinds["host"] < 2 {
		t.Fatalf("compute %+v", dc.Compute)
	}
	// Datastore space against the summary read straight from vCenter.
	adm := l.Admin()
	v, err := view.NewManager(adm.Client).CreateContainerView(ctx, adm.ServiceContent.RootFolder, []string{"Datastore"}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Destroy(ctx)
	var dss []mo.Datastore
	if err := v.Retrieve(ctx, []string{"Datastore"}, []string{"summary"}, &dss); err != nil {
		t.Fatal(err)
	}
	if len(dss) == 0 || len(dc.Datastores) != len(dss) {
		t.Fatalf("datastores %+v, vCenter has %d", dc.Datastores, len(dss))
	}
	for _, ds := range dss {
		found := false
		for _, td := range dc.Datastores {
			if td.Name == ds.Summary.Name {
				found = true
				if td.Capacity != ds.Summary.Capacity || td.Free != ds.Summary.FreeSpace || td.Capacity <= 0 || td.Free <= 0 || td.Free > td.Capacity {
					t.Errorf("datastore %s: %+v, vCenter says capacity %d free %d", td.Name, td, ds.Summary.Capacity, ds.Summary.FreeSpace)
				}
			}
		}
		if !found {
			t.Errorf("datastore %s missing", ds.Summary.Name)
		}
	}
}

type countingInventory struct {
	mu    sync.Mutex
	calls int
	gate  chan struct{} // when set, a read waits for it to close
	err   error
	inv   *vsphere.Inventory
}

func (c *countingInventory) Inventory(ctx context.Context) (*vsphere.Inventory, error) {
	c.mu.Lock()
	c.calls++
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return c.inv, c.err
}

// Many console tabs cost one inventory read per TTL; concurrent misses
// share one read; a failed read is not cached.
func TestTopologyCache(t *testing.T) {
	l := startTestLab(t)
	c, _ := labClient(t, l)
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The first read waits until every reader has started, so the others
	// find it in flight (or, once it is done, its cached result).
	gate := make(chan struct{})
	src := &countingInventory{inv: inv, gate: gate}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	topo := New(src, cache.WithClock(clk))
	advance := clk.Advance
	ctx := context.Background()
	var wg, started sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			var err error
			if i%2 == 0 {
				_, err = topo.Nodes(ctx)
			} else {
				_, err = topo.Targets(ctx)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	started.Wait()
	close(gate)
	wg.Wait()
	src.gate = nil
	if src.calls != 1 {
		t.Fatalf("20 concurrent readers made %d inventory reads", src.calls)
	}
	advance(inventoryTTL - time.Second)
	topo.Nodes(ctx)
	if src.calls != 1 {
		t.Fatalf("within the TTL: %d reads", src.calls)
	}
	advance(2 * time.Second)
	topo.Nodes(ctx)
	if src.calls != 2 {
		t.Fatalf("after the TTL: %d reads", src.calls)
	}
	src.err = errors.New("vCenter down")
	advance(inventoryTTL)
	if _, err := topo.Nodes(ctx); err == nil {
		t.Fatal("a failed read must fail")
	}
	src.err = nil
	if _, err := topo.Nodes(ctx); err != nil || src.calls != 4 {
		t.Fatalf("after a failure: %v, %d reads", err, src.calls)
	}
	// A caller that gives up does not wait for the read (held until the
	// test ends).
	hold := make(chan struct{})
	defer close(hold)
	src.gate = hold
	advance(inventoryTTL)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := topo.Nodes(cctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("cancelled caller: %v after %s", err, time.Since(start))
	}
}

func TestVCenterTesterAgainstLab(t *testing.T) {
	l := startTestLab(t)
	_, cfg := labClient(t, l)
	configured := &VCenterTester{configured: &cfg}
	none := &VCenterTester{}
	url := l.URL().String()
	tests := []struct {
		name    string
		tester  *VCenterTester
		req     api.VCenterTest
		ok      bool
		field   string // a 422 naming this field
		message string
	}{
		{"configured", configured, api.VCenterTest{}, true, "", "connected"},
		{"configured URL with /sdk", configured, api.VCenterTest{URL: strings.TrimSuffix(url, "/sdk") + "/sdk/"}, true, "", "connected"},
		{"wrong password", configured, api.VCenterTest{Password: "wrong"}, false, "", "refused"},
		{"given, pinned", none, api.VCenterTest{URL: url, Username: l.Username(), Password: l.Password(), Thumbprint: l.Thumbprint()}, true, "", "connected"},
		{"given, untrusted certificate", none, api.VCenterTest{URL: url, Username: l.Username(), Password: l.Password()}, false, "", "thumbprint"},
		{"given, insecure", none, api.VCenterTest{URL: url, Username: l.Username(), Password: l.Password(), Insecure: true}, true, "", "connected"},
		{"nothing configured", none, api.VCenterTest{}, false, "url", ""},
		{"other URL without password", configured, api.VCenterTest{URL: "https://other.example.com", Username: "u"}, false, "password", ""},
		{"other URL without user", configured, api.VCenterTest{URL: "https://other.example.com", Password: "p"}, false, "username", ""},
		{"unreachable", none, api.VCenterTest{URL: "https://127.0.0.1:1", Username: "u", Password: "p"}, false, "", "127.0.0.1:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := tc.tester.TestVCenter(ctx, tc.req)
			if tc.field != "" {
				if err == nil || !strings.Contains(err.Error(), tc.field) {
					t.Fatalf("want a %s field error, got %+v %v", tc.field, res, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != tc.ok || !strings.Contains(res.Message, tc.message) {
				t.Fatalf("result %+v", res)
			}
			if res.OK && !strings.Contains(res.Version, "VMware") {
				t.Fatalf("version %q", res.Version)
			}
			if strings.Contains(res.Message, l.Password()) {
				t.Fatal("the message shows the password")
			}
		})
	}
}
