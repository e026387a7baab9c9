package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Faulty wraps a Storage and injects failures, for tests of what the
// repository does when its storage fails (EIO, ENOSPC, torn writes).
// Fail is asked before each operation with op one of "put", "create",
// "write", "commit", "open", "read", "stat", "list", "delete"; a non-nil
// error fails the operation. A failed "write" is torn: half of the buffer
// reaches the staged object before the error (the staged object is never
// committed, as on a real disk that filled up mid-write).
type Faulty struct {
	Storage
	mu   sync.Mutex
	fail func(op, name string) error
}

// NewFaulty wraps s; fail may be nil (no faults until SetFail).
func NewFaulty(s Storage, fail func(op, name string) error) *Faulty {
	return &Faulty{Storage: s, fail: fail}
}

// Space forwards to the wrapped backend when it reports space ("space"
// faults apply).
func (f *Faulty) Space(ctx context.Context) (Space, error) {
	if err := f.check("space", ""); err != nil {
		return Space{}, err
	}
	rep, ok := f.Storage.(SpaceReporter)
	if !ok {
		return Space{}, fmt.Errorf("space: %w", errors.ErrUnsupported)
	}
	return rep.Space(ctx)
}

// SetFail replaces the fault function (nil: none).
func (f *Faulty) SetFail(fail func(op, name string) error) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

func (f *Faulty) check(op, name string) error {
	f.mu.Lock()
	fn := f.fail
	f.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(op, name)
}

func (f *Faulty) Put(ctx context.Context, name string, r io.Reader, size int64, steps Steps) error {
	if err := f.check("put", name); err != nil {
		return err
	}
	return f.Storage.Put(ctx, name, r, size, steps)
}

func (f *Faulty) Create(ctx context.Context, name string) (Staged, error) {
	if err := f.check("create", name); err != nil {
		return nil, err
	}
	st, err := f.Storage.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &faultyStaged{Staged: st, f: f, name: name}, nil
}

type faultyStaged struct {
	Staged
	f    *Faulty
	name string
}

func (s *faultyStaged) Write(p []byte) (int, error) {
	if err := s.f.check("write", s.name); err != nil {
		n, _ := s.Staged.Write(p[:len(p)/2])
		return n, err
	}
	return s.Staged.Write(p)
}

func (s *faultyStaged) Commit(ctx context.Context, steps Steps) error {
	if err := s.f.check("commit", s.name); err != nil {
		s.Staged.Abort()
		return err
	}
	return s.Staged.Commit(ctx, steps)
}

func (f *Faulty) Open(ctx context.Context, name string) (Object, error) {
	if err := f.check("open", name); err != nil {
		return nil, err
	}
	o, err := f.Storage.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &faultyObject{Object: o, f: f, name: name}, nil
}

type faultyObject struct {
	Object
	f    *Faulty
	name string
}

func (o *faultyObject) ReadAt(p []byte, off int64) (int, error) {
	if err := o.f.check("read", o.name); err != nil {
		return 0, err
	}
	return o.Object.ReadAt(p, off)
}

func (f *Faulty) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	if err := f.check("read", name); err != nil {
		return nil, err
	}
	return f.Storage.GetRange(ctx, name, off, length)
}

func (f *Faulty) Stat(ctx context.Context, name string) (int64, error) {
	if err := f.check("stat", name); err != nil {
		return 0, err
	}
	return f.Storage.Stat(ctx, name)
}

func (f *Faulty) List(ctx context.Context, prefix string, fn func(string, int64) error) error {
	if err := f.check("list", prefix); err != nil {
		return err
	}
	return f.Storage.List(ctx, prefix, fn)
}

func (f *Faulty) Delete(ctx context.Context, name string) error {
	if err := f.check("delete", name); err != nil {
		return err
	}
	return f.Storage.Delete(ctx, name)
}
