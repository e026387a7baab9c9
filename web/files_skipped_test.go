package web

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/web/openapitest"
)

// The listing of a directory of a hostile image names the entries it
// leaves out and why, as documented (issue 24: they vanished).
func TestFilesListingSkipped(t *testing.T) {
	var svc *filerestore.Service
	f := newFixture(t, func(c *Config) {
		var err error
		svc, err = filerestore.New(filerestore.Config{Source: c.Points.(*repos.Set), CatalogDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		c.Files = svc
	})
	t.Cleanup(func() { svc.Close() })
	p := frtest.Backup(t, f.repo, "web01", time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC), frtest.HostileNamesDisk(t))
	u := fmt.Sprintf("/api/v1/restore-points/%s/volumes/d0p1/files?%s", p.ID, url.Values{"path": {"/h"}}.Encode())
	r := f.do("GET", u, nil, bearer(f.tokens[auth.RoleRestoreOnly]))
	var l FileListing
	r.json(t, &l)
	if r.status != 200 || l.Total != 1 || len(l.Entries) != 1 || l.Entries[0].Name != "ok" || len(l.Skipped) != 2 {
		t.Fatalf("listing: %d %s", r.status, r.body)
	}
	for _, s := range l.Skipped {
		if s.Dir != "/h" || s.Reason == "" || (s.Name != "zz1/zz1" && s.Name != "zz2\x00zz2") {
			t.Errorf("skipped %+v", s)
		}
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var v any
	json.Unmarshal(r.body, &v)
	sc := openapitest.Checker{Schemas: doc.Components.Schemas}
	if errs := sc.Check("listing", map[string]any{"$ref": "#/components/schemas/FileListing"}, v); len(errs) > 0 {
		t.Errorf("the listing does not match FileListing:\n  %s", strings.Join(errs, "\n  "))
	}
}
