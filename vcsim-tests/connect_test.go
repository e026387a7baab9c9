package vcsimtests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

func TestConnectTLSAndCredentials(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	ca, err := l.CAFile()
	if err != nil {
		t.Fatal(err)
	}
	base := vsphere.Config{URL: l.URL().String(), Username: l.Username(), Password: l.Password()}
	cases := []struct {
		name    string
		mod     func(*vsphere.Config)
		wantErr string
		is      error
	}{
		{"thumbprint pinned", func(c *vsphere.Config) { c.Thumbprint = l.Thumbprint() }, "", nil},
		{"thumbprint lower case", func(c *vsphere.Config) { c.Thumbprint = strings.ToLower(l.Thumbprint()) }, "", nil},
		{"thumbprint without colons", func(c *vsphere.Config) { c.Thumbprint = strings.ReplaceAll(l.Thumbprint(), ":", "") }, "", nil},
		{"CA file", func(c *vsphere.Config) { c.CAFile = ca }, "", nil},
		{"insecure when asked", func(c *vsphere.Config) { c.Insecure = true }, "", nil},
		{"untrusted without pin", func(c *vsphere.Config) {}, "certificate", nil},
		{"wrong thumbprint", func(c *vsphere.Config) { c.Thumbprint = strings.Repeat("AB:", 31) + "AB" }, "thumbprint does not match", nil},
		{"wrong password", func(c *vsphere.Config) { c.Insecure = true; c.Password = "nope" }, "", vsphere.ErrLogin},
		{"no password", func(c *vsphere.Config) { c.Insecure = true; c.Password = "" }, "password are required", nil},
		{"no URL", func(c *vsphere.Config) { c.URL = "" }, "URL is required", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			c, err := vsphere.Connect(context.Background(), cfg)
			if tc.wantErr == "" && tc.is == nil {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				defer c.Close(context.Background())
				if _, err := c.Inventory(context.Background()); err != nil {
					t.Fatalf("inventory: %v", err)
				}
				return
			}
			if err == nil {
				c.Close(context.Background())
				t.Fatal("connect succeeded, want an error")
			}
			if tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

func TestReloginAfterSessionExpiry(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	if _, err := c.Inventory(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.ExpireSessions(ctx); err != nil {
		t.Fatal(err)
	}
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatalf("inventory after session expiry: %v", err)
	}
	if len(inv.VMs) != 4 {
		t.Errorf("VMs = %d", len(inv.VMs))
	}
	if got := c.Stats().Relogins; got != 1 {
		t.Errorf("relogins = %d, want 1", got)
	}
	// A second expiry is handled as well.
	if err := l.ExpireSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FindVM(ctx, "DC0_H0_VM0"); err != nil {
		t.Fatalf("find after second expiry: %v", err)
	}
	if got := c.Stats().Relogins; got != 2 {
		t.Errorf("relogins = %d, want 2", got)
	}
}

func TestRetryPolicy(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	// Transient faults on a read are retried and the caller never sees them.
	l.FailMethod("RetrievePropertiesEx", nil, 2)
	if _, err := c.Inventory(ctx); err != nil {
		t.Fatalf("inventory with 2 transient faults: %v", err)
	}
	if got := c.Stats().Retries; got != 2 {
		t.Errorf("retries = %d, want 2", got)
	}
	l.ClearMethodFaults()
	// More faults than attempts: the error says it gave up on a transient fault.
	l.FailMethod("RetrievePropertiesEx", nil, 10)
	_, err := c.Inventory(ctx)
	if !errors.Is(err, vsphere.ErrTransient) {
		t.Errorf("inventory with persistent fault = %v, want ErrTransient", err)
	}
	l.ClearMethodFaults()
	// A permanent fault is not retried.
	before := c.Stats().Retries
	l.FailMethod("RetrievePropertiesEx", &types.InvalidArgument{}, 1)
	if _, err := c.Inventory(ctx); err == nil {
		t.Error("permanent fault: inventory succeeded")
	}
	if c.Stats().Retries != before {
		t.Error("a permanent fault was retried")
	}
	l.ClearMethodFaults()
	// A task-creating call is never retried, even on a transient fault: it
	// may have taken effect.
	vm := findVM(t, c, "DC0_H0_VM0")
	l.FailMethod("CreateSnapshotEx_Task", nil, 1)
	if _, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "x"}); err == nil {
		t.Error("snapshot with injected fault succeeded")
	}
	if c.Stats().Retries != before {
		t.Error("CreateSnapshotEx_Task was retried")
	}
}

// TestKeepAliveReloginsWhileIdle: an idle client keeps its session alive
// and re-logs in by itself after the server dropped the session.
func TestKeepAliveReloginsWhileIdle(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l, func(cfg *vsphere.Config) { cfg.KeepAlive = 100 * time.Millisecond })
	ctx := context.Background()
	if err := l.ExpireSessions(ctx); err != nil {
		t.Fatal(err)
	}
	before := c.Stats().SOAPCalls
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Relogins == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if c.Stats().SOAPCalls == before || c.Stats().Relogins != 1 {
		t.Fatalf("idle client: %+v (calls before %d)", c.Stats(), before)
	}
	if _, err := c.FindVM(ctx, "DC0_H0_VM0"); err != nil {
		t.Fatal(err)
	}
	if c.Stats().Relogins != 1 {
		t.Errorf("relogins = %d after the keep-alive already re-logged in", c.Stats().Relogins)
	}
}
