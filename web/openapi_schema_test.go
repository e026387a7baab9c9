package web

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vmconfig"
)

// schemaChecker validates JSON values against the subset of OpenAPI 3
// schemas the document uses: $ref, allOf, anyOf, oneOf, type, properties,
// required, additionalProperties false, items, enum, nullable.
type schemaChecker struct {
	schemas map[string]map[string]any
}

func (sc schemaChecker) check(path string, schema map[string]any, v any) []string {
	if ref, ok := schema["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		s, ok := sc.schemas[name]
		if !ok {
			return []string{path + ": unknown schema " + ref}
		}
		return sc.check(path, s, v)
	}
	if v == nil {
		if schema["nullable"] == true || (schema["type"] == nil && schema["allOf"] == nil && schema["anyOf"] == nil && schema["oneOf"] == nil) {
			return nil
		}
		return []string{path + ": null, schema does not say nullable"}
	}
	var errs []string
	for _, sub := range asSchemas(schema["allOf"]) {
		errs = append(errs, sc.check(path, sub, v)...)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		alts := asSchemas(schema[key])
		if len(alts) == 0 {
			continue
		}
		matched := 0
		var why []string
		for _, sub := range alts {
			if e := sc.check(path, sub, v); len(e) == 0 {
				matched++
			} else {
				why = append(why, strings.Join(e, "; "))
			}
		}
		switch {
		case matched == 0:
			errs = append(errs, fmt.Sprintf("%s: matches none of %s: %s", path, key, strings.Join(why, " | ")))
		case key == "oneOf" && matched > 1:
			errs = append(errs, fmt.Sprintf("%s: matches %d of oneOf", path, matched))
		}
	}
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if e == v {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %v not in %v", path, v, enum))
		}
	}
	switch typ, _ := schema["type"].(string); typ {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: want object, got %T", path, v))
		}
		props, _ := schema["properties"].(map[string]any)
		for _, r := range asList(schema["required"]) {
			if _, ok := m[r]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required %q missing", path, r))
			}
		}
		for k, val := range m {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if schema["additionalProperties"] == false && props != nil {
					errs = append(errs, fmt.Sprintf("%s: %q not in the schema", path, k))
				}
				continue
			}
			errs = append(errs, sc.check(path+"."+k, ps, val)...)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: want array, got %T", path, v))
		}
		items, _ := schema["items"].(map[string]any)
		for i, x := range a {
			if items != nil {
				errs = append(errs, sc.check(fmt.Sprintf("%s[%d]", path, i), items, x)...)
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			errs = append(errs, fmt.Sprintf("%s: want string, got %T", path, v))
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			errs = append(errs, fmt.Sprintf("%s: want integer, got %v", path, v))
		}
	case "number":
		if _, ok := v.(float64); !ok {
			errs = append(errs, fmt.Sprintf("%s: want number, got %T", path, v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			errs = append(errs, fmt.Sprintf("%s: want boolean, got %T", path, v))
		}
	}
	return errs
}

func asSchemas(v any) []map[string]any {
	l, _ := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, x := range l {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func asList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, x.(string))
	}
	return out
}

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
	sc := schemaChecker{schemas: doc.Components.Schemas}
	ids := map[string]string{"{id}": "", "{name}": "admin"}
	subst := func(p string) string {
		switch {
		case strings.HasPrefix(p, "/api/v1/jobs/"):
			ids["{id}"] = "nightly"
		case strings.HasPrefix(p, "/api/v1/restore-points/"):
			ids["{id}"] = cfgPoint.ID
		case strings.HasPrefix(p, "/api/v1/repositories/"):
			ids["{id}"] = "main"
		case strings.HasPrefix(p, "/api/v1/tasks/"):
			ids["{id}"] = info.ID
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
			if errs := sc.check(p+" example", schema, exv); len(errs) > 0 {
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
		if errs := sc.check(p, schema, v); len(errs) > 0 {
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
				if errs := sc.check(m+" "+p+" "+code+" example", js["schema"].(map[string]any), exv); len(errs) > 0 {
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
	sc := schemaChecker{schemas: map[string]map[string]any{
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
	// Composed schemas: a nullable reference, and alternatives.
	composed := []struct {
		schema map[string]any
		body   string
		bad    bool
	}{
		{map[string]any{"allOf": []any{ref}, "nullable": true}, `null`, false},
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
		if errs := sc.check("x", tc.schema, v); (len(errs) > 0) != tc.bad {
			t.Errorf("%v %s: errors %v", tc.schema, tc.body, errs)
		}
	}
	for _, tc := range tests {
		var v any
		_ = json.Unmarshal([]byte(tc.body), &v)
		if errs := sc.check("x", ref, v); (len(errs) > 0) != tc.bad {
			t.Errorf("%s: errors %v", tc.body, errs)
		}
	}
}
