package benchstage

import (
	"strings"
	"testing"
	"time"
)

const sampleTraces = `File: benchstage.test
Type: cpu
Duration: 2s, Total samples = 70ms ( 3.50%)
-----------+-------------------------------------------------------
      30ms   github.com/zeebo/blake3.hashF_avx2
             github.com/zeebo/blake3.(*hasher).update (inline)
             github.com/vmvault/vmvault/repository.(*codec).id
-----------+-------------------------------------------------------
      20ms   runtime.memclrNoHeapPointers
             runtime.mallocgc
             github.com/klauspost/compress/zstd.(*Encoder).EncodeAll
-----------+-------------------------------------------------------
      10ms   runtime.memmove
             github.com/vmvault/vmvault/dedup.(*engine).gather
-----------+-------------------------------------------------------
      10ms   syscall.Syscall6
             go.etcd.io/bbolt.(*DB).mmap
             github.com/vmvault/vmvault/repository.(*Repository).finalize
-----------+-------------------------------------------------------
`

func TestParseTraces(t *testing.T) {
	got, err := ParseTraces(strings.NewReader(sampleTraces), false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{ID: 30 * time.Millisecond, AllocGC: 20 * time.Millisecond,
		CopyChunk: 10 * time.Millisecond, Catalog: 10 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func TestParseTracesBadValue(t *testing.T) {
	if _, err := ParseTraces(strings.NewReader("-----------+---\n  zz   runtime.main\n"), false); err == nil {
		t.Fatal("a bad sample value parsed")
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		restore bool
		stack   []string
		want    string
	}{
		{true, []string{"github.com/zeebo/blake3.hashF_avx2", "github.com/vmvault/vmvault/repository.(*codec).decode"}, Verify},
		{true, []string{"runtime.memmove", "github.com/vmvault/vmvault/repository.(*codec).decode"}, Copy},
		{true, []string{"syscall.Syscall6", "os.(*File).ReadAt", "github.com/vmvault/vmvault/repository.(*Repository).readPackAt"}, ReadPack},
		{false, []string{"syscall.Syscall6", "os.(*File).ReadAt", "github.com/vmvault/vmvault/dedup.startReadAhead.func1"}, Read},
		{false, []string{"runtime.futex", "runtime.notesleep"}, Sched},
		{false, []string{"runtime.memmove"}, Runtime},
		{false, []string{"main.main"}, Other},
	} {
		if got := Classify(tc.restore, tc.stack); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.stack, got, tc.want)
		}
	}
}
