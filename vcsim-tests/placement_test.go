package vcsimtests

import (
	"context"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

func TestPlacements(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	if err := l.TagVMs(ctx, "backup", "gold", "DC0_C0_RP0_VM0"); err != nil {
		t.Fatal(err)
	}
	ps, err := c.Placements(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 {
		t.Fatalf("placements = %d", len(ps))
	}
	got := map[string]string{}
	tagsOf := map[string]string{}
	for _, p := range ps {
		if p.InstanceUUID == "" {
			t.Errorf("%s: no instance UUID", p.Name)
		}
		var ks []string
		for _, ct := range p.Containers {
			ks = append(ks, ct.Kind+":"+ct.Name)
		}
		got[p.Name] = strings.Join(ks, ",")
		for _, tg := range p.Tags {
			tagsOf[p.Name] += tg.Category + "/" + tg.Name
			if tg.ID == "" {
				t.Errorf("tag without id: %+v", tg)
			}
		}
	}
	want := map[string]string{
		"DC0_C0_RP0_VM0": "folder:vm,datacenter:DC0,resourcepool:Resources,cluster:DC0_C0,folder:host,host:",
		"DC0_H0_VM0":     "folder:vm,datacenter:DC0,resourcepool:Resources,folder:host,host:DC0_H0",
	}
	for vm, w := range want {
		g := got[vm]
		// The cluster VM's host varies; check the prefix and the host kind.
		if !strings.HasPrefix(g, strings.TrimSuffix(w, "host:")) || !strings.Contains(g, "host:DC0_") {
			t.Errorf("%s containers = %s, want like %s", vm, g, w)
		}
	}
	if tagsOf["DC0_C0_RP0_VM0"] != "backup/gold" || tagsOf["DC0_H0_VM0"] != "" {
		t.Errorf("tags = %v", tagsOf)
	}
	for _, p := range ps {
		if p.Name != "DC0_C0_RP0_VM0" {
			continue
		}
		found := false
		for _, ct := range p.Containers {
			found = found || ct.Kind == vsphere.KindCluster && strings.HasPrefix(ct.MoRef, "domain-c")
		}
		if !found {
			t.Errorf("cluster VM lacks its cluster by moref: %+v", p.Containers)
		}
	}
}
