package openapitest

import (
	"strings"
	"testing"
)

// TestNullIsStrict: null passes only where OpenAPI 3.0.3 allows it, as a
// strict validating proxy reads the document. The case that slipped
// through before, {nullable, allOf: [$ref X]} with X not nullable, fails.
func TestNullIsStrict(t *testing.T) {
	sc := Checker{Schemas: map[string]map[string]any{
		"Plain":    {"type": "object"},
		"Nullable": {"type": "object", "nullable": true},
	}}
	ref := func(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }
	for _, c := range []struct {
		name   string
		schema map[string]any
		ok     bool
	}{
		{"typed", map[string]any{"type": "string"}, false},
		{"typed nullable", map[string]any{"type": "string", "nullable": true}, true},
		{"ref to plain", ref("Plain"), false},
		{"ref to nullable", ref("Nullable"), true},
		{"nullable allOf plain ref", map[string]any{"nullable": true, "type": "object", "allOf": []any{ref("Plain")}}, false},
		{"nullable allOf nullable ref", map[string]any{"nullable": true, "type": "object", "allOf": []any{ref("Nullable")}}, true},
		{"anyOf with a nullable branch", map[string]any{"anyOf": []any{ref("Plain"), map[string]any{"type": "string", "nullable": true}}}, true},
		{"oneOf without one", map[string]any{"oneOf": []any{ref("Plain")}}, false},
		{"untyped", map[string]any{}, true},
	} {
		errs := sc.Check("$", c.schema, nil)
		if (len(errs) == 0) != c.ok {
			t.Errorf("%s: null accepted=%v, want %v (%s)", c.name, len(errs) == 0, c.ok, strings.Join(errs, "; "))
		}
	}
}
