package selection

import (
	"slices"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// TestListingCostDoesNotGrowWithVMs proves the adapter's "a handful of round
// trips for any VM count": listing 4 VMs and listing 4+extra VMs with their
// tags takes the same number of SOAP calls, and few of them. (vAPI tag calls
// are not counted by vsphere.Stats; Placements makes a fixed number of them:
// login, one attached-tags query, one tag list, one per category, logout.)
func TestListingCostDoesNotGrowWithVMs(t *testing.T) {
	const extra = 60
	e := newEnv(t, lab.Options{})
	gold := e.tagID("backup", "gold", clusterVM0)
	e.tagID("owner", "ops", hostVM0)
	calls := func() (int64, []policy.VM) {
		t.Helper()
		before := e.c.Stats().SOAPCalls
		start := time.Now()
		vms, err := e.inv.VMs(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("listed %d VMs in %v", len(vms), time.Since(start))
		return e.c.Stats().SOAPCalls - before, vms
	}
	small, vms := calls()
	if len(vms) != len(allVMs) {
		t.Fatalf("listed %d VMs, want %d", len(vms), len(allVMs))
	}
	if err := e.lab.CreateVMs(e.ctx, extra, "EXTRA"); err != nil {
		t.Fatal(err)
	}
	e.tagID("backup", "gold", "EXTRA0007", "EXTRA0042")
	large, vms := calls()
	if len(vms) != len(allVMs)+extra {
		t.Fatalf("listed %d VMs, want %d", len(vms), len(allVMs)+extra)
	}
	var tagged []string
	for _, v := range vms {
		if slices.Contains(v.Tags, gold) {
			tagged = append(tagged, v.Name)
		}
	}
	if want := sorted(clusterVM0, "EXTRA0007", "EXTRA0042"); !slices.Equal(sorted(tagged...), want) {
		t.Fatalf("VMs tagged gold: %v, want %v", sorted(tagged...), want)
	}
	t.Logf("SOAP calls per listing: %d with %d VMs, %d with %d VMs", small, len(allVMs), large, len(allVMs)+extra)
	if small != large || large > 5 {
		t.Fatalf("SOAP calls per listing grew from %d to %d (want equal and at most 5)", small, large)
	}
}
