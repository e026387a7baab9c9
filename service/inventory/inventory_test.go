package inventory

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vsphere"
)

func TestFromPlacements(t *testing.T) {
	cluster := vsphere.Placement{
		VMRef: vsphere.VMRef{MoRef: "vm-1", InstanceUUID: "u-1", Name: "web01"},
		Containers: []vsphere.Container{
			{Kind: vsphere.KindFolder, MoRef: "group-v5", Name: "vm"},
			{Kind: vsphere.KindDatacenter, MoRef: "datacenter-2", Name: "DC0"},
			{Kind: vsphere.KindResourcePool, MoRef: "resgroup-9", Name: "Resources"},
			{Kind: vsphere.KindCluster, MoRef: "domain-c7", Name: "C0"},
			{Kind: vsphere.KindHost, MoRef: "host-21", Name: "esx1"},
			{Kind: "vapp", MoRef: "resgroup-v1", Name: "unknown kind"},
			{Kind: vsphere.KindFolder, MoRef: "", Name: "no moref"},
		},
		Tags: []vsphere.Tag{{ID: "urn:tag:1", Name: "gold", Category: "backup"}, {ID: "", Name: "broken"}},
	}
	tests := []struct {
		name string
		in   []vsphere.Placement
		want []policy.VM
	}{
		{"empty", nil, []policy.VM{}},
		{"cluster VM with tags", []vsphere.Placement{cluster}, []policy.VM{{
			InstanceUUID: "u-1", Name: "web01", MoRef: "vm-1",
			Containers: []policy.ContainerRef{
				{Kind: policy.KindFolder, ID: "group-v5", Name: "vm"},
				{Kind: policy.KindDatacenter, ID: "datacenter-2", Name: "DC0"},
				{Kind: policy.KindResourcePool, ID: "resgroup-9", Name: "Resources"},
				{Kind: policy.KindCluster, ID: "domain-c7", Name: "C0"},
				{Kind: policy.KindHost, ID: "host-21", Name: "esx1"},
			},
			Tags: []string{"urn:tag:1"},
		}}},
		{"VM without instance UUID is left out", []vsphere.Placement{
			{VMRef: vsphere.VMRef{MoRef: "vm-2", Name: "orphan"}},
			{VMRef: vsphere.VMRef{MoRef: "vm-3", InstanceUUID: "u-3", Name: "bare"}},
		}, []policy.VM{{InstanceUUID: "u-3", Name: "bare", MoRef: "vm-3"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FromPlacements(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("FromPlacements =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// Every kind vsphere reports must map to the policy kind of the same meaning.
func TestKindsMapOneToOne(t *testing.T) {
	for _, k := range []struct {
		v string
		p policy.ContainerKind
	}{
		{vsphere.KindDatacenter, policy.KindDatacenter},
		{vsphere.KindFolder, policy.KindFolder},
		{vsphere.KindCluster, policy.KindCluster},
		{vsphere.KindHost, policy.KindHost},
		{vsphere.KindResourcePool, policy.KindResourcePool},
	} {
		if got, ok := kind(k.v); !ok || got != k.p {
			t.Errorf("kind(%q) = %q, %v; want %q", k.v, got, ok, k.p)
		}
	}
}

type failingSource struct{ err error }

func (f failingSource) Placements(context.Context, bool) ([]vsphere.Placement, error) {
	return nil, f.err
}

func TestVMsWrapsErrors(t *testing.T) {
	inv := &Inventory{src: failingSource{vsphere.ErrNotFound}, tags: true}
	_, err := inv.VMs(context.Background())
	if !errors.Is(err, vsphere.ErrNotFound) {
		t.Fatalf("err = %v, want it to wrap vsphere.ErrNotFound", err)
	}
}

type fixedSource struct {
	ps       []vsphere.Placement
	withTags []bool // what each call asked for
}

func (f *fixedSource) Placements(_ context.Context, withTags bool) ([]vsphere.Placement, error) {
	f.withTags = append(f.withTags, withTags)
	return f.ps, nil
}

func TestTagsOf(t *testing.T) {
	prod := vsphere.Tag{ID: "urn:t:prod", Name: "production", Category: "Environment"}
	gold := vsphere.Tag{ID: "urn:t:gold", Name: "gold", Category: "Backup"}
	dup := vsphere.Tag{ID: "urn:t:prod2", Name: "production", Category: "Backup"} // same name, other category
	tests := []struct {
		name string
		in   []vsphere.Placement
		want []Tag
	}{
		{"none", nil, []Tag{}},
		{"distinct, by category then name", []vsphere.Placement{
			{VMRef: vsphere.VMRef{MoRef: "vm-1"}, Tags: []vsphere.Tag{prod, gold}},
			{VMRef: vsphere.VMRef{MoRef: "vm-2"}, Tags: []vsphere.Tag{prod, dup, {ID: "", Name: "no id"}}},
		}, []Tag{
			{ID: "urn:t:gold", Name: "gold", Category: "Backup"},
			{ID: "urn:t:prod2", Name: "production", Category: "Backup"},
			{ID: "urn:t:prod", Name: "production", Category: "Environment"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TagsOf(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("TagsOf =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestTagsAsksForTagsUnlessWithout(t *testing.T) {
	ctx := context.Background()
	src := &fixedSource{ps: []vsphere.Placement{{VMRef: vsphere.VMRef{MoRef: "vm-1", InstanceUUID: "u"}, Tags: []vsphere.Tag{{ID: "t1", Name: "a", Category: "c"}}}}}
	inv := &Inventory{src: src, tags: true}
	got, err := inv.Tags(ctx)
	if err != nil || len(got) != 1 || got[0] != (Tag{ID: "t1", Name: "a", Category: "c"}) {
		t.Fatalf("Tags = %+v, %v", got, err)
	}
	tags, byVM, err := inv.TagListing(ctx)
	if err != nil || len(tags) != 1 || !reflect.DeepEqual(byVM, map[string][]string{"vm-1": {"t1"}}) {
		t.Fatalf("TagListing = %+v, %v, %v", tags, byVM, err)
	}
	none, err := inv.WithoutTags().Tags(ctx)
	if err != nil || len(none) != 0 || none == nil {
		t.Fatalf("WithoutTags().Tags = %#v, %v; want an empty list", none, err)
	}
	if !reflect.DeepEqual(src.withTags, []bool{true, true}) {
		t.Fatalf("placements asked %v, want one call with tags per listing (none without)", src.withTags)
	}
	if _, err := (&Inventory{src: failingSource{vsphere.ErrNotFound}, tags: true}).Tags(ctx); !errors.Is(err, vsphere.ErrNotFound) {
		t.Fatalf("err = %v, want it to wrap vsphere.ErrNotFound", err)
	}
}
