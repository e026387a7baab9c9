package web

import (
	"context"
	"net/http"
	"strings"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
)

// meResponse is GET /auth/me: the principal plus what the console needs
// (the CSRF token to echo on writes, for sessions).
type meResponse struct {
	auth.Principal
	Username  string `json:"username"`
	CSRFToken string `json:"csrfToken,omitempty"`
}

func (s *Server) me(c *gin.Context) (any, error) {
	p := principal(c)
	return meResponse{Principal: p, Username: p.User, CSRFToken: p.CSRF}, nil
}

type createUserRequest struct {
	Username string     `json:"username"`
	Password string     `json:"password"`
	Role     auth.Role  `json:"role"`
	Scope    auth.Scope `json:"scope,omitzero"` // absent or empty: unscoped
}

type updateUserRequest struct {
	Role     *auth.Role  `json:"role,omitempty"`
	Password *string     `json:"password,omitempty"`
	Scope    *auth.Scope `json:"scope,omitempty"` // {} removes the scope
}

// scopeNote is the audit detail of a scope.
func scopeNote(sc auth.Scope) string {
	if sc.Empty() {
		return "unscoped"
	}
	var parts []string
	for _, f := range []struct {
		name string
		vs   []string
	}{{"folders", sc.Folders}, {"tags", sc.Tags}, {"vms", sc.VMs}, {"repositories", sc.Repositories}} {
		if len(f.vs) > 0 {
			parts = append(parts, f.name+" "+strings.Join(f.vs, ","))
		}
	}
	return "scope " + truncate(strings.Join(parts, "; "), 200)
}

func pathName(c *gin.Context) (string, error) {
	n := c.Param("name")
	if n == "" || len(n) > 128 || strings.IndexFunc(n, func(r rune) bool { return unicode.IsControl(r) || r == '/' }) >= 0 {
		return "", badRequest("name", "bad user name %q", truncate(n, 40))
	}
	return n, nil
}

func (s *Server) listUsers(c *gin.Context) (any, error) {
	us, err := s.cfg.Auth.Users(c.Request.Context())
	if err != nil {
		return nil, err
	}
	if us == nil {
		us = []auth.User{}
	}
	return us, nil
}

func (s *Server) createUser(c *gin.Context) (any, error) {
	var req createUserRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	noteAudit(c, req.Username, "", "", "role "+string(req.Role)+", "+scopeNote(req.Scope))
	noteObject(c, "user", req.Username, "")
	if err := auth.CheckUsername(req.Username); err != nil {
		return nil, invalid("username", "%s", strings.TrimPrefix(err.Error(), auth.ErrBadUser.Error()+": "))
	}
	if err := auth.CheckPasswordRules(req.Password); err != nil {
		return nil, invalid("password", "%s", strings.TrimPrefix(err.Error(), auth.ErrBadUser.Error()+": "))
	}
	if _, err := auth.ParseRole(string(req.Role)); err != nil {
		return nil, invalid("role", "administrator, operator or restore-only")
	}
	u, err := s.cfg.Auth.CreateScopedUser(c.Request.Context(), req.Username, req.Password, req.Role, req.Scope)
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusCreated, u), nil
}

func (s *Server) updateUser(c *gin.Context) (any, error) {
	name, err := pathName(c)
	if err != nil {
		return nil, err
	}
	var req updateUserRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if req.Role == nil && req.Password == nil && req.Scope == nil {
		return nil, invalid("role", "give role, password, scope or several")
	}
	if req.Scope != nil {
		noteAudit(c, name, "", "", scopeNote(*req.Scope))
	}
	noteObject(c, "user", name, "")
	if req.Role != nil {
		if _, err := auth.ParseRole(string(*req.Role)); err != nil {
			return nil, invalid("role", "administrator, operator or restore-only")
		}
	}
	if req.Password != nil {
		if err := auth.CheckPasswordRules(*req.Password); err != nil {
			return nil, invalid("password", "%s", strings.TrimPrefix(err.Error(), auth.ErrBadUser.Error()+": "))
		}
	}
	prev, _ := s.findUser(c.Request.Context(), name)
	u, err := s.cfg.Auth.UpdateUser(c.Request.Context(), name, auth.UserChange{Role: req.Role, Password: req.Password, Scope: req.Scope}, principal(c).Session)
	if err != nil {
		return nil, err
	}
	var extra []policy.Change
	if req.Password != nil {
		extra = append(extra, secretChange("password"))
	}
	// created and source are the record's, not the change's; the password
	// flag goes with the password.
	noteChanges(c, prev, u, []string{"created", "source", "passwordNotSet"}, extra...)
	return u, nil
}

// findUser returns the user name (nil when there is none or the list
// cannot be read: the audit event then shows no "from").
func (s *Server) findUser(ctx context.Context, name string) (*auth.User, error) {
	us, err := s.cfg.Auth.Users(ctx)
	if err != nil {
		return nil, err
	}
	for i := range us {
		if us[i].Username == name {
			return &us[i], nil
		}
	}
	return nil, nil
}

func (s *Server) deleteUser(c *gin.Context) (any, error) {
	name, err := pathName(c)
	if err != nil {
		return nil, err
	}
	noteObject(c, "user", name, "")
	if err := s.cfg.Auth.DeleteUser(c.Request.Context(), name); err != nil {
		return nil, err
	}
	return withStatus(http.StatusNoContent, nil), nil
}
