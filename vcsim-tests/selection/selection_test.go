package selection

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// TestSelectionAgainstLab arranges the lab (a nested folder, a nested
// resource pool, tags) and checks every kind of inclusion and exclusion
// against VM names computed from the arrangement, not from the adapter.
func TestSelectionAgainstLab(t *testing.T) {
	e := newEnv(t, lab.Options{})
	dc := e.find("Datacenter", "DC0")
	vmRoot := e.find("Folder", "vm")
	protected := e.mkFolder(vmRoot, "Protected")
	inner := e.mkFolder(protected, "Inner")
	e.moveIntoFolder(inner, hostVM0)
	rootPool := e.clusterRootPool()
	gold := e.mkPool(rootPool, "Gold")
	goldChild := e.mkPool(gold, "GoldChild")
	e.moveIntoPool(goldChild, clusterVM1)
	goldTag := e.tagID("backup", "gold", clusterVM0)
	skipTag := e.tagID("backup", "skip", hostVM1, clusterVM1)
	cluster := e.find("ClusterComputeResource", "DC0_C0")
	standalone := e.find("HostSystem", "DC0_H0")
	// The cluster VMs' hosts are vcsim's choice: read them from the lab.
	host0 := *e.vmProps(clusterVM0).Runtime.Host
	onHost0 := []string{clusterVM0}
	if *e.vmProps(clusterVM1).Runtime.Host == host0 {
		onHost0 = append(onHost0, clusterVM1)
	}
	dcSel := []policy.ContainerRef{ref(policy.KindDatacenter, dc)}

	tests := []struct {
		name string
		sel  policy.Selection
		want []string
	}{
		{"datacenter", policy.Selection{Containers: dcSel}, allVMs},
		{"root vm folder", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindFolder, vmRoot)}}, allVMs},
		{"folder covers its subfolders", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindFolder, protected)}}, []string{hostVM0}},
		{"nested folder", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindFolder, inner)}}, []string{hostVM0}},
		{"cluster", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindCluster, cluster)}}, []string{clusterVM0, clusterVM1}},
		{"standalone host", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindHost, standalone)}}, []string{hostVM0, hostVM1}},
		{"cluster host", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindHost, host0)}}, onHost0},
		{"cluster root pool covers child pools", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindResourcePool, rootPool)}}, []string{clusterVM0, clusterVM1}},
		{"pool covers its child pool", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindResourcePool, gold)}}, []string{clusterVM1}},
		{"nested pool", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindResourcePool, goldChild)}}, []string{clusterVM1}},
		{"tag", policy.Selection{Tags: []string{goldTag}}, []string{clusterVM0}},
		{"explicit VM", policy.Selection{VMs: []string{e.uuid(hostVM1)}}, []string{hostVM1}},
		{"several inclusions are a union", policy.Selection{VMs: []string{e.uuid(hostVM1)}, Tags: []string{goldTag}, Containers: []policy.ContainerRef{ref(policy.KindFolder, inner)}}, []string{clusterVM0, hostVM0, hostVM1}},
		{"exclude VM", policy.Selection{Containers: dcSel, Exclude: policy.Exclusions{VMs: []string{e.uuid(hostVM0)}}}, []string{clusterVM0, clusterVM1, hostVM1}},
		{"exclude name glob, case-insensitive", policy.Selection{Containers: dcSel, Exclude: policy.Exclusions{Names: []string{"dc0_h0_*"}}}, []string{clusterVM0, clusterVM1}},
		{"exclude tag", policy.Selection{Containers: dcSel, Exclude: policy.Exclusions{Tags: []string{skipTag}}}, []string{clusterVM0, hostVM0}},
		{"exclusion wins over explicit VM and tag", policy.Selection{VMs: []string{e.uuid(hostVM1)}, Tags: []string{goldTag}, Exclude: policy.Exclusions{Tags: []string{skipTag}, Names: []string{"*_RP0_VM0"}}}, []string{}},
		{"right id, wrong kind matches nothing", policy.Selection{Containers: []policy.ContainerRef{{Kind: policy.KindFolder, ID: cluster.Value}}}, []string{}},
		{"empty folder matches nothing", policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindFolder, e.mkFolder(vmRoot, "Empty"))}}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := e.resolve(tc.sel, nil)
			if got := names(res.VMs); !slices.Equal(got, sorted(tc.want...)) {
				t.Fatalf("selected %v, want %v", got, sorted(tc.want...))
			}
			if res.New != nil || res.Vanished != nil {
				t.Fatalf("first resolution reports new %v / vanished %v", names(res.New), res.Vanished)
			}
		})
	}

	// The adapter's identities are the lab's: instance UUIDs and morefs.
	vms, err := e.inv.VMs(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != len(allVMs) {
		t.Fatalf("inventory has %d VMs, want %d", len(vms), len(allVMs))
	}
	for _, v := range vms {
		moref, err := e.lab.MoRef(v.Name)
		if err != nil {
			t.Fatal(err)
		}
		if v.MoRef != moref || v.InstanceUUID != e.uuid(v.Name) {
			t.Errorf("%s: moref %s uuid %s, lab says %s %s", v.Name, v.MoRef, v.InstanceUUID, moref, e.uuid(v.Name))
		}
		for _, c := range v.Containers {
			if c.ID == "" || c.Name == "" {
				t.Errorf("%s: container without id or name: %+v", v.Name, c)
			}
		}
	}

	// Validation warns (does not fail) about a selection that matches nothing yet.
	job := policy.NewJob("empty", "empty folder", "repo1", time.UTC)
	job.Selection = policy.Selection{Containers: []policy.ContainerRef{{Kind: policy.KindFolder, ID: e.mkFolder(vmRoot, "Later").Value}}}
	warnings, err := job.Validate(e.ctx, policy.ValidateEnv{Inventory: e.inv})
	if err != nil || len(warnings) == 0 || !strings.Contains(strings.Join(warnings, " "), "match") {
		t.Errorf("validate empty selection: warnings %q, err %v", warnings, err)
	}
}

// TestMoveInAndOutBetweenResolutions moves VMs into and out of a protected
// folder, renames the folder and tags a VM between resolutions: each
// resolution reports exactly the VMs that became selected as new and the
// ones that stopped being selected as vanished.
func TestMoveInAndOutBetweenResolutions(t *testing.T) {
	e := newEnv(t, lab.Options{})
	vmRoot := e.find("Folder", "vm")
	protected := e.mkFolder(vmRoot, "Protected")
	e.moveIntoFolder(protected, hostVM0)
	goldTag := e.tagID("backup", "gold") // exists, on no VM yet
	sel := policy.Selection{Containers: []policy.ContainerRef{ref(policy.KindFolder, protected)}, Tags: []string{goldTag}}

	type step struct {
		name     string
		change   func()
		selected []string
		new      []string
		vanished []string // VM names
	}
	steps := []step{
		{"first run", func() {}, []string{hostVM0}, nil, nil},
		{"nothing changed", func() {}, []string{hostVM0}, nil, nil},
		{"moved in", func() { e.moveIntoFolder(protected, clusterVM0) }, []string{clusterVM0, hostVM0}, []string{clusterVM0}, nil},
		{"folder renamed: still selected by moref", func() { e.rename(protected, "Renamed") }, []string{clusterVM0, hostVM0}, nil, nil},
		{"moved out", func() { e.moveIntoFolder(vmRoot, hostVM0) }, []string{clusterVM0}, nil, []string{hostVM0}},
		{"tagged", func() { e.tagID("backup", "gold", clusterVM1) }, []string{clusterVM0, clusterVM1}, []string{clusterVM1}, nil},
		{"moved into a subfolder", func() { e.moveIntoFolder(e.mkFolder(protected, "Sub"), hostVM1) }, []string{clusterVM0, clusterVM1, hostVM1}, []string{hostVM1}, nil},
		{"moved out and in at once", func() {
			e.moveIntoFolder(vmRoot, clusterVM0)
			e.moveIntoFolder(protected, hostVM0)
		}, []string{clusterVM1, hostVM0, hostVM1}, []string{hostVM0}, []string{clusterVM0}},
	}
	var previous []string
	for i, s := range steps {
		s.change()
		res := e.resolve(sel, previous)
		if got := names(res.VMs); !slices.Equal(got, sorted(s.selected...)) {
			t.Fatalf("%s: selected %v, want %v", s.name, got, sorted(s.selected...))
		}
		if got := names(res.New); i > 0 && !slices.Equal(got, sorted(s.new...)) {
			t.Fatalf("%s: new %v, want %v", s.name, got, sorted(s.new...))
		}
		var wantGone []string
		for _, n := range s.vanished {
			wantGone = append(wantGone, e.uuid(n))
		}
		if !slices.Equal(res.Vanished, sorted(wantGone...)) {
			t.Fatalf("%s: vanished %v, want %v (%v)", s.name, res.Vanished, sorted(wantGone...), s.vanished)
		}
		previous = uuids(res.VMs)
	}
}
