package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/task"
)

// Tasks: /tasks (list, detail with its log, cancel).

func (s *Server) listTasks(c *gin.Context) (any, error) {
	limit := 100
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, badRequest("limit", "an integer from 1 to 1000")
		}
		limit = n
	}
	ts, err := s.cfg.Tasks.List(c.Request.Context(), limit)
	if err != nil {
		return nil, err
	}
	if st := c.Query("state"); st != "" {
		kept := ts[:0]
		for _, t := range ts {
			if string(t.State) == st {
				kept = append(kept, t)
			}
		}
		ts = kept
	}
	ts = s.filterTasks(c.Request.Context(), s.judge(c), ts)
	if ts == nil {
		ts = []task.Info{}
	}
	return ts, nil
}

// TaskDetail is a task with its log.
type TaskDetail struct {
	task.Info
	Log []task.LogLine `json:"log"`
}

func (s *Server) getTask(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	info, err := s.cfg.Tasks.Get(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	logs, _ := s.cfg.Tasks.Logs(id) // a task loaded from the store has no log in memory
	if logs == nil {
		logs = []task.LogLine{}
	}
	return TaskDetail{Info: info, Log: logs}, nil
}

func (s *Server) cancelTask(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Tasks.Cancel(id); err != nil {
		if errors.Is(err, task.ErrNotFound) {
			if _, gerr := s.cfg.Tasks.Get(c.Request.Context(), id); gerr == nil {
				return nil, fmt.Errorf("task %s: %w", id, task.ErrFinished)
			}
		}
		return nil, err
	}
	return withStatus(http.StatusAccepted, nil), nil
}
