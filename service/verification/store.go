package verification

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// A point id names a directory: only what a repository makes (hex).
var pointDir = regexp.MustCompile(`^[0-9a-f]{8,128}$`)

// store keeps results as files: <dir>/<point>/<finished ns>-<id>.json,
// so that names sort oldest first; latest caches each point's newest.
type store struct {
	dir    string
	keep   int
	noSync bool

	mu     sync.Mutex
	latest map[string]Result
}

func openStore(dir string, keep int, noSync bool) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("verification results: %w", err)
	}
	s := &store{dir: dir, keep: keep, noSync: noSync, latest: map[string]Result{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("verification results: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || !pointDir.MatchString(e.Name()) {
			continue
		}
		// A damaged newest file (a disk that lied about fsync) leaves the
		// one before it as the newest: one unreadable result hides nothing.
		rs, err := s.history(e.Name())
		if err == nil && len(rs) > 0 {
			s.latest[e.Name()] = rs[0]
		}
	}
	return s, nil
}

func (s *store) latestOf(point string) (Result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.latest[point]
	return r, ok
}

// files lists a point's result files, oldest first.
func (s *store) files(point string) ([]string, error) {
	if !pointDir.MatchString(point) {
		return nil, fmt.Errorf("%w: restore point id %q", ErrInvalid, point)
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, point))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verification results of %s: %w", point, err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// history reads a point's results, newest first; unreadable files are
// skipped.
func (s *store) history(point string) ([]Result, error) {
	names, err := s.files(point)
	if err != nil {
		return nil, err
	}
	var out []Result
	for i := len(names) - 1; i >= 0; i-- {
		b, err := os.ReadFile(filepath.Join(s.dir, point, names[i]))
		if err != nil {
			continue
		}
		var r Result
		if json.Unmarshal(b, &r) == nil && r.Version == 1 && r.Point == point {
			out = append(out, r)
		}
	}
	return out, nil
}

// save writes r atomically, then drops the point's oldest results beyond
// keep.
func (s *store) save(r Result) error {
	if !pointDir.MatchString(r.Point) {
		return fmt.Errorf("%w: restore point id %q", ErrInvalid, r.Point)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(s.dir, r.Point)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("record verification of %s: %w", r.Point, err)
	}
	name := fmt.Sprintf("%020d-%s.json", r.Finished.UnixNano(), r.ID)
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("record verification of %s: %w", r.Point, err)
	}
	_, err = f.Write(b)
	if err == nil && !s.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil && !s.noSync {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("record verification of %s: %w", r.Point, err)
	}
	s.mu.Lock()
	if cur, ok := s.latest[r.Point]; !ok || !r.Finished.Before(cur.Finished) {
		s.latest[r.Point] = r
	}
	s.mu.Unlock()
	names, err := s.files(r.Point)
	if err != nil {
		return nil // recorded; trimming waits for the next save
	}
	for len(names) > s.keep {
		os.Remove(filepath.Join(dir, names[0]))
		names = names[1:]
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

// prune removes the results of every point keep does not want.
func (s *store) prune(keep func(point string) bool) error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("verification results: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !pointDir.MatchString(e.Name()) || keep(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		s.mu.Lock()
		delete(s.latest, e.Name())
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
