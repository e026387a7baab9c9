package lab

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// ReadFault makes datastore file-service GETs (and NFC export GETs)
// misbehave.
type ReadFault struct {
	// PathContains selects requests whose URL path contains it ("" = all).
	PathContains string
	// Status, when set, answers with this HTTP status and no body.
	Status int
	// AfterBytes is how many body bytes are sent before the fault.
	AfterBytes int64
	// Stall holds the connection open without sending more instead of
	// dropping it.
	Stall bool
	// Times is how many requests the fault hits (0 means 1).
	Times int
}

// InjectReadFault queues a fault for the next matching datastore GETs.
func (l *Lab) InjectReadFault(f ReadFault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = append(l.faults, &f)
}

// ClearReadFaults removes queued datastore read faults.
func (l *Lab) ClearReadFaults() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = nil
}

// takeFault consumes the first queued fault matching path; l.mu is held.
func (l *Lab) takeFault(path string) *ReadFault {
	for i, f := range l.faults {
		if strings.Contains(path, f.PathContains) {
			f.Times--
			if f.Times == 0 {
				l.faults = append(l.faults[:i:i], l.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

// StalledReads is the number of GETs a Stall fault holds open right now: a
// test that kills a backup "mid-disk" waits for it, not just for the
// backup's snapshot.
func (l *Lab) StalledReads() int64 { return atomic.LoadInt64(&l.stalled) }

// FolderGets counts datastore file-service GETs served so far.
func (l *Lab) FolderGets() int64 { return atomic.LoadInt64(&l.folderGet) }

func (l *Lab) serveFolderGet(w http.ResponseWriter, r *http.Request) {
	atomic.AddInt64(&l.folderGet, 1)
	if maxRange := l.opts.MaxRangeBytes; maxRange > 0 {
		var a, b int64
		if n, _ := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); n == 2 && b-a+1 > maxRange {
			r.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", a, a+maxRange-1))
		}
	}
	if l.runningExtent(r) {
		atomic.AddInt64(&l.lockedRefused, 1)
		http.Error(w, "file locked", http.StatusForbidden)
		return
	}
	l.mu.Lock()
	hit := l.takeFault(r.URL.Path)
	l.mu.Unlock()
	if hit == nil {
		l.model.Service.ServeDatastore(w, r)
		return
	}
	if hit.Status != 0 {
		w.WriteHeader(hit.Status)
		return
	}
	fw := &faultWriter{ResponseWriter: w, left: hit.AfterBytes, stall: hit.Stall, done: r.Context().Done(), closed: l.closed, stalled: &l.stalled}
	l.model.Service.ServeDatastore(fw, r)
	// The body fitted under AfterBytes: the fault still fires at the end.
	fw.fire()
}

// faultWriter passes AfterBytes bytes through and then drops or stalls the
// connection.
type faultWriter struct {
	http.ResponseWriter
	left    int64
	stall   bool
	done    <-chan struct{}
	closed  <-chan struct{}
	stalled *int64
}

func (f *faultWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= f.left {
		f.left -= int64(len(p))
		return f.ResponseWriter.Write(p)
	}
	// Write what fits, then abort mid-body: fire does not return.
	_, _ = f.ResponseWriter.Write(p[:f.left])
	f.left = 0
	f.fire()
	return 0, http.ErrAbortHandler
}

func (f *faultWriter) fire() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	if f.stall {
		atomic.AddInt64(f.stalled, 1)
		defer atomic.AddInt64(f.stalled, -1)
		select {
		case <-f.done:
		case <-f.closed:
		}
	}
	// Aborting makes net/http close the connection mid-body.
	panic(http.ErrAbortHandler)
}
