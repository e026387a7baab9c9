package task

import "errors"

var (
	// ErrNotFound is returned for a task id the registry does not know.
	ErrNotFound = errors.New("task not found")
	// ErrFinished is returned by Cancel for a task that has already finished.
	ErrFinished = errors.New("task already finished")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("task registry closed")
	// ErrBusy is returned by Start when the queue is full.
	ErrBusy = errors.New("too many tasks queued")
)
