package web

import (
	"encoding/json"
	"mime"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// publishedDoc is the OpenAPI document parsed once for response validation.
type publishedDoc struct {
	checker schemaChecker
	routes  []docRoute
}

type docRoute struct {
	template string
	re       *regexp.Regexp
	ops      map[string]map[string]any // method → operation
}

var (
	docOnce sync.Once
	docVal  *publishedDoc
	docErr  error
)

func loadPublishedDoc() (*publishedDoc, error) {
	docOnce.Do(func() {
		var doc struct {
			Paths      map[string]map[string]map[string]any `json:"paths"`
			Components struct {
				Schemas map[string]map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if docErr = json.Unmarshal(OpenAPI(), &doc); docErr != nil {
			return
		}
		pd := &publishedDoc{checker: schemaChecker{schemas: doc.Components.Schemas}}
		for tmpl, ops := range doc.Paths {
			pat := regexp.QuoteMeta(tmpl)
			pat = regexp.MustCompile(`\\\{[a-zA-Z]+\\\}`).ReplaceAllString(pat, `[^/]+`)
			pd.routes = append(pd.routes, docRoute{template: tmpl, re: regexp.MustCompile("^" + pat + "$"), ops: ops})
		}
		docVal = pd
	})
	return docVal, docErr
}

// responseSchema finds the documented JSON schema of a response; ok is
// false when the route is not part of the API (console assets) or the body
// is not documented as JSON (streams, metrics, downloads). undocumented
// names a status code the operation does not list.
func (pd *publishedDoc) responseSchema(method, path string, status int) (schema map[string]any, op string, undocumented bool, ok bool) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	var route *docRoute
	for i := range pd.routes {
		r := &pd.routes[i]
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

// validateResponse checks one response the test suite received against
// the published document: every JSON body of a documented route must
// match the schema of its status, and every status must be documented.
func validateResponse(t testing.TB, method, path string, r resp) {
	t.Helper()
	pd, err := loadPublishedDoc()
	if err != nil {
		t.Errorf("openapi.json: %v", err)
		return
	}
	schema, op, undocumented, ok := pd.responseSchema(method, path, r.status)
	if !ok {
		return
	}
	if undocumented {
		t.Errorf("%s answered %d, a status the document does not list for it: %s", op, r.status, truncate(string(r.body), 300))
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.header.Get("Content-Type")); ct != "application/json" {
		if len(r.body) > 0 {
			t.Errorf("%s %d: content type %q, documented application/json", op, r.status, r.header.Get("Content-Type"))
		}
		return
	}
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Errorf("%s %d: body is not JSON: %v", op, r.status, err)
		return
	}
	if errs := pd.checker.check(op, schema, v); len(errs) > 0 {
		t.Errorf("%s %d does not match the published schema:\n  %s\nbody: %s", op, r.status, strings.Join(errs, "\n  "), truncate(string(r.body), 600))
	}
}
