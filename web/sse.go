package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// sseKeepAlive is how often a comment line keeps idle streams (and proxies) open.
const sseKeepAlive = 15 * time.Second

// taskEvents streams a task as Server-Sent Events: first "state" with the
// current snapshot and one "log" per line so far, then "progress", "log"
// and "state" events as they happen, ending after the final "state". A
// client that falls behind is dropped by the registry and its stream ends
// with an "error" event; it reconnects and gets a fresh snapshot.
func (s *Server) taskEvents(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	snap, logs, updates, unsub, err := s.cfg.Tasks.Subscribe(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unsub()
	sse := startSSE(c.Writer)
	send := sse.send
	if !send("state", snap) {
		return nil, nil
	}
	for i := range logs {
		if !send("log", logs[i]) {
			return nil, nil
		}
	}
	if snap.State.Final() {
		return nil, nil
	}
	tick := time.NewTicker(sseKeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-tick.C:
			if !sse.comment("keep-alive") {
				return nil, nil
			}
		case u, ok := <-updates:
			if !ok {
				// Closed after the final state, or because this stream fell
				// behind (then the final state may not have been queued).
				cur, err := s.cfg.Tasks.Get(ctx, id)
				switch {
				case err == nil && cur.State.Final():
					send("state", cur)
				default:
					send("error", ErrorDetail{Code: "too_slow", Message: "stream fell behind; reconnect"})
				}
				return nil, nil
			}
			var ok2 bool
			switch u.Type {
			case "log":
				ok2 = send("log", u.Log)
			default:
				ok2 = send(u.Type, u.Task)
			}
			if !ok2 || (u.Type == "state" && u.Task.State.Final()) {
				return nil, nil
			}
		}
	}
}

// sseWriter writes one Server-Sent Events response, flushing after each
// message so the client sees it at once.
type sseWriter struct{ w gin.ResponseWriter }

// startSSE sends the event-stream headers (no caching, no proxy buffering).
func startSSE(w gin.ResponseWriter) sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return sseWriter{w}
}

// send writes v as JSON under event; false when the client is gone.
func (s sseWriter) send(event string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return s.raw(event, b)
}

// raw writes already-encoded JSON under event.
func (s sseWriter) raw(event string, data []byte) bool {
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return false
	}
	s.w.Flush()
	return true
}

// comment writes lines the client ignores (keepalives, the connect hint).
func (s sseWriter) comment(text string) bool {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return false
	}
	s.w.Flush()
	return true
}
