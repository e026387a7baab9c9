package vcsimtests

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

func TestSmokeInventory(t *testing.T) {
	l := startLab(t, lab.Options{})
	c := connect(t, l)
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(inv, "", " ")
	t.Logf("%s", b)
	t.Logf("%+v", c.Stats())
}
