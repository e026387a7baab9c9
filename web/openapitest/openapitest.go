// Package openapitest checks HTTP responses against the published OpenAPI
// document (web/openapi.json): the tests of web and of the daemon run every
// response they receive through a Validator, so the document describes what
// the handlers really send. It is for tests only and imports nothing of the
// appliance; callers pass the document's bytes (web.OpenAPI()).
package openapitest

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Checker validates JSON values (as encoding/json decodes them into any) against the subset of OpenAPI 3
// schemas the document uses: $ref, allOf, anyOf, oneOf, type, properties,
// required, additionalProperties false, items, enum, nullable.
type Checker struct {
	Schemas map[string]map[string]any // components/schemas by name
}

// Check returns one message per violation, each prefixed with path.
func (sc Checker) Check(path string, schema map[string]any, v any) []string {
	if ref, ok := schema["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		s, ok := sc.Schemas[name]
		if !ok {
			return []string{path + ": unknown schema " + ref}
		}
		return sc.Check(path, s, v)
	}
	if v == nil {
		return sc.checkNull(path, schema)
	}
	var errs []string
	for _, sub := range asSchemas(schema["allOf"]) {
		errs = append(errs, sc.Check(path, sub, v)...)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		alts := asSchemas(schema[key])
		if len(alts) == 0 {
			continue
		}
		matched := 0
		var why []string
		for _, sub := range alts {
			if e := sc.Check(path, sub, v); len(e) == 0 {
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
			errs = append(errs, sc.Check(path+"."+k, ps, val)...)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: want array, got %T", path, v))
		}
		items, _ := schema["items"].(map[string]any)
		for i, x := range a {
			if items != nil {
				errs = append(errs, sc.Check(fmt.Sprintf("%s[%d]", path, i), items, x)...)
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

// Validator matches requests to the document's operations.
type Validator struct {
	Checker Checker
	routes  []docRoute
}

type docRoute struct {
	template string
	re       *regexp.Regexp
	ops      map[string]map[string]any // method → operation
}

var paramRE = regexp.MustCompile(`\\\{[a-zA-Z]+\\\}`)

// New parses an OpenAPI 3.0 document.
func New(doc []byte) (*Validator, error) {
	var d struct {
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("parse OpenAPI document: %w", err)
	}
	v := &Validator{Checker: Checker{Schemas: d.Components.Schemas}}
	for tmpl, ops := range d.Paths {
		pat := paramRE.ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`)
		v.routes = append(v.routes, docRoute{template: tmpl, re: regexp.MustCompile("^" + pat + "$"), ops: ops})
	}
	return v, nil
}

// Response checks one response: a route of the document must answer with a
// status it lists, and a body documented as JSON must match its schema.
// Paths outside the document (console assets) and bodies not documented as
// JSON (streams, metrics, downloads) are not checked. It returns one
// message per violation.
func (v *Validator) Response(method, path string, status int, header http.Header, body []byte) []string {
	schema, op, undocumented, ok := v.responseSchema(method, path, status)
	if !ok {
		return nil
	}
	if undocumented {
		return []string{fmt.Sprintf("%s answered %d, a status the document does not list for it: %s", op, status, truncate(string(body), 300))}
	}
	if ct, _, _ := mime.ParseMediaType(header.Get("Content-Type")); ct != "application/json" {
		// A response documented in more than one type (JSON or CSV) may
		// answer in any of them; only JSON has a schema to check.
		if len(body) > 0 && !v.documents(method, path, status, ct) {
			return []string{fmt.Sprintf("%s %d: content type %q, documented application/json", op, status, header.Get("Content-Type"))}
		}
		return nil
	}
	var val any
	if err := json.Unmarshal(body, &val); err != nil {
		return []string{fmt.Sprintf("%s %d: body is not JSON: %v", op, status, err)}
	}
	if errs := v.Checker.Check(op, schema, val); len(errs) > 0 {
		return []string{fmt.Sprintf("%s %d does not match the published schema:\n  %s\nbody: %s", op, status, strings.Join(errs, "\n  "), truncate(string(body), 600))}
	}
	return nil
}

// documents reports whether the response to method path with status is
// documented with content type ct.
func (v *Validator) documents(method, path string, status int, ct string) bool {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	for _, r := range v.routes {
		if !r.re.MatchString(path) {
			continue
		}
		o, _ := r.ops[strings.ToLower(method)]
		responses, _ := o["responses"].(map[string]any)
		rv, _ := responses[strconv.Itoa(status)].(map[string]any)
		content, _ := rv["content"].(map[string]any)
		if _, ok := content[ct]; ok {
			return true
		}
	}
	return false
}

func (v *Validator) responseSchema(method, path string, status int) (schema map[string]any, op string, undocumented bool, ok bool) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	var route *docRoute
	for i := range v.routes {
		r := &v.routes[i]
		if !r.re.MatchString(path) {
			continue
		}
		// A literal path wins over a template (/restores/disk vs /restores/{id}).
		if route == nil || strings.Count(r.template, "{") < strings.Count(route.template, "{") {
			route = r
		}
	}
	if route == nil {
		return nil, "", false, false
	}
	o, found := route.ops[strings.ToLower(method)]
	if !found {
		return nil, "", false, false
	}
	op = strings.ToUpper(method) + " " + route.template
	responses, _ := o["responses"].(map[string]any)
	code := strconv.Itoa(status)
	rv, found := responses[code]
	if !found {
		rv, found = responses[code[:1]+"XX"]
	}
	if !found {
		rv, found = responses["default"]
	}
	if !found {
		return nil, op, true, true
	}
	content, _ := rv.(map[string]any)["content"].(map[string]any)
	js, found := content["application/json"].(map[string]any)
	if !found {
		return nil, op, false, false
	}
	schema, _ = js["schema"].(map[string]any)
	return schema, op, false, schema != nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// checkNull applies OpenAPI 3.0.3's reading of nullable, as strict
// validators (a validating proxy, kin-openapi, Prism) do: nullable adds
// null to the type named in the same schema only; allOf, anyOf and oneOf
// keep their meaning, so {nullable, allOf: [$ref X]} refuses null unless
// X itself is nullable. A schema with no type and no composition accepts
// anything, null included.
func (sc Checker) checkNull(path string, schema map[string]any) []string {
	allOf, anyOf, oneOf := asSchemas(schema["allOf"]), asSchemas(schema["anyOf"]), asSchemas(schema["oneOf"])
	if schema["type"] != nil && schema["nullable"] != true {
		return []string{path + ": null, schema does not say nullable"}
	}
	if schema["type"] == nil && schema["nullable"] == true && len(allOf)+len(anyOf)+len(oneOf) == 0 {
		return nil
	}
	var errs []string
	for _, sub := range allOf {
		errs = append(errs, sc.Check(path, sub, nil)...)
	}
	for _, alts := range [][]map[string]any{anyOf, oneOf} {
		if len(alts) == 0 {
			continue
		}
		ok := false
		for _, sub := range alts {
			if len(sc.Check(path, sub, nil)) == 0 {
				ok = true
			}
		}
		if !ok {
			errs = append(errs, path+": null, no alternative says nullable")
		}
	}
	return errs
}
