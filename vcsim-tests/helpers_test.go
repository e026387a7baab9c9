package vcsimtests

import (
	"context"
	"testing"
	"time"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vsphere"
)

// startLab starts a lab for one test and closes it at the end.
func startLab(t *testing.T, opts lab.Options) *lab.Lab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := lab.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

// connect logs a vsphere client in to the lab, pinning its thumbprint.
func connect(t *testing.T, l *lab.Lab, mod ...func(*vsphere.Config)) *vsphere.Client {
	t.Helper()
	cfg := vsphere.Config{
		URL: l.URL().String(), Username: l.Username(), Password: l.Password(), Thumbprint: l.Thumbprint(),
		ApplianceID: "test-appliance",
		Retry:       vsphere.RetryPolicy{Attempts: 4, Base: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := vsphere.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func findVM(t *testing.T, c *vsphere.Client, name string) vsphere.VM {
	t.Helper()
	vm, err := c.FindVM(context.Background(), name)
	if err != nil {
		t.Fatalf("find VM %s: %v", name, err)
	}
	return vm
}
