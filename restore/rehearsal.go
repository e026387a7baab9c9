package restore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vmvault/vmvault/vsphere"
)

// Rehearsal is a rehearsal VM found in the inventory.
type Rehearsal struct {
	VM      vsphere.VMRef `json:"vm"`
	Source  string        `json:"source"`
	Point   string        `json:"restorePoint"`
	Created time.Time     `json:"created"`
	Removed bool          `json:"removed"`
	Error   string        `json:"error,omitempty"`
}

// parseRehearsal reads the marker line of a rehearsal VM's notes.
func parseRehearsal(note string) (source, point string, created time.Time, ok bool) {
	line, _, _ := strings.Cut(note, "\n")
	if !strings.HasPrefix(line, RehearsalMarker+" ") {
		return "", "", time.Time{}, false
	}
	for _, f := range strings.Fields(line)[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "source":
			source = v
		case "point":
			point = v
		case "created":
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return "", "", time.Time{}, false
			}
			created = t
		}
	}
	return source, point, created, !created.IsZero()
}

// CleanupRehearsals removes the rehearsal VMs (those whose notes carry
// RehearsalMarker) created more than olderThan ago (0: all of them). It
// goes on after a failed removal and reports each VM.
func (e *Engine) CleanupRehearsals(ctx context.Context, olderThan time.Duration) ([]Rehearsal, error) {
	if e.vc == nil {
		return nil, fmt.Errorf("%w: no vCenter connection", ErrInvalidRequest)
	}
	notes, err := e.vc.VMNotes(ctx)
	if err != nil {
		return nil, err
	}
	now := e.opts.Now()
	var out []Rehearsal
	var failed int
	for _, n := range notes {
		src, pt, created, ok := parseRehearsal(n.Annotation)
		if !ok || now.Sub(created) < olderThan {
			continue
		}
		r := Rehearsal{VM: n.VMRef, Source: src, Point: pt, Created: created}
		if err := e.vc.DestroyVM(ctx, n.VMRef); err != nil {
			r.Error = err.Error()
			failed++
		} else {
			r.Removed = true
		}
		out = append(out, r)
	}
	if failed > 0 {
		return out, fmt.Errorf("rehearsal cleanup: %d of %d VMs could not be removed", failed, len(out))
	}
	return out, nil
}
