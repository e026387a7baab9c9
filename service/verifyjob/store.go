package verifyjob

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/vmvault/vmvault/web/api"
)

// KeepRuns is how many runs of one job its file keeps (the oldest go
// first).
const KeepRuns = 50

// file is one job's JSON file.
type file struct {
	Version int   `json:"version"`
	Job     Job   `json:"job"`
	Runs    []Run `json:"runs"` // oldest first
}

// Store keeps jobs and their runs as files <dir>/<id>.json. It is safe
// for concurrent use.
type Store struct {
	dir    string
	noSync bool
	mu     sync.Mutex
}

// OpenStore keeps jobs in dir (created); noSync skips fsync (tests).
func OpenStore(dir string, noSync bool) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("verification jobs: %w", err)
	}
	return &Store{dir: dir, noSync: noSync}, nil
}

func (s *Store) path(id string) string { return filepath.Join(s.dir, id+".json") }

func (s *Store) read(id string) (file, error) {
	var f file
	if !idRE.MatchString(id) {
		return f, fmt.Errorf("verification job %q: %w", id, api.ErrNotFound)
	}
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return f, fmt.Errorf("verification job %q: %w", id, api.ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("verification job %q: %w", id, err)
	}
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 {
		return f, fmt.Errorf("verification job %q: unreadable file %s", id, s.path(id))
	}
	return f, nil
}

func (s *Store) write(f file) error {
	f.Version = 1
	if f.Runs == nil {
		f.Runs = []Run{}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	dst := s.path(f.Job.ID)
	tmp := filepath.Join(s.dir, "."+f.Job.ID+".json.tmp")
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("save verification job %s: %w", f.Job.ID, err)
	}
	_, err = out.Write(b)
	if err == nil && !s.noSync {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err == nil && !s.noSync {
		err = syncDir(s.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save verification job %s: %w", f.Job.ID, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Jobs returns every readable job, by id, and an error naming the
// unreadable files (left on disk for an operator to look at): one damaged
// file does not stop the other jobs.
func (s *Store) Jobs() ([]Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("verification jobs: %w", err)
	}
	out := []Job{}
	var errs []error
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok || !idRE.MatchString(id) {
			continue
		}
		f, err := s.read(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, f.Job)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, errors.Join(errs...)
}

// Job returns one job; an unknown id matches api.ErrNotFound.
func (s *Store) Job(id string) (Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.read(id)
	return f.Job, err
}

// Put validates and saves j, keeping the runs of a job of the same id.
func (s *Store) Put(j Job) error {
	if err := Validate(j); err != nil {
		return err
	}
	if j.VMs == nil {
		j.VMs = []string{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.read(j.ID)
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		return err
	}
	f.Job = j
	return s.write(f)
}

// Delete removes a job and its runs; an unknown id matches api.ErrNotFound.
func (s *Store) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.read(id); err != nil {
		return err
	}
	if err := os.Remove(s.path(id)); err != nil {
		return fmt.Errorf("delete verification job %s: %w", id, err)
	}
	return nil
}

// PutRun saves r (new or updated, by id) in its job's file; a job deleted
// meanwhile is not brought back.
func (s *Store) PutRun(r Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.read(r.Job)
	if err != nil {
		return err
	}
	i := len(f.Runs) - 1
	for i >= 0 && f.Runs[i].ID != r.ID {
		i--
	}
	if i >= 0 {
		f.Runs[i] = r
	} else {
		f.Runs = append(f.Runs, r)
	}
	if len(f.Runs) > KeepRuns {
		f.Runs = f.Runs[len(f.Runs)-KeepRuns:]
	}
	return s.write(f)
}

// Runs returns up to limit (<= 0: all) runs of job, newest first.
func (s *Store) Runs(id string, limit int) ([]Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.read(id)
	if err != nil {
		return nil, err
	}
	out := []Run{}
	for i := len(f.Runs) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		out = append(out, f.Runs[i])
	}
	return out, nil
}

// markInterrupted ends the runs a previous process left running.
func (s *Store) markInterrupted() error {
	jobs, _ := s.Jobs()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, j := range jobs {
		f, err := s.read(j.ID)
		if err != nil {
			continue
		}
		changed := false
		for i := range f.Runs {
			if f.Runs[i].State == RunRunning {
				f.Runs[i].State = RunInterrupted
				f.Runs[i].Error = "the appliance stopped during the run"
				if f.Runs[i].End.IsZero() {
					f.Runs[i].End = f.Runs[i].Start
				}
				changed = true
			}
		}
		if changed {
			errs = append(errs, s.write(f))
		}
	}
	return errors.Join(errs...)
}
