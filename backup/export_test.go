package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vmvault/vmvault/vsphere"
)

// routedVS makes the fake's datastore reads refuse (403/404 after some
// bytes, or ErrNeedsExport at open) and optionally offers NFC export.
type routedVS struct {
	*fakeVSphere
	needsExport bool  // OpenDisk says ErrNeedsExport
	refuseAfter int64 // > 0: datastore reads fail with ErrNotServed past this offset
	exports     atomic.Int32
}

type exportingVS struct{ *routedVS }

func (r *routedVS) OpenDisk(ctx context.Context, snap *vsphere.Snapshot, key int32) (DiskSource, error) {
	if r.needsExport {
		return nil, fmt.Errorf("open disk %d: %w", key, vsphere.ErrNeedsExport)
	}
	src, err := r.fakeVSphere.OpenDisk(ctx, snap, key)
	if err != nil {
		return nil, err
	}
	return &refusingDisk{DiskSource: src, after: r.refuseAfter}, nil
}

type refusingDisk struct {
	DiskSource
	after int64
}

func (d *refusingDisk) ReadAt(p []byte, off int64) (int, error) {
	if d.after > 0 && off+int64(len(p)) > d.after {
		return 0, fmt.Errorf("read at %d: %w: 403 Forbidden", off, vsphere.ErrNotServed)
	}
	return d.DiskSource.ReadAt(p, off)
}

func (r exportingVS) ExportDisk(ctx context.Context, snap *vsphere.Snapshot, key int32, keep []vsphere.Extent, dir string, progress func(int64)) (DiskSource, error) {
	r.exports.Add(1)
	if progress != nil {
		progress(1)
	}
	return r.fakeVSphere.OpenDisk(ctx, snap, key)
}

// TestEngineRoutesToNFCExport: a disk whose datastore read is refused
// midway, or that must be exported from the start, is read through the
// exporter and stored byte-identical; without an exporter the VM fails
// with an error naming the cause, commits nothing and leaves no snapshot.
func TestEngineRoutesToNFCExport(t *testing.T) {
	tests := []struct {
		name        string
		needsExport bool
		refuseAfter int64
		exporter    bool
		wantErr     string
	}{
		{"refused midway, exported", false, 512 << 10, true, ""},
		{"needs export, exported", true, 0, true, ""},
		{"needs export, no exporter", true, 0, false, "no NFC export available"},
		{"refused, no exporter", false, 512 << 10, false, "does not serve"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			v := f.addVM("db", "ds1", 2<<20)
			rv := &routedVS{fakeVSphere: f, needsExport: tc.needsExport, refuseAfter: tc.refuseAfter}
			var vs VSphere = rv
			if tc.exporter {
				vs = exportingVS{rv}
			}
			e, r := testEngine(t, f, EngineOptions{Workers: 2})
			e.vs = vs
			res, err := e.BackupVM(context.Background(), Request{VM: "db"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if pts, _ := r.List(context.Background()); len(pts) != 0 {
					t.Error("a failed backup committed a point")
				}
			} else {
				if err != nil {
					t.Fatalf("back up: %v", err)
				}
				if res.Disks[0].Reader != ReaderNFC || rv.exports.Load() != 1 {
					t.Errorf("reader %q, %d exports", res.Disks[0].Reader, rv.exports.Load())
				}
				if !bytes.Equal(readPoint(t, r, res.RestorePoint, 0), v.disks[2000]) {
					t.Error("exported disk differs")
				}
			}
			if len(f.snaps) != 0 {
				t.Errorf("snapshots left: %v", f.snaps)
			}
			if errors.Is(err, ErrPanic) {
				t.Fatal(err)
			}
		})
	}
}
