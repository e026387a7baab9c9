package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// Repositories: /repositories (list, detail with the last check, usage
// over time, check and reclaim tasks).

// The repository types are api's, shared with the services that fill them.
type (
	RepositoryInfo = api.RepositoryInfo
	RepoStats      = api.RepoStats
	Space          = api.Space
	PointStats     = api.PointStats
	// Reporter is how a long operation run by the API reports; *task.Reporter
	// implements it.
	Reporter = api.Reporter
)

// Repositories lists repositories and runs their maintenance.
type Repositories interface {
	Repositories(ctx context.Context) ([]RepositoryInfo, error)
	// Repository returns one repository with its space statistics.
	Repository(ctx context.Context, name string) (RepositoryInfo, error)
	// Check verifies a repository (full: read every blob) and returns its report.
	Check(ctx context.Context, name string, full bool, rep Reporter) (any, error)
	// Reclaim frees the space of deleted points and returns its report.
	Reclaim(ctx context.Context, name string, rep Reporter) (any, error)
}

func (s *Server) listRepositories(c *gin.Context) (any, error) {
	rs, err := s.cfg.Repositories.Repositories(c.Request.Context())
	if err != nil {
		return nil, err
	}
	if j := s.judge(c); j != nil {
		kept := []RepositoryInfo{}
		for _, r := range rs {
			if j.allowsRepository(r.Name) {
				kept = append(kept, r)
			}
		}
		rs = kept
	}
	if rs == nil {
		rs = []RepositoryInfo{}
	}
	return rs, nil
}

// repoExists checks a repository name without computing its statistics.
func (s *Server) repoExists(ctx context.Context, name string) error {
	repos, err := s.cfg.Repositories.Repositories(ctx)
	if err != nil {
		return err
	}
	for _, r := range repos {
		if r.Name == name {
			return nil
		}
	}
	return fmt.Errorf("repository %q: %w", name, ErrNotFound)
}

type checkRequest struct {
	ReadData bool `json:"readData"`
}

func (s *Server) repoTask(c *gin.Context, kind string, fn func(ctx context.Context, name string, rep Reporter) (any, error)) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	if err := s.repoExists(c.Request.Context(), id); err != nil {
		return nil, err
	}
	noteAudit(c, id, "", id, "")
	noteObject(c, "repository", id, "")
	info, err := s.startTask(c, kind, id, func(ctx context.Context, rep *task.Reporter) (any, error) { return fn(ctx, id, rep) })
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, info), nil
}

func (s *Server) checkRepository(c *gin.Context) (any, error) {
	var req checkRequest
	if err := optionalBody(c, &req); err != nil {
		return nil, err
	}
	return s.repoTask(c, "check", func(ctx context.Context, name string, rep Reporter) (any, error) {
		return s.cfg.Repositories.Check(ctx, name, req.ReadData, rep)
	})
}

func (s *Server) reclaimRepository(c *gin.Context) (any, error) {
	return s.repoTask(c, "reclaim", s.cfg.Repositories.Reclaim)
}

// CheckSummary is the last check of a repository.
type CheckSummary struct {
	Time     time.Time `json:"time"`
	OK       bool      `json:"ok"`
	Source   string    `json:"source"`         // "task" (run from the API) or "maintenance" (the scheduler's)
	Task     string    `json:"task,omitempty"` // the check task's id
	Findings []string  `json:"findings"`
}

// RepositoryDetail is GET /repositories/{id}: the repository with its
// statistics, ratios, last check and an estimate of what reclaim frees.
type RepositoryDetail struct {
	RepositoryInfo
	DedupRatio       float64       `json:"dedupRatio"`
	CompressionRatio float64       `json:"compressionRatio"`
	LastCheck        *CheckSummary `json:"lastCheck"`
	// ReclaimableBytes estimates what reclaim frees: the stored bytes of
	// blobs no restore point references. Null when unknown.
	ReclaimableBytes *int64 `json:"reclaimableBytes"`
}

// lastCheck finds the newest finished check of a repository among the
// tasks (checks run from the API, with their findings) and the scheduler's
// maintenance checks (their event, found around the time the maintenance
// state records, so no walk through every event).
func (s *Server) lastCheck(ctx context.Context, ri RepositoryInfo) *CheckSummary {
	repo := ri.Name
	var best *CheckSummary
	if ts, err := s.cfg.Tasks.List(ctx, 1000); err == nil {
		for _, t := range ts { // newest first
			if t.Kind != "check" || t.Subject != repo || !t.State.Final() || t.State == task.Cancelled {
				continue
			}
			cs := &CheckSummary{Time: t.Ended, Source: "task", Task: t.ID, Findings: []string{}}
			if t.State == task.Succeeded {
				var rep api.CheckReport
				if b, err := json.Marshal(t.Result); err == nil && json.Unmarshal(b, &rep) == nil {
					for _, p := range rep.Problems {
						cs.Findings = append(cs.Findings, p.String())
					}
				}
				cs.OK = len(cs.Findings) == 0
			} else {
				cs.Findings = append(cs.Findings, "the check did not complete: "+t.Error)
			}
			best = cs
			break
		}
	}
	var at time.Time
	if m := ri.Maintenance; m != nil {
		at = m.LastQuickCheck
		if m.LastFullCheck.After(at) {
			at = m.LastFullCheck
		}
	}
	if s.cfg.Events == nil || at.IsZero() || (best != nil && best.Time.After(at.Add(time.Minute))) {
		return best
	}
	// The scheduler stamps the state and records the event in the same step.
	evs, err := s.cfg.Events.Events(ctx, EventQuery{From: at.Add(-time.Minute), To: at.Add(time.Minute), Limit: 10000})
	if err != nil {
		return best
	}
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Repository != repo || (e.Kind != policy.EventCheckClean && e.Kind != policy.EventCheckDamage) {
			continue
		}
		if best == nil || e.Time.After(best.Time) {
			best = &CheckSummary{Time: e.Time, OK: e.Kind == policy.EventCheckClean, Source: "maintenance", Findings: []string{}}
			if !best.OK {
				best.Findings = append(best.Findings, e.Message)
			}
		}
		break
	}
	return best
}

func (s *Server) repositoryDetail(ctx context.Context, id string) (RepositoryDetail, error) {
	ri, err := s.cfg.Repositories.Repository(ctx, id)
	if err != nil {
		return RepositoryDetail{}, err
	}
	d := RepositoryDetail{RepositoryInfo: ri, LastCheck: s.lastCheck(ctx, ri)}
	if st := ri.Stats; st != nil {
		d.DedupRatio, d.CompressionRatio = st.DedupRatio, st.CompressionRatio
		// Only blobs no point references are reclaimable: the index, the
		// configuration and pack headers stay (they made "would free 137
		// KiB" with nothing deleted).
		r := st.DeadBytes
		d.ReclaimableBytes = &r
	}
	return d, nil
}

func (s *Server) getRepository(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	d, err := s.repositoryDetail(ctx, id)
	if j := s.judge(c); j != nil && err == nil && d.Stats != nil {
		// A scoped caller sees the repository's totals, but per point only its points.
		ids, err := s.allowedPoints(ctx, j)
		if err != nil {
			return nil, err
		}
		st := *d.Stats
		st.PerPoint = st.PerPoint[:0:0]
		for _, ps := range d.Stats.PerPoint {
			if ids[ps.ID] {
				st.PerPoint = append(st.PerPoint, ps)
			}
		}
		d.Stats = &st
	}
	return d, err
}

// UsageSample is the repository's size after the points made up to Time.
type UsageSample struct {
	Time         time.Time `json:"time"`
	Points       int       `json:"points"`
	LogicalBytes int64     `json:"logicalBytes"`
	StoredBytes  int64     `json:"storedBytes"` // sum of the points' new stored bytes
}

func (s *Server) repositoryUsage(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	per := c.DefaultQuery("per", "day")
	if per != "day" && per != "point" {
		return nil, badRequest("per", "day or point")
	}
	if err := s.repoExists(ctx, id); err != nil {
		return nil, err
	}
	pts, err := s.cfg.Points.Points(ctx, PointFilter{Repository: id})
	if err != nil {
		return nil, err
	}
	pts = filterPoints(s.judge(c), pts) // a scoped caller's usage counts its points only
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Time.Before(pts[j].Time) })
	loc := s.location(ctx)
	out := []UsageSample{}
	var cur UsageSample
	for i, p := range pts {
		cur.Points++
		cur.LogicalBytes += p.LogicalBytes
		for _, d := range p.Disks {
			cur.StoredBytes += d.Stored
		}
		cur.Time = p.Time
		last := i == len(pts)-1
		if per == "day" && !last {
			y1, m1, d1 := p.Time.In(loc).Date()
			y2, m2, d2 := pts[i+1].Time.In(loc).Date()
			if y1 == y2 && m1 == m2 && d1 == d2 {
				continue
			}
		}
		out = append(out, cur)
	}
	return out, nil
}
