package web

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// Events: /events and /events/export.

// EventQuery selects events.
type EventQuery = api.EventQuery

// EventLog reads the appliance's events; records.Store implements it.
type EventLog interface {
	Events(ctx context.Context, q EventQuery) ([]policy.Event, error)
}

// eventQuery reads the filter of GET /events and /events/export; limit
// bounds its "limit" parameter and is its default.
func eventQuery(c *gin.Context, def, max int) (EventQuery, error) {
	q := EventQuery{Job: c.Query("job"), VM: c.Query("vm"), Kind: c.Query("kind"), User: c.Query("user"), Limit: def}
	var err error
	if q.From, err = parseTimeParam(c, "from"); err != nil {
		return q, err
	}
	if q.To, err = parseTimeParam(c, "to"); err != nil {
		return q, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return q, badRequest("to", "the end must be after the start (from)")
	}
	switch sev := policy.Severity(c.Query("severity")); sev {
	case "", policy.SeverityInfo, policy.SeverityWarning, policy.SeverityError:
		q.MinSeverity = sev
	default:
		return q, badRequest("severity", "info, warning or error")
	}
	switch o := c.Query("outcome"); o {
	case "", OutcomeOK, OutcomeFailed:
		q.Outcome = o
	default:
		return q, badRequest("outcome", "ok or failed")
	}
	for name, v := range map[string]string{"kind": q.Kind, "user": q.User, "job": q.Job, "vm": q.VM} {
		if len(v) > 256 {
			return q, badRequest(name, "at most 256 bytes")
		}
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return q, badRequest("limit", "an integer from 1 to %d", max)
		}
		q.Limit = n
	}
	return q, nil
}

func (s *Server) events(c *gin.Context, def, max int) ([]policy.Event, error) {
	q, err := eventQuery(c, def, max)
	if err != nil {
		return nil, err
	}
	if s.cfg.Events == nil {
		return []policy.Event{}, nil
	}
	evs, err := s.cfg.Events.Events(c.Request.Context(), q)
	if err != nil {
		return nil, err
	}
	evs = s.judge(c).filterEvents(evs)
	if evs == nil {
		evs = []policy.Event{}
	}
	return evs, nil
}

func (s *Server) listEvents(c *gin.Context) (any, error) {
	return s.events(c, 500, 10000)
}

// exportEventsMax bounds one export (about 30 MB of JSON).
const exportEventsMax = 100000

// exportEvents writes the matching events, oldest first, as a CSV or JSON
// download: the audit trail for an auditor or a SIEM.
func (s *Server) exportEvents(c *gin.Context) (any, error) {
	format := c.DefaultQuery("format", "json")
	if format != "csv" && format != "json" {
		return nil, badRequest("format", "csv or json")
	}
	evs, err := s.events(c, exportEventsMax, exportEventsMax)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("vmvault-events-%s.%s", s.now().UTC().Format("20060102-150405"), format)
	c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
	if format == "json" {
		c.JSON(http.StatusOK, evs)
		return nil, nil
	}
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Status(http.StatusOK)
	w := csv.NewWriter(c.Writer)
	_ = w.Write([]string{"time", "severity", "kind", "user", "address", "outcome", "error", "subject", "job", "vm", "repository", "message"})
	for _, e := range evs {
		_ = w.Write([]string{e.Time.UTC().Format(time.RFC3339Nano), string(e.Severity), e.Kind, csvSafe(e.User), e.Address, e.Outcome,
			csvSafe(e.Error), csvSafe(e.Subject), e.Job, e.VM, e.Repository, csvSafe(e.Message)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		// Mid-download: the client got a cut file; no error body can follow.
		s.cfg.Logger.Warn("export events", "err", err)
	}
	return nil, nil
}

// csvSafe keeps a spreadsheet from running a cell as a formula: a user
// name or message starting with = + - @ gets a leading quote (OWASP CSV
// injection).
func csvSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}
