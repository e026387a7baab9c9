package vcsimtests

import (
	"context"
	"testing"

	"github.com/vmvault/vmvault/service/inventory"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// A tag no VM carries yet is still offered: administrators create the tag
// a job selects before they tag VMs with it. VM tags keep coming from the
// attached-tags reading.
func TestInventoryListsUnattachedTags(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	if err := l.TagVMs(ctx, "Backup", "Gold", "DC0_H0_VM0"); err != nil {
		t.Fatal(err)
	}
	if err := l.TagVMs(ctx, "Backup", "Silver"); err != nil { // created, attached to nothing
		t.Fatal(err)
	}
	all, err := c.AllTags(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("AllTags = %+v, %v", all, err)
	}
	tags, byVM, err := inventory.New(c).TagListing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, tg := range tags {
		names[tg.Category+"/"+tg.Name] = tg.ID
	}
	if len(tags) != 2 || names["Backup/Gold"] == "" || names["Backup/Silver"] == "" {
		t.Fatalf("tags = %+v", tags)
	}
	if len(byVM) != 1 {
		t.Fatalf("tags by VM = %v", byVM)
	}
	for _, ids := range byVM {
		if len(ids) != 1 || ids[0] != names["Backup/Gold"] {
			t.Fatalf("VM tags = %v, want only Gold %s", ids, names["Backup/Gold"])
		}
	}
}
