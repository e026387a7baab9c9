package repository

import (
	"context"
	"testing"
	"time"
)

// TestStatsDeadBytes: with nothing deleted no blob is dead (the console's
// "reclaim would free" read 137 KiB, the index and headers, with nothing
// to free); a deleted point's own blobs are; reclaim frees them.
func TestStatsDeadBytes(t *testing.T) {
	r := TestRepository(t, WithPackSize(256<<10))
	ctx := context.Background()
	a := backup(t, r, "vm", testTime, testDisk(31, 1<<20))
	backup(t, r, "vm", testTime.Add(time.Hour), testDisk(32, 1<<20))
	st, err := r.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadBytes != 0 {
		t.Fatalf("nothing deleted: DeadBytes = %d, want 0 (disk %d, stored %d)", st.DeadBytes, st.DiskBytes, st.StoredBytes)
	}
	if err := r.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	st, err = r.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadBytes <= 0 || st.DeadBytes > st.DiskBytes {
		t.Fatalf("a point of its own 1 MiB deleted: DeadBytes = %d (disk %d)", st.DeadBytes, st.DiskBytes)
	}
	if _, err := r.Reclaim(ctx, nil); err != nil {
		t.Fatal(err)
	}
	st, err = r.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadBytes != 0 {
		t.Errorf("after reclaim: DeadBytes = %d, want 0", st.DeadBytes)
	}
}
