package vcsimtests

import (
	"context"
	"testing"
	"time"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// connect logs a vsphere client in to the lab, pinning its thumbprint.
func connect(t *testing.T, l *lab.Lab, mod ...func(*vsphere.Config)) *vsphere.Client {
	t.Helper()
	cfg := labtest.Config(l, "test-appliance", func(c *vsphere.Config) {
		c.Retry = vsphere.RetryPolicy{Attempts: 4, Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	})
	for _, m := range mod {
		m(&cfg)
	}
	return labtest.Connect(t, cfg)
}

func findVM(t *testing.T, c *vsphere.Client, name string) vsphere.VM {
	t.Helper()
	vm, err := c.FindVM(context.Background(), name)
	if err != nil {
		t.Fatalf("find VM %s: %v", name, err)
	}
	return vm
}
