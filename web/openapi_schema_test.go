package web

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/web/openapitest"
)

// Every documented GET answers, on a populated appliance, with a body that
// matches its documented 200 schema: the document describes what the
// handlers really send (fields, types, nulls), not what they once sent.
func TestResponsesMatchOpenAPI(t *testing.T) {
	topo := staticTopology{
		nodes: []InventoryNode{{ID: "datacenter-2", Type: NodeDatacenter, Name: "DC0", Path: "/DC0"},
			{ID: "vm-42", Type: NodeVM, Name: "web01", Parent: "datacenter-2", Path: "/DC0/vm/web01", InstanceUUID: testVM.InstanceUUID, PowerState: "poweredOn"}},
		targets: RestoreTargets{Datacenters: []TargetDatacenter{{Name: "DC0", Path: "/DC0", Folders: []string{"/DC0/vm"},
			Compute:    []TargetCompute{{Name: "C0", Type: "cluster", Path: "/DC0/host/C0"}},
			Datastores: []TargetDatastore{{Name: "ds", Capacity: 10, Free: 5, Type: "VMFS", Accessible: true}},
			Networks:   []TargetNetwork{{Name: "VM Network", Type: "Network"}}}}},
	}
	tags := staticTags{tags: []Tag{{ID: prodTag, Name: "production", Category: "Environment"}}}
	f := newFixture(t, func(c *Config) { c.Topology = topo; c.Tags = tags })
	tagged := testVM
	tagged.Tags = []string{prodTag}
	f.inv.Set(tagged)
	// GET /restore-points/{id} answers with a saved configuration too.
	cfgBlob, err := vmconfig.Encode(vmconfig.VMConfig{Version: vmconfig.Version, Name: "app01", NumCPU: 1, MemoryMB: 512,
		Disks: []vmconfig.DiskConfig{{Key: 2000, Label: "Hard disk 1", CapacityBytes: 49152, Datastore: "LocalDS_0"}},
		NICs:  []vmconfig.NICConfig{{Key: 4000, Label: "Network adapter 1", Type: "vmxnet3", Network: "VM Network"}}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPoint := commitConfigPoint(t, f.repo, cfgBlob)
	ctx := context.Background()
	if r := f.admin("POST", "/api/v1/jobs", validJob("nightly")); r.status != 201 {
		t.Fatal(r.status)
	}
	if r := f.admin("POST", "/api/v1/copy-jobs", validCopyJob); r.status != 201 {
		t.Fatal(r.status)
	}
	if r := f.admin("POST", "/api/v1/copy-jobs/offsite/run", nil); r.status != 202 {
		t.Fatal(r.status)
	}
	if r := f.admin("POST", "/api/v1/verification-jobs", validVerificationJob); r.status != 201 {
		t.Fatal(r.status)
	}
	now := f.clk.Now()
	_ = f.db.PutRun(ctx, policy.JobRun{ID: "nightly/1", Job: "nightly", Start: now.Add(-time.Hour), End: now, VMs: []policy.VMOutcome{{VM: testVM.InstanceUUID, Name: "web01", Status: policy.OutcomeSucceeded, Point: f.points[1].ID}}})
	_ = f.db.PutRun(ctx, policy.JobRun{ID: "nightly/2", Job: "nightly", Start: now})
	_ = f.db.AddEvent(ctx, policy.Event{Time: now.Add(-time.Minute), Severity: policy.SeverityInfo, Kind: policy.EventJobStarted, Job: "nightly", Message: "started"})
	r := f.admin("POST", "/api/v1/repositories/main/check", nil)
	var info task.Info
	r.json(t, &info)
	waitTask(t, f, info.ID)
	f.admin("POST", "/api/v1/auth/tokens", map[string]string{"name": "ci", "role": "operator"})

	var doc struct {
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	sc := openapitest.Checker{Schemas: doc.Components.Schemas}
	ids := map[string]string{"{id}": "", "{name}": "admin"}
	subst := func(p string) string {
		switch {
		case strings.HasPrefix(p, "/api/v1/jobs/"):
			ids["{id}"] = "nightly"
		case strings.HasPrefix(p, "/api/v1/copy-jobs/"):
			ids["{id}"] = "offsite"
		case strings.HasPrefix(p, "/api/v1/verification-jobs/"):
			ids["{id}"] = "weekly"
		case strings.HasPrefix(p, "/api/v1/restore-points/"):
			ids["{id}"] = cfgPoint.ID
		case strings.HasPrefix(p, "/api/v1/repositories/"):
			ids["{id}"] = "main"
		case strings.HasPrefix(p, "/api/v1/tasks/"):
			ids["{id}"] = info.ID
		case strings.HasPrefix(p, "/api/v1/instant-recoveries/"):
			ids["{id}"] = memInstantID
		}
		for k, v := range ids {
			p = strings.ReplaceAll(p, k, v)
		}
		return p
	}
	var paths []string
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	checked := 0
	for _, p := range paths {
		op, ok := doc.Paths[p]["get"]
		if !ok || isFilesPath(p) {
			continue
		}
		resp200, _ := op["responses"].(map[string]any)["200"].(map[string]any)
		content, _ := resp200["content"].(map[string]any)
		js, ok := content["application/json"].(map[string]any)
		if !ok {
			continue // event streams, metrics
		}
		schema, _ := js["schema"].(map[string]any)
		if exv, ok := js["example"]; ok {
			if errs := sc.Check(p+" example", schema, exv); len(errs) > 0 {
				t.Errorf("GET %s: the documented example does not match the schema:\n  %s", p, strings.Join(errs, "\n  "))
			}
		}
		r := f.admin("GET", subst(p), nil)
		if r.status != 200 {
			t.Errorf("GET %s: %d %s", p, r.status, truncate(string(r.body), 200))
			continue
		}
		var v any
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Errorf("GET %s: %v", p, err)
			continue
		}
		if errs := sc.Check(p, schema, v); len(errs) > 0 {
			t.Errorf("GET %s does not match its schema:\n  %s\nbody: %s", p, strings.Join(errs, "\n  "), truncate(string(r.body), 600))
		}
		checked++
	}
	// Examples of other methods' responses match their schemas too.
	examples := 0
	for _, p := range paths {
		for m, op := range doc.Paths[p] {
			for code, rv := range op["responses"].(map[string]any) {
				content, _ := rv.(map[string]any)["content"].(map[string]any)
				js, _ := content["application/json"].(map[string]any)
				exv, ok := js["example"]
				if !ok {
					continue
				}
				examples++
				if errs := sc.Check(m+" "+p+" "+code+" example", js["schema"].(map[string]any), exv); len(errs) > 0 {
					t.Errorf("%s %s %s: the documented example does not match the schema:\n  %s", m, p, code, strings.Join(errs, "\n  "))
				}
			}
		}
	}
	if examples < 12 {
		t.Errorf("only %d response examples", examples)
	}
	if checked < 20 {
		t.Fatalf("only %d responses checked", checked)
	}
	t.Logf("%d responses checked", checked)
}

// The checker itself finds what it must.
func TestSchemaChecker(t *testing.T) {
	sc := openapitest.Checker{Schemas: map[string]map[string]any{
		"T": {"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer"}, "b": map[string]any{"type": "string", "nullable": true}}, "required": []any{"a"}, "additionalProperties": false},
	}}
	ref := map[string]any{"$ref": "#/components/schemas/T"}
	tests := []struct {
		body string
		bad  bool
	}{
		{`{"a":1}`, false},
		{`{"a":1,"b":null}`, false},
		{`{"a":1.5}`, true},
		{`{"b":"x"}`, true},
		{`{"a":1,"c":2}`, true},
		{`{"a":"1"}`, true},
		{`[]`, true},
		{`null`, true},
	}
	// Composed schemas and OpenAPI 3.0.3 null semantics: nullable only
	// counts beside a type in the same schema, so a nullable wrapper
	// round a reference to a non-nullable object still refuses null.
	composed := []struct {
		schema map[string]any
		body   string
		bad    bool
	}{
		{map[string]any{"allOf": []any{ref}, "nullable": true}, `null`, true},
		{map[string]any{"type": "object", "nullable": true}, `null`, false},
		{map[string]any{"type": "object"}, `null`, true},
		{map[string]any{"allOf": []any{ref}, "nullable": true}, `{"a":1}`, false},
		{map[string]any{"allOf": []any{ref}, "nullable": true}, `{"a":1,"log":[]}`, true},
		{map[string]any{"allOf": []any{ref}}, `null`, true},
		{map[string]any{"anyOf": []any{ref, map[string]any{"type": "array"}}}, `[]`, false},
		{map[string]any{"anyOf": []any{ref, map[string]any{"type": "array"}}}, `{"a":1}`, false},
		{map[string]any{"anyOf": []any{ref, map[string]any{"type": "array"}}}, `{"z":1}`, true},
		{map[string]any{"oneOf": []any{map[string]any{"type": "number"}, map[string]any{"type": "integer"}}}, `1`, true},
	}
	for _, tc := range composed {
		var v any
		_ = json.Unmarshal([]byte(tc.body), &v)
		if errs := sc.Check("x", tc.schema, v); (len(errs) > 0) != tc.bad {
			t.Errorf("%v %s: errors %v", tc.schema, tc.body, errs)
		}
	}
	for _, tc := range tests {
		var v any
		_ = json.Unmarshal([]byte(tc.body), &v)
		if errs := sc.Check("x", ref, v); (len(errs) > 0) != tc.bad {
			t.Errorf("%s: errors %v", tc.body, errs)
		}
	}
}
