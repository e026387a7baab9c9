package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/vmvault/vmvault/vsphere"
)

func init() {
	register(&command{name: "inventory", summary: "list the vCenter inventory: VMs, disks, hosts, datastores", run: runInventory})
}

func runInventory(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "inventory")
	vc := addVCenterFlags(fs)
	asJSON := fs.Bool("json", false, "print the whole inventory as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, pos)
	}
	c, err := vc.connect(ctx, env)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	inv, err := c.Inventory(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(inv)
	}
	printInventory(env, c, inv)
	return nil
}

func printInventory(env *cliEnv, c *vsphere.Client, inv *vsphere.Inventory) {
	w := env.stdout
	fmt.Fprintf(w, "vCenter %s (%s): %d datacenters, %d clusters, %d hosts, %d datastores, %d networks, %d VMs\n\n",
		c.Host(), c.About(), len(inv.Datacenters), len(inv.Clusters), len(inv.Hosts), len(inv.Datastores), len(inv.Networks), len(inv.VMs))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DATASTORE\tTYPE\tCAPACITY\tFREE")
	for _, d := range inv.Datastores {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Path, d.Type, humanBytes(d.CapacityBytes), humanBytes(d.FreeBytes))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "VM\tID\tPOWER\tTOOLS\tCBT\tDISKS\tHOST\tPATH")
	for _, vm := range inv.VMs {
		var disks []string
		for _, d := range vm.Disks {
			s := humanBytes(d.CapacityBytes)
			if d.Unsupported != "" {
				s += "(unsupported)"
			}
			disks = append(disks, s)
		}
		tools := "no"
		if vm.ToolsRunning {
			tools = "running"
		}
		cbt := "off"
		if vm.CBTEnabled {
			cbt = "on"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", vm.Name, vm.MoRef, vm.PowerState, tools, cbt, strings.Join(disks, ","), vm.Host, vm.Path)
	}
	tw.Flush()
}
