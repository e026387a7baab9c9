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
	w := c.Writer
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		w.Flush()
		return true
	}
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
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil, nil
			}
			w.Flush()
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
