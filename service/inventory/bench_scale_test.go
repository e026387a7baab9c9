package inventory_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"

	"github.com/vmware/govmomi/simulator"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/inventory"
	"github.com/vmvault/vmvault/vsphere"
)

// BenchmarkInventoryRefresh lists every VM of an in-process vcsim vCenter
// (govmomi's VPX model: one standalone host and one cluster, Machine VMs on
// each) with its containers, then evaluates a folder and a tag-less
// selection over it, as the scheduler does at a window's opening. Tags are
// left out: vcsim's tagging needs the REST simulator.
//
//	go test -run XXX -bench InventoryRefresh -benchtime 3x ./inventory
func BenchmarkInventoryRefresh(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("vms=%d", n), func(b *testing.B) {
			m := simulator.VPX()
			m.Machine = n / 2
			if err := m.Create(); err != nil {
				b.Fatal(err)
			}
			defer m.Remove()
			m.Service.TLS = new(tls.Config)
			s := m.Service.NewServer()
			defer s.Close()
			ctx := context.Background()
			c, err := vsphere.Connect(ctx, vsphere.Config{URL: s.URL.String(), Username: "user", Password: "pass", Insecure: true})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			inv := inventory.New(c).WithoutTags()
			b.ResetTimer()
			var vms []policy.VM
			for range b.N {
				if vms, err = inv.VMs(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if len(vms) != n {
				b.Fatalf("listed %d VMs, want %d", len(vms), n)
			}
			var folder policy.ContainerRef
			for _, cr := range vms[0].Containers {
				if cr.Kind == policy.KindFolder {
					folder = cr
				}
			}
			res := policy.Selection{Containers: []policy.ContainerRef{folder}}.Matcher()
			sel := 0
			for _, vm := range vms {
				if res(vm) {
					sel++
				}
			}
			if sel == 0 {
				b.Fatalf("folder %v selects nothing", folder)
			}
			b.ReportMetric(float64(n), "vms")
		})
	}
}
