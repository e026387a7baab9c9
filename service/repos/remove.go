package repos

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web/api"
)

// ErrInUse is Remove's answer while an operation runs on the repository
// (an *InUseError, which is also api.ErrConflict).
var ErrInUse = errors.New("repository in use")

// InUseError names the operations that keep a repository from being removed.
type InUseError struct {
	Repository string
	Operations []string // sorted, e.g. "backup of web01", "check"
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("repository %q is in use: %s running; remove it once they end", e.Repository, strings.Join(e.Operations, ", "))
}

// Unwrap makes the error both ErrInUse and api.ErrConflict (409).
func (e *InUseError) Unwrap() []error { return []error{ErrInUse, api.ErrConflict} }

// entry is one repository of the set with what runs on it.
type entry struct {
	r *repository.Repository
	// calls counts the Set's calls reading r (acquire) and the operations
	// (Use). Add happens only under Set.mu while the entry is in ents, so
	// every Add precedes Remove's Wait, which starts after the entry left.
	calls sync.WaitGroup
	// ops names the operations running (Use), by a sequence number;
	// guarded by Set.mu.
	ops map[uint64]string
}

func newEntry(r *repository.Repository) *entry { return &entry{r: r, ops: map[uint64]string{}} }

// acquire returns repository name for one call of the Set's; release
// must be called when the call no longer reads it. Remove waits for it.
// Calls may nest (a WaitGroup, not a RWMutex whose pending writer would
// block a nested reader).
func (s *Set) acquire(name string) (*repository.Repository, func(), error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.ents[name]
	if !ok {
		return nil, nil, fmt.Errorf("repository %q: %w", name, api.ErrNotFound)
	}
	e.calls.Add(1)
	return e.r, e.calls.Done, nil
}

// acquireAll is acquire of every repository, with the current names.
func (s *Set) acquireAll() ([]string, map[string]*repository.Repository, func()) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	held := make([]*entry, 0, len(s.names))
	for _, n := range s.names {
		if e, ok := s.ents[n]; ok {
			e.calls.Add(1)
			held = append(held, e)
		}
	}
	return s.names, s.repos, func() {
		for _, e := range held {
			e.calls.Done()
		}
	}
}

// Use registers an operation (what: "backup of web01", "restore of
// db01", "check") on repository name until done is called: Remove refuses
// while it runs and names it. done may be called more than once.
func (s *Set) Use(name, what string) (*repository.Repository, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ents[name]
	if !ok {
		return nil, nil, fmt.Errorf("repository %q: %w", name, api.ErrNotFound)
	}
	s.nextOp++
	id := s.nextOp
	e.ops[id] = what
	e.calls.Add(1)
	var once sync.Once
	return e.r, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(e.ops, id)
			s.mu.Unlock()
			e.calls.Done()
		})
	}, nil
}

// InUse returns the operations running on repository name (sorted; the
// same operation twice is listed twice).
func (s *Set) InUse(name string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.ents[name]
	if !ok {
		return nil
	}
	return e.running()
}

func (e *entry) running() []string {
	out := make([]string, 0, len(e.ops))
	for _, w := range e.ops {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// Remove takes repository name out of the set: from its return on, no
// listing shows it and no call finds it. It refuses (*InUseError) while an
// operation registered by Use runs, and otherwise waits for the calls
// already reading it to end, then returns it: the caller closes it (Remove
// never touches its data). The set forgets its points.
func (s *Set) Remove(name string) (*repository.Repository, error) {
	s.mu.Lock()
	e, ok := s.ents[name]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("repository %q: %w", name, api.ErrNotFound)
	}
	if ops := e.running(); len(ops) > 0 {
		s.mu.Unlock()
		return nil, &InUseError{Repository: name, Operations: ops}
	}
	repos := make(map[string]*repository.Repository, len(s.repos))
	for n, x := range s.repos {
		if n != name {
			repos[n] = x
		}
	}
	names := make([]string, 0, len(s.names))
	for _, n := range s.names {
		if n != name {
			names = append(names, n)
		}
	}
	s.names, s.repos = names, repos
	delete(s.ents, name)
	s.mu.Unlock()
	if s.removing != nil {
		s.removing(name)
	}
	// No call can acquire it any more; the ones that did finish first.
	e.calls.Wait()
	s.idx.forget(name)
	// A repository opened again under this name must not be served the
	// old one's statistics as stale ones.
	s.lastMu.Lock()
	delete(s.last, name)
	s.lastMu.Unlock()
	return e.r, nil
}
