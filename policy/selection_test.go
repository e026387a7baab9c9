package policy

import (
	"context"
	"errors"
	"slices"
	"testing"
)

var (
	dc1     = ContainerRef{Kind: KindDatacenter, ID: "datacenter-1"}
	fProd   = ContainerRef{Kind: KindFolder, ID: "group-v10", Name: "prod"}
	fTest   = ContainerRef{Kind: KindFolder, ID: "group-v11", Name: "test"}
	cl1     = ContainerRef{Kind: KindCluster, ID: "domain-c7"}
	host1   = ContainerRef{Kind: KindHost, ID: "host-21"}
	host2   = ContainerRef{Kind: KindHost, ID: "host-22"}
	rpGold  = ContainerRef{Kind: KindResourcePool, ID: "resgroup-30", Name: "gold"}
	tagProd = "urn:vmomi:InventoryServiceTag:prod:GLOBAL"
	tagSkip = "urn:vmomi:InventoryServiceTag:nobackup:GLOBAL"
)

func testVMs() []VM {
	return []VM{
		{InstanceUUID: "u-web1", Name: "web1", Containers: []ContainerRef{dc1, fProd, cl1, host1, rpGold}},
		{InstanceUUID: "u-web2", Name: "web2", Containers: []ContainerRef{dc1, fProd, cl1, host2}},
		{InstanceUUID: "u-db1", Name: "db1", Containers: []ContainerRef{dc1, fProd, host2}, Tags: []string{tagProd}},
		{InstanceUUID: "u-tmp", Name: "Web-Test", Containers: []ContainerRef{dc1, fProd, cl1, host1}},
		{InstanceUUID: "u-t1", Name: "t1", Containers: []ContainerRef{dc1, fTest, host1}, Tags: []string{tagProd, tagSkip}},
		{InstanceUUID: "u-t2", Name: "t2", Containers: []ContainerRef{dc1, fTest, host2}},
	}
}

func ids(vms []VM) []string {
	var out []string
	for _, v := range vms {
		out = append(out, v.InstanceUUID)
	}
	return out
}

func TestSelectionMatches(t *testing.T) {
	tests := []struct {
		name string
		sel  Selection
		want []string
	}{
		{"explicit", Selection{VMs: []string{"u-t2", "u-web1"}}, []string{"u-t2", "u-web1"}},
		{"datacenter", Selection{Containers: []ContainerRef{dc1}}, []string{"u-db1", "u-t1", "u-t2", "u-tmp", "u-web1", "u-web2"}},
		{"folder", Selection{Containers: []ContainerRef{fTest}}, []string{"u-t1", "u-t2"}},
		{"cluster", Selection{Containers: []ContainerRef{cl1}}, []string{"u-tmp", "u-web1", "u-web2"}},
		{"host", Selection{Containers: []ContainerRef{host2}}, []string{"u-db1", "u-t2", "u-web2"}},
		{"resource pool", Selection{Containers: []ContainerRef{rpGold}}, []string{"u-web1"}},
		{"kind must match too", Selection{Containers: []ContainerRef{{Kind: KindFolder, ID: "host-21"}}}, nil},
		{"tag", Selection{Tags: []string{tagProd}}, []string{"u-db1", "u-t1"}},
		{"exclude tag wins over tag", Selection{Tags: []string{tagProd}, Exclude: Exclusions{Tags: []string{tagSkip}}}, []string{"u-db1"}},
		{"exclude name glob case-insensitive", Selection{Containers: []ContainerRef{fProd}, Exclude: Exclusions{Names: []string{"*-test"}}}, []string{"u-db1", "u-web1", "u-web2"}},
		{"exclude vm wins over explicit", Selection{VMs: []string{"u-web1"}, Containers: []ContainerRef{cl1}, Exclude: Exclusions{VMs: []string{"u-web1"}}}, []string{"u-tmp", "u-web2"}},
		{"union of rules", Selection{VMs: []string{"u-t2"}, Containers: []ContainerRef{rpGold}, Tags: []string{tagProd}}, []string{"u-db1", "u-t1", "u-t2", "u-web1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.sel.Validate(); err != nil {
				t.Fatalf("validate: %v", err)
			}
			res, err := tc.sel.Resolve(context.Background(), NewMemInventory(testVMs()...), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res.VMs); !slices.Equal(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
			m := tc.sel.Matcher()
			for _, vm := range testVMs() {
				if m(vm) != tc.sel.Matches(vm) {
					t.Errorf("Matcher and Matches disagree on %s", vm.InstanceUUID)
				}
			}
		})
	}
}

func TestSelectionNewVanishedMissing(t *testing.T) {
	inv := NewMemInventory(testVMs()...)
	sel := Selection{VMs: []string{"u-gone"}, Containers: []ContainerRef{fTest}}
	ctx := context.Background()
	first, err := sel.Resolve(ctx, inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.New) != 0 || len(first.Vanished) != 0 || !slices.Equal(first.Missing, []string{"u-gone"}) {
		t.Fatalf("first resolution %+v", first)
	}
	// Move web2 into the test folder and t2 out of it: the next run sees both changes.
	vms := testVMs()
	vms[1].Containers = []ContainerRef{dc1, fTest, host2}
	vms[5].Containers = []ContainerRef{dc1, fProd, host2}
	inv.Set(vms...)
	second, err := sel.Resolve(ctx, inv, ids(first.VMs))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(second.VMs); !slices.Equal(got, []string{"u-t1", "u-web2"}) {
		t.Errorf("selected %v", got)
	}
	if got := ids(second.New); !slices.Equal(got, []string{"u-web2"}) {
		t.Errorf("new %v", got)
	}
	if !slices.Equal(second.Vanished, []string{"u-t2"}) {
		t.Errorf("vanished %v", second.Vanished)
	}
	boom := errors.New("vcenter down")
	inv.SetError(boom)
	if _, err := sel.Resolve(ctx, inv, nil); !errors.Is(err, boom) {
		t.Errorf("inventory error not wrapped: %v", err)
	}
}

func TestSelectionValidate(t *testing.T) {
	tests := []struct {
		sel   Selection
		field string
	}{
		{Selection{}, "selection"},
		{Selection{VMs: []string{" "}}, "selection.vms[0]"},
		{Selection{Containers: []ContainerRef{{Kind: "rack", ID: "x"}}}, "selection.containers[0].kind"},
		{Selection{Containers: []ContainerRef{{Kind: KindHost}}}, "selection.containers[0].id"},
		{Selection{Tags: []string{""}}, "selection.tags[0]"},
		{Selection{Tags: []string{"a"}, Exclude: Exclusions{Names: []string{"ok*", "[bad"}}}, "selection.exclude.names[1]"},
	}
	for _, tc := range tests {
		var ve *ValidationError
		if err := tc.sel.Validate(); !errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: error %v, want field %s", tc.sel, err, tc.field)
		}
	}
}
