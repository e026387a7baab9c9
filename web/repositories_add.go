package web

import (
	"net/http"
	"path/filepath"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/web/api"
)

// POST /repositories: create a local repository or open an existing one.

// validateAddRepository checks the form of a request; whether the path
// holds a repository, sits inside one, or the name is taken is the
// service's to say (api.InvalidError, per field).
func validateAddRepository(r *api.AddRepository) error {
	var f fieldErrs
	r.Name, r.Path = strings.TrimSpace(r.Name), strings.TrimSpace(r.Path)
	switch r.Mode {
	case api.RepoCreate, api.RepoOpen:
	case "":
		f.add("mode", "required: create (a new repository) or open (an existing one)")
	default:
		f.add("mode", "%q: create or open", r.Mode)
	}
	switch {
	case r.Name == "":
		f.add("name", "required")
	case len(r.Name) > 64 || strings.ContainsAny(r.Name, "/\\ \t\r\n\x00"):
		f.add("name", "at most 64 characters without spaces or slashes")
	}
	switch {
	case r.Path == "":
		f.add("path", "required: an absolute directory on the appliance, e.g. /srv/vmvault/repo2")
	case !plainText(r.Path, 4096):
		f.add("path", "at most 4096 characters, no line breaks")
	case !filepath.IsAbs(r.Path):
		f.add("path", "%q is not absolute: give the full path, e.g. /srv/vmvault/repo2", r.Path)
	default:
		r.Path = filepath.Clean(r.Path)
	}
	switch {
	case r.Mode == api.RepoCreate && r.Passphrase == "":
		f.add("passphrase", "required: a new repository is encrypted")
	case r.Mode == api.RepoCreate && len(r.Passphrase) < 8:
		f.add("passphrase", "at least 8 characters")
	case len(r.Passphrase) > 1024 || strings.ContainsAny(r.Passphrase, "\x00\r\n"):
		f.add("passphrase", "at most 1024 characters, no line breaks")
	}
	return f.err()
}

func (s *Server) addRepository(c *gin.Context) (any, error) {
	var req api.AddRepository
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if a := auditOf(c); a != nil && req.Check {
		// The console's Test button tries the request and keeps nothing:
		// an auditor must not read it as a repository added.
		a.kind = "repository.test"
	}
	noteObject(c, "repository", strings.TrimSpace(req.Name), "")
	if err := validateAddRepository(&req); err != nil {
		return nil, err
	}
	if s.cfg.AddRepository == nil {
		return nil, &apiError{status: http.StatusNotImplemented, code: "not_implemented", msg: "this appliance cannot add repositories at runtime"}
	}
	what := req.Mode + " " + req.Path
	noteAudit(c, req.Name, "", req.Name, what)
	ri, err := s.cfg.AddRepository.AddRepository(c.Request.Context(), req)
	if err != nil {
		return nil, err
	}
	if req.Check {
		return ri, nil
	}
	return withStatus(http.StatusCreated, ri), nil
}
