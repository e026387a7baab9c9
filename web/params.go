package web

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"
)

// Path, query and body helpers the handlers share.

// pathID returns the :id parameter after checking it is a sane id.
func pathID(c *gin.Context) (string, error) {
	id := c.Param("id")
	if id == "" || len(id) > 128 || strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) || r == '/' }) >= 0 {
		return "", badRequest("id", "bad id %q", truncate(id, 40))
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// pointID checks a restore point id (or unique prefix of at least 8): hex.
func pointID(c *gin.Context) (string, error) {
	id := strings.ToLower(c.Param("id"))
	if len(id) < 8 || len(id) > 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", badRequest("id", "a restore point id is 8 to 64 hex digits")
	}
	return id, nil
}

func parseTimeParam(c *gin.Context, name string) (time.Time, error) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest(name, "want an RFC 3339 time, e.g. 2026-01-02T03:04:05Z")
	}
	return t, nil
}

// optionalBody decodes a body when one is sent (an empty body means defaults).
func optionalBody(c *gin.Context, v any) error {
	if c.Request.ContentLength == 0 {
		return nil
	}
	return decodeStrict(c, v)
}

// InvalidField returns the 422 validation error naming field, for services
// (a VCenterTester) that find a request field unacceptable.
func InvalidField(field, msg string) error { return invalid(field, "%s", msg) }

func queryLimit(c *gin.Context, def, maxN int) (int, error) {
	v := c.Query("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxN {
		return 0, badRequest("limit", "an integer from 1 to %d", maxN)
	}
	return n, nil
}
