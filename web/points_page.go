package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/web/api"
)

// GET /restore-points, whole or in pages.

// PointPager, when the Points service has it, answers a page of restore
// points without listing them all (service/repos's index); without it, pages are
// cut from the full list.
type PointPager interface {
	PointsPage(ctx context.Context, q api.PointQuery) (api.PointPage, error)
}

// Paging: a request with limit or cursor gets a page object; one with
// neither gets the whole array, as before paging (backward compatible).
const (
	defaultPageLimit = 100
	maxPageLimit     = 1000
)

// PointsPage is GET /restore-points' answer to a paged request.
type PointsPage struct {
	Items []RestorePoint `json:"items"`
	// Next is the cursor of the following page; absent on the last.
	Next string `json:"next,omitempty"`
	// Total counts the points the filter keeps, on every page.
	Total int `json:"total"`
}

// pointCursor is the opaque cursor of a page: the key of the previous
// page's last point, so pages neither skip nor repeat points when newer
// points arrive in front of them.
type pointCursor struct {
	T time.Time `json:"t"`
	R string    `json:"r"`
	I string    `json:"i"`
}

func encodePointCursor(k api.PointKey) string {
	b, _ := json.Marshal(pointCursor{T: k.Time, R: k.Repository, I: k.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePointCursor(v string) (*api.PointKey, error) {
	bad := badRequest("cursor", "not a cursor of this list (pass the previous page's next)")
	if len(v) > 1024 {
		return nil, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, bad
	}
	var c pointCursor
	if err := json.Unmarshal(b, &c); err != nil || c.T.IsZero() || c.I == "" {
		return nil, bad
	}
	return &api.PointKey{Time: c.T, Repository: c.R, ID: c.I}, nil
}

// paging reads limit and cursor: paged says the request asked for a page.
func paging(c *gin.Context) (paged bool, limit int, cursor string, err error) {
	_, hasLimit := c.GetQuery("limit")
	cursor, hasCursor := c.GetQuery("cursor")
	if !hasLimit && !hasCursor {
		return false, 0, "", nil
	}
	limit, err = queryLimit(c, defaultPageLimit, maxPageLimit)
	return true, limit, cursor, err
}

func (s *Server) listPoints(c *gin.Context) (any, error) {
	f := PointFilter{VM: c.Query("vm"), Repository: c.Query("repository"), Job: c.Query("job")}
	var err error
	if f.From, err = parseTimeParam(c, "from"); err != nil {
		return nil, err
	}
	if f.To, err = parseTimeParam(c, "to"); err != nil {
		return nil, err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return nil, badRequest("to", "the end must be after the start (from)")
	}
	search := strings.ToLower(strings.TrimSpace(c.Query("q")))
	if len(search) > 256 {
		return nil, badRequest("q", "at most 256 bytes")
	}
	paged, limit, cursor, err := paging(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	j := s.judge(c)
	if !paged {
		pts, err := s.cfg.Points.Points(ctx, f)
		if err != nil {
			return nil, err
		}
		out := []RestorePoint{}
		for _, p := range pts {
			if (search == "" || api.PointMatches(p, search)) && j.allowsPoint(p) {
				out = append(out, p)
			}
		}
		return out, nil
	}
	q := api.PointQuery{PointFilter: f, Search: search, Limit: limit}
	if cursor != "" {
		if q.After, err = decodePointCursor(cursor); err != nil {
			return nil, err
		}
	}
	var pg api.PointPage
	if pp, ok := s.cfg.Points.(PointPager); ok && j == nil {
		pg, err = pp.PointsPage(ctx, q)
	} else {
		// A scoped principal's pages are cut from the list it may see, so
		// that totals and cursors count only its points.
		pg, err = s.pageFromList(ctx, q, j)
	}
	if err != nil {
		return nil, err
	}
	out := PointsPage{Items: pg.Items, Total: pg.Total}
	if out.Items == nil {
		out.Items = []RestorePoint{}
	}
	if pg.More && len(pg.Items) > 0 {
		out.Next = encodePointCursor(pg.Items[len(pg.Items)-1].Key())
	}
	return out, nil
}

// pageFromList cuts a page from the full list (of the points j allows),
// for Points services without PointPager and for scoped principals.
func (s *Server) pageFromList(ctx context.Context, q api.PointQuery, j *scopeJudge) (api.PointPage, error) {
	pts, err := s.cfg.Points.Points(ctx, q.PointFilter)
	if err != nil {
		return api.PointPage{}, err
	}
	pg := api.PointPage{Items: []RestorePoint{}}
	for _, p := range pts {
		if q.Search != "" && !api.PointMatches(p, q.Search) || !j.allowsPoint(p) {
			continue
		}
		pg.Total++
		if q.After != nil && !api.PointLess(*q.After, p.Key()) {
			continue
		}
		if len(pg.Items) < q.Limit {
			pg.Items = append(pg.Items, p)
		} else {
			pg.More = true
		}
	}
	return pg, nil
}
