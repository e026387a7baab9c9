package web

import (
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/auth"
)

func constantEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type loginResponse struct {
	User      string    `json:"user"`
	Role      auth.Role `json:"role"`
	CSRFToken string    `json:"csrfToken"`
	Expires   time.Time `json:"expires"`
}

func (s *Server) login(c *gin.Context) (any, error) {
	var req loginRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if len(req.Username) > 256 || len(req.Password) > 1024 {
		return nil, badRequest("", "username or password too long")
	}
	if a := auditOf(c); a != nil {
		a.user = req.Username
	}
	sess, err := s.cfg.Auth.Login(c.Request.Context(), s.clientIP(c), req.Username, req.Password)
	if err != nil {
		s.metrics.loginFailures.Inc()
		return nil, err
	}
	secure := c.Request.TLS != nil
	maxAge := int(time.Until(sess.Expires).Seconds())
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: sess.ID, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode, MaxAge: maxAge})
	// The CSRF cookie is readable by the console's script, which echoes it in
	// the X-CSRF-Token header; another site can neither read it nor set the header.
	http.SetCookie(c.Writer, &http.Cookie{Name: csrfCookie, Value: sess.CSRF, Path: "/", HttpOnly: false, Secure: secure, SameSite: http.SameSiteStrictMode, MaxAge: maxAge})
	return loginResponse{User: sess.User, Role: sess.Role, CSRFToken: sess.CSRF, Expires: sess.Expires}, nil
}

func (s *Server) logout(c *gin.Context) (any, error) {
	p := principal(c)
	if p.Session != "" {
		s.cfg.Auth.Logout(p.Session)
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, MaxAge: -1, SameSite: http.SameSiteStrictMode})
	http.SetCookie(c.Writer, &http.Cookie{Name: csrfCookie, Value: "", Path: "/", MaxAge: -1, SameSite: http.SameSiteStrictMode})
	return withStatus(http.StatusNoContent, nil), nil
}

// maxTokenTTLSeconds is auth.MaxTokenTTL in seconds.
const maxTokenTTLSeconds = int64(auth.MaxTokenTTL / time.Second)

type tokenRequest struct {
	Name       string     `json:"name"`
	Role       auth.Role  `json:"role"`
	TTLSeconds int64      `json:"ttlSeconds,omitempty"` // 0: never expires; at most maxTokenTTLSeconds
	Scope      auth.Scope `json:"scope,omitzero"`       // absent or empty: unscoped (its owner's scope still applies)
}

// tokenScopeRequest is PUT /auth/tokens/{id}: the token's new scope.
type tokenScopeRequest struct {
	Scope auth.Scope `json:"scope"`
}

type tokenResponse struct {
	Token  string     `json:"token"` // the secret: shown once
	Detail auth.Token `json:"detail"`
}

func (s *Server) createToken(c *gin.Context) (any, error) {
	var req tokenRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	noteAudit(c, req.Name, "", "", "role "+string(req.Role)+", "+scopeNote(req.Scope))
	noteObject(c, "token", "", req.Name)
	if req.Name == "" || len(req.Name) > 128 {
		return nil, invalid("name", "required, at most 128 bytes")
	}
	if _, err := auth.ParseRole(string(req.Role)); err != nil {
		return nil, invalid("role", "%v", err)
	}
	// Compared in seconds before any multiplication: ttlSeconds*1e9 overflows
	// int64 from about 292 years, and a wrapped negative lifetime used to
	// mean "never expires".
	if req.TTLSeconds < 0 || req.TTLSeconds > maxTokenTTLSeconds {
		return nil, badRequest("ttlSeconds", "from 0 (never expires) to %d (10 years), not %d", maxTokenTTLSeconds, req.TTLSeconds)
	}
	secret, t, err := s.cfg.Auth.CreateScopedToken(c.Request.Context(), principal(c), req.Name, req.Role, time.Duration(req.TTLSeconds)*time.Second, req.Scope)
	if err != nil {
		return nil, err
	}
	noteObject(c, "token", t.ID, t.Name)
	return withStatus(http.StatusCreated, tokenResponse{Token: secret, Detail: t}), nil
}

func (s *Server) listTokens(c *gin.Context) (any, error) {
	ts, err := s.cfg.Auth.Tokens(c.Request.Context())
	if err != nil {
		return nil, err
	}
	if ts == nil {
		ts = []auth.Token{}
	}
	return ts, nil
}

func (s *Server) putTokenScope(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	var req tokenScopeRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	noteAudit(c, id, "", "", scopeNote(req.Scope))
	prev := s.noteToken(c, id)
	t, err := s.cfg.Auth.SetTokenScope(c.Request.Context(), id, req.Scope)
	if err != nil {
		return nil, err
	}
	noteChanges(c, prev, t, nil)
	return t, nil
}

// noteToken names the token id, with its name, in the request's audit
// event and returns it (nil when it is unknown).
func (s *Server) noteToken(c *gin.Context, id string) *auth.Token {
	noteObject(c, "token", id, "")
	ts, err := s.cfg.Auth.Tokens(c.Request.Context())
	if err != nil {
		return nil
	}
	for i := range ts {
		if ts[i].ID == id {
			noteObject(c, "token", id, ts[i].Name)
			return &ts[i]
		}
	}
	return nil
}

func (s *Server) deleteToken(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	s.noteToken(c, id)
	if err := s.cfg.Auth.DeleteToken(c.Request.Context(), id); err != nil {
		return nil, err
	}
	return withStatus(http.StatusNoContent, nil), nil
}
