package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/repository/storage"
)

// TestStagingMemoryBudget: uploads are staged in memory up to the store's
// budget and spill to a file past it, byte-identically either way (single
// PUTs and multipart ones); Commit and Abort give the budget back and
// leave no staging file.
func TestStagingMemoryBudget(t *testing.T) {
	_, srv := NewTestStore(t, "vmvault-stage", "")
	tg, err := ParseTarget(srv.Location("vmvault-stage", "")[len("s3:"):])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stage := t.TempDir()
	const budgetBytes = 8 << 20
	st, err := New(ctx, tg, Options{StageDir: stage, PartSize: 5 << 20, MemoryBudget: budgetBytes})
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{3<<20 + 17, 4 << 20, 11<<20 + 5, 100} // the third spills (and goes multipart)
	var ws []*staged
	var datas [][]byte
	for i, size := range sizes {
		data := make([]byte, size)
		rand.Read(data)
		w, err := st.Create(ctx, fmt.Sprintf("packs/aa/p%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < size; off += 256 << 10 {
			if _, err := w.Write(data[off:min(off+256<<10, size)]); err != nil {
				t.Fatal(err)
			}
		}
		ws, datas = append(ws, w.(*staged)), append(datas, data)
	}
	if ws[0].f != nil || ws[1].f != nil {
		t.Fatalf("uploads within the budget spilled to a file")
	}
	if ws[2].f == nil {
		t.Fatalf("an upload past the budget (%d bytes staged, budget %d) stayed in memory", 7<<20+ws[2].n, budgetBytes)
	}
	if st.mem.left < 0 {
		t.Fatalf("budget overdrawn: %d", st.mem.left)
	}
	// One aborted, the others committed.
	ws[1].Abort()
	for _, i := range []int{0, 2, 3} {
		if err := ws[i].Commit(ctx, storage.Steps{}); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		b, err := storage.ReadAll(ctx, st, ws[i].name)
		if err != nil || !bytes.Equal(b, datas[i]) {
			t.Fatalf("object %d reads back %d bytes (%v), want %d identical", i, len(b), err, len(datas[i]))
		}
	}
	if st.mem.left != budgetBytes {
		t.Fatalf("budget after every upload ended: %d, want %d", st.mem.left, budgetBytes)
	}
	if m, _ := filepath.Glob(filepath.Join(stage, "*")); len(m) != 0 {
		t.Fatalf("staging files left: %v", m)
	}
	if _, err := st.Stat(ctx, ws[1].name); !storage.IsNotExist(err) {
		t.Fatalf("an aborted upload reached the bucket: %v", err)
	}
}
