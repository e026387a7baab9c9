package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vmconfig"
)

type staticTags struct {
	tags []Tag
	err  error
}

func (s staticTags) Tags(context.Context) ([]Tag, error) { return s.tags, s.err }

const prodTag = "urn:vmomi:InventoryServiceTag:prod:GLOBAL"

func TestTagsEndpoint(t *testing.T) {
	list := staticTags{tags: []Tag{{ID: prodTag, Name: "production", Category: "Environment"}}}
	tests := []struct {
		name   string
		src    TagSource
		status int
		code   string
		want   []Tag
	}{
		{"no vCenter", nil, 503, "vcenter_not_configured", nil},
		{"tagging service down", staticTags{err: errors.New("vAPI login: refused")}, 503, "unavailable", nil},
		{"no tags is an empty list", staticTags{}, 200, "", []Tag{}},
		{"tags", list, 200, "", list.tags},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Tags = tc.src })
			r := f.do("GET", "/api/v1/tags", nil, bearer(f.tokens[auth.RoleRestoreOnly]))
			if r.status != tc.status {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			if tc.code != "" {
				if got := r.errBody(t).Code; got != tc.code {
					t.Fatalf("code %q", got)
				}
				return
			}
			if tc.want != nil && len(tc.want) == 0 && strings.TrimSpace(string(r.body)) != "[]" {
				t.Fatalf("body %s, want []", r.body)
			}
			var got []Tag
			r.json(t, &got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("tags %+v, want %+v", got, tc.want)
			}
		})
	}
}

// GET /vms and GET /inventory's VM nodes carry the VM's tag ids, as the
// policy inventory (what the scheduler selects from) reports them.
func TestVMsAndInventoryCarryTags(t *testing.T) {
	topo := staticTopology{nodes: []InventoryNode{
		{ID: "datacenter-2", Type: NodeDatacenter, Name: "DC0", Path: "/DC0"},
		{ID: "vm-42", Type: NodeVM, Name: "web01", Parent: "datacenter-2", Path: "/DC0/vm/web01", InstanceUUID: testVM.InstanceUUID},
		{ID: "vm-43", Type: NodeVM, Name: "db01", Parent: "datacenter-2", Path: "/DC0/vm/db01", InstanceUUID: "u-db"},
	}}
	f := newFixture(t, func(c *Config) { c.Topology = topo })
	tagged := testVM
	tagged.Tags = []string{prodTag}
	f.inv.Set(tagged, policy.VM{InstanceUUID: "u-db", Name: "db01", MoRef: "vm-43"})

	var vms []VMStatus
	f.admin("GET", "/api/v1/vms", nil).json(t, &vms)
	tags := map[string][]string{}
	for _, v := range vms {
		if v.Tags == nil {
			t.Fatalf("VM %s: tags null, want a list", v.Name)
		}
		tags[v.Name] = v.Tags
	}
	if want := map[string][]string{"web01": {prodTag}, "db01": {}, "old01": {}}; !reflect.DeepEqual(tags, want) {
		t.Fatalf("GET /vms tags %v, want %v", tags, want)
	}

	var inv InventoryResponse
	f.admin("GET", "/api/v1/inventory", nil).json(t, &inv)
	got := map[string][]string{}
	for _, n := range inv.Nodes {
		got[n.ID] = n.Tags
	}
	if want := map[string][]string{"datacenter-2": nil, "vm-42": {prodTag}, "vm-43": nil}; !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /inventory tags %v, want %v", got, want)
	}
}

// A failing inventory leaves the tree without tags rather than failing it.
func TestInventoryTreeWithoutTagsWhenInventoryFails(t *testing.T) {
	topo := staticTopology{nodes: []InventoryNode{{ID: "vm-42", Type: NodeVM, Name: "web01", Path: "/DC0/vm/web01"}}}
	f := newFixture(t, func(c *Config) { c.Topology = topo; c.Inventory = failingInventory{} })
	r := f.admin("GET", "/api/v1/inventory", nil)
	if r.status != 200 || strings.Contains(string(r.body), `"tags"`) {
		t.Fatalf("status %d %s", r.status, r.body)
	}
}

type failingInventory struct{}

func (failingInventory) VMs(context.Context) ([]policy.VM, error) {
	return nil, errors.New("vAPI down")
}

// commitConfigPoint stores a point whose VM configuration blob is cfg.
func commitConfigPoint(t *testing.T, r *repository.Repository, cfg []byte) repository.Point {
	t.Helper()
	ctx := context.Background()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	data := bytes.Repeat([]byte("config point"), 4096)
	id, _, _, err := s.PutChunk(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.PutDisk(ctx, int64(len(data)), []repository.Extent{{Offset: 0, Length: int64(len(data)), ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Commit(ctx, repository.NewPoint{
		VM:   repository.VMIdentity{Name: "app01", InstanceUUID: "u-app"},
		Time: time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC), Consistency: "application", Config: cfg,
		Disks: []repository.NewDisk{{Key: 2000, Label: "Hard disk 1", Capacity: int64(len(data)), Map: root}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// GET /restore-points/{id} shows the saved configuration's NICs and disks
// (what the restore wizard maps); lists leave it out.
func TestPointConfig(t *testing.T) {
	good, err := vmconfig.Encode(vmconfig.VMConfig{Version: vmconfig.Version, Name: "app01", NumCPU: 2, MemoryMB: 1024, GuestID: "otherGuest64",
		Disks: []vmconfig.DiskConfig{{Key: 2000, Index: 0, Label: "Hard disk 1", CapacityBytes: 49152, Datastore: "LocalDS_0"},
			{Key: 2001, Index: -1, Label: "Hard disk 2", CapacityBytes: 1 << 30, Datastore: "LocalDS_1", Skipped: "independent disk"}},
		NICs: []vmconfig.NICConfig{{Key: 4000, Label: "Network adapter 1", Type: "vmxnet3", Network: "VM Network", MAC: "00:50:56:00:00:01"}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		blob    []byte
		want    *PointConfig
		wantErr string
	}{
		{"saved configuration", good, &PointConfig{Name: "app01", GuestID: "otherGuest64", NumCPU: 2, MemoryMB: 1024,
			NICs: []PointNIC{{Label: "Network adapter 1", Type: "vmxnet3", Network: "VM Network"}},
			Disks: []PointConfigDisk{{Key: 2000, Label: "Hard disk 1", Capacity: 49152, Datastore: "LocalDS_0"},
				{Key: 2001, Label: "Hard disk 2", Capacity: 1 << 30, Datastore: "LocalDS_1", Skipped: "independent disk"}}}, ""},
		{"no configuration (image backup)", nil, nil, ""},
		{"unreadable configuration", []byte(`{"version":99,"name":"x"}`), nil, "version 99"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			p := commitConfigPoint(t, f.repo, tc.blob)
			r := f.admin("GET", "/api/v1/restore-points/"+p.ID, nil)
			if r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			var rp RestorePoint
			dec := json.NewDecoder(bytes.NewReader(r.body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rp); err != nil {
				t.Fatalf("decode %s: %v", r.body, err)
			}
			if !reflect.DeepEqual(rp.Config, tc.want) {
				t.Fatalf("config %+v, want %+v", rp.Config, tc.want)
			}
			if !strings.Contains(rp.ConfigError, tc.wantErr) || (tc.wantErr == "") != (rp.ConfigError == "") {
				t.Fatalf("config_error %q, want %q", rp.ConfigError, tc.wantErr)
			}
			list := f.admin("GET", "/api/v1/restore-points?vm=u-app", nil)
			if list.status != 200 || strings.Contains(string(list.body), `"config"`) || !strings.Contains(string(list.body), p.ID) {
				t.Fatalf("list %d %s: want the point without its configuration", list.status, list.body)
			}
		})
	}
}

type cachedTags struct {
	staticTags
	byVM map[string][]string
}

func (c cachedTags) VMTags(context.Context) (map[string][]string, error) { return c.byVM, c.err }

// With a tag source that knows each VM's tags (the daemon's cached
// listing), GET /inventory takes them from it, not from the inventory.
func TestInventoryTreeTagsFromTagSource(t *testing.T) {
	topo := staticTopology{nodes: []InventoryNode{
		{ID: "vm-42", Type: NodeVM, Name: "web01", Path: "/DC0/vm/web01", InstanceUUID: testVM.InstanceUUID},
		{ID: "vm-43", Type: NodeVM, Name: "db01", Path: "/DC0/vm/db01"},
	}}
	src := cachedTags{byVM: map[string][]string{"vm-43": {prodTag}}}
	f := newFixture(t, func(c *Config) { c.Topology = topo; c.Tags = src; c.Inventory = failingInventory{} })
	var inv InventoryResponse
	f.admin("GET", "/api/v1/inventory", nil).json(t, &inv)
	got := map[string][]string{}
	for _, n := range inv.Nodes {
		got[n.ID] = n.Tags
	}
	if want := map[string][]string{"vm-42": nil, "vm-43": {prodTag}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /inventory tags %v, want %v", got, want)
	}
}
