package web

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

var errEmptyBody = errors.New("empty body")

// decodeStrict decodes exactly one JSON value into v: unknown fields,
// trailing data, wrong types and bodies over MaxBodyBytes are 4xx errors
// naming the field where there is one.
func decodeStrict(c *gin.Context, v any) error {
	body := http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return decodeError(errEmptyBody)
		}
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return decodeError(err)
		}
		return badRequest("", "trailing data after the JSON value")
	}
	return nil
}
