package api

import (
	"errors"
	"testing"
)

func TestKind(t *testing.T) {
	sentinel := errors.New("repository has open backup sessions")
	err := Kind(sentinel, ErrBusy)
	if !errors.Is(err, ErrBusy) || !errors.Is(err, sentinel) || err.Error() != sentinel.Error() {
		t.Fatalf("Kind: %v (busy %v, sentinel %v)", err, errors.Is(err, ErrBusy), errors.Is(err, sentinel))
	}
	if errors.Is(err, ErrNotFound) {
		t.Fatal("Kind matches a kind it was not given")
	}
	if Kind(nil, ErrBusy) != nil {
		t.Fatal("Kind(nil) is not nil")
	}
}
