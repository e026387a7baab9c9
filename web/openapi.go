package web

import (
	_ "embed"
	"encoding/json"

	"github.com/gin-gonic/gin"
)

// openAPIDoc is written by hand; a test checks it against the route table.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the embedded OpenAPI 3 document.
func OpenAPI() []byte { return openAPIDoc }

func (s *Server) openapi(c *gin.Context) (any, error) {
	return json.RawMessage(openAPIDoc), nil
}
