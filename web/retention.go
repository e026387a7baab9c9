package web

import (
	"context"
	"errors"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/policy"
)

// Retention previews: a saved job's (/jobs/{id}/retention-preview) and an
// unsaved retention's (/retention-preview).

// PreviewDecision is one point's fate in a retention preview.
type PreviewDecision struct {
	Point   string    `json:"point"`
	VM      string    `json:"vm"`
	Time    time.Time `json:"time"`
	Keep    bool      `json:"keep"`
	Locked  bool      `json:"locked"`
	Bytes   int64     `json:"bytes"` // bytes only this point references (freed if removed)
	Reasons []string  `json:"reasons"`
}

// RetentionPreview is what the job's retention would do now.
type RetentionPreview struct {
	Keep       int               `json:"keep"`
	Remove     int               `json:"remove"`
	BytesFreed int64             `json:"bytesFreed"`
	Decisions  []PreviewDecision `json:"decisions"`
}

func (s *Server) retentionPreview(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	j, err := s.cfg.Jobs.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.preview(ctx, PointFilter{Repository: j.Repository, Job: j.ID}, j.Retention, s.judge(c))
}

// RetentionPreviewRequest is the body of POST /retention-preview.
type RetentionPreviewRequest struct {
	Repository string           `json:"repository"`
	Retention  policy.Retention `json:"retention"`
	VM         string           `json:"vm,omitempty"`  // only this VM's points (instance UUID)
	Job        string           `json:"job,omitempty"` // only points made by this job (editing a saved job)
}

// preview runs retention's dry run over the points f selects. With a
// judge (a scoped caller) it shows, and counts, only the decisions on the
// points the scope allows (retention decides per VM, so theirs are
// unchanged).
func (s *Server) preview(ctx context.Context, f PointFilter, ret policy.Retention, j *scopeJudge) (RetentionPreview, error) {
	pts, err := s.cfg.Points.Points(ctx, f)
	if err != nil {
		return RetentionPreview{}, err
	}
	unique := map[string]int64{}
	if len(pts) > 0 {
		if ri, err := s.cfg.Repositories.Repository(ctx, f.Repository); err == nil && ri.Stats != nil {
			for _, ps := range ri.Stats.PerPoint {
				unique[ps.ID] = ps.UniqueBytes
			}
		}
	}
	pp := make([]policy.Point, len(pts))
	for i, p := range pts {
		st := policy.PointComplete
		if p.Partial {
			st = policy.PointPartial
		}
		pp[i] = policy.Point{ID: p.ID, Repository: p.Repository, VM: vmKey(p.VM), Job: p.Job, Time: p.Time, Status: st, Locked: p.Locked, Bytes: unique[p.ID]}
	}
	plan := ret.DryRun(pp, s.location(ctx))
	out := RetentionPreview{Keep: plan.Keep, Remove: plan.Remove, BytesFreed: plan.BytesFreed, Decisions: make([]PreviewDecision, 0, len(plan.Decisions))}
	var allowed map[string]bool
	if j != nil {
		allowed = map[string]bool{}
		for _, p := range pts {
			if j.allowsPoint(p) {
				allowed[p.ID] = true
			}
		}
		out.Keep, out.Remove, out.BytesFreed = 0, 0, 0
	}
	for _, d := range plan.Decisions {
		if allowed != nil {
			if !allowed[d.Point.ID] {
				continue
			}
			if d.Keep {
				out.Keep++
			} else {
				out.Remove++
				out.BytesFreed += d.Point.Bytes
			}
		}
		out.Decisions = append(out.Decisions, PreviewDecision{Point: d.Point.ID, VM: d.Point.VM, Time: d.Point.Time, Keep: d.Keep, Locked: d.Point.Locked, Bytes: d.Point.Bytes, Reasons: d.Reasons})
	}
	return out, nil
}

func (s *Server) retentionPreviewUnsaved(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	var req RetentionPreviewRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if req.Repository == "" {
		return nil, invalid("repository", "required")
	}
	if len(req.VM) > 128 {
		return nil, invalid("vm", "at most 128 characters")
	}
	if len(req.Job) > 128 {
		return nil, invalid("job", "at most 128 characters")
	}
	if err := req.Retention.Validate(); err != nil {
		return nil, err
	}
	jd := s.judge(c)
	if err := s.repoExists(ctx, req.Repository); err != nil || !jd.allowsRepository(req.Repository) {
		if err == nil || errors.Is(err, ErrNotFound) {
			return nil, invalid("repository", "unknown repository %q", req.Repository)
		}
		return nil, err
	}
	return s.preview(ctx, PointFilter{Repository: req.Repository, VM: req.VM, Job: req.Job}, req.Retention, jd)
}
