package benchstage

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// Stage names of the table. The first seven of a backup and the first five
// of a restore are kernels; the others are overhead.
const (
	Read     = "read"
	Chunk    = "chunk"
	ID       = "id (keyed BLAKE3)"
	Compress = "compress (zstd)"
	Seal     = "seal (AES-GCM)"
	PackW    = "pack write"
	Catalog  = "catalog (bbolt, disk map)"

	ReadPack   = "read pack"
	Open       = "open (AES-GCM)"
	Decompress = "decompress (zstd)"
	Verify     = "verify (keyed BLAKE3)"
	Write      = "write"
	Plan       = "plan (catalog lookups)"

	CopyChunk = "copy into chunk buffers"
	ZeroTest  = "zero test"
	Copy      = "other copies"
	AllocGC   = "allocation + GC"
	Sched     = "scheduler, channels, locks"
	Profiler  = "profiler"
	Runtime   = "other runtime"
	Other     = "other"
)

// BackupStages and RestoreStages are the kernels, in table order.
var (
	BackupStages   = []string{Read, Chunk, ID, Compress, Seal, PackW, Catalog}
	RestoreStages  = []string{ReadPack, Open, Decompress, Verify, Write, Plan}
	OverheadStages = []string{CopyChunk, ZeroTest, Copy, AllocGC, Sched, Runtime, Other, Profiler}
)

type rule struct{ match, stage string }

// Rules are tried on every frame from the innermost out; the first frame
// that matches one names the stage. Runtime rules come first so that an
// allocation inside a stage counts as allocation, not as the stage.
var runtimeRules = []rule{
	{"runtime/pprof.", Profiler},
	{"runtime.mallocgc", AllocGC}, {"runtime.gcBgMarkWorker", AllocGC}, {"runtime.gcAssistAlloc", AllocGC},
	{"runtime.bgsweep", AllocGC}, {"runtime.bgscavenge", AllocGC}, {"runtime.gcDrain", AllocGC},
	{"runtime.scanobject", AllocGC}, {"runtime.(*mheap)", AllocGC}, {"runtime.sweepone", AllocGC},
	{"runtime.(*mcache)", AllocGC}, {"runtime.gcStart", AllocGC}, {"runtime.newobject", AllocGC},
	{"runtime.growslice", AllocGC}, {"runtime.makeslice", AllocGC}, {"runtime.markroot", AllocGC},
	{"runtime.gcMarkDone", AllocGC}, {"runtime.gcMarkTermination", AllocGC}, {"runtime.(*gcWork)", AllocGC},
	{"runtime.chansend", Sched}, {"runtime.chanrecv", Sched}, {"runtime.selectgo", Sched},
	{"runtime.schedule", Sched}, {"runtime.findRunnable", Sched}, {"runtime.park_m", Sched},
	{"runtime.gopark", Sched}, {"runtime.goready", Sched}, {"runtime.ready", Sched}, {"runtime.wakep", Sched},
	{"runtime.notewakeup", Sched}, {"runtime.notesleep", Sched}, {"runtime.stopm", Sched}, {"runtime.startm", Sched},
	{"runtime.semacquire", Sched}, {"runtime.semrelease", Sched}, {"runtime.exitsyscall", Sched},
	{"runtime.entersyscall", Sched}, {"runtime.lock2", Sched}, {"runtime.unlock2", Sched}, {"runtime.sysmon", Sched},
	{"runtime.goexit0", Sched}, {"runtime.newproc", Sched}, {"runtime.mPark", Sched}, {"runtime.futex", Sched},
	{"runtime.usleep", Sched}, {"runtime.osyield", Sched}, {"runtime.runqgrab", Sched}, {"runtime.netpoll", Sched},
	{"sync.(*Mutex)", Sched}, {"sync.(*RWMutex)", Sched}, {"sync.(*WaitGroup)", Sched}, {"sync.(*Pool)", AllocGC},
	{"internal/sync.", Sched},
}

var backupRules = []rule{
	{"dedup.startReadAhead", Read},
	{"dedup.isZero", ZeroTest},
	{"dedup.(*engine).gather", CopyChunk},
	{"dedup.(*rabin)", Chunk}, {"dedup.(*engine).cutCDC", Chunk},
	{"zeebo/blake3", ID}, {"crypto/sha256", ID}, {"crypto/hmac", ID}, {"fips140/sha256", ID}, {"fips140/hmac", ID},
	{"klauspost/compress", Compress},
	{"crypto/aes", Seal}, {"crypto/cipher", Seal}, {"fips140/aes", Seal}, {"crypto/rand", Seal},
	{"sysrand", Seal}, {"fips140/drbg", Seal},
	{"go.etcd.io/bbolt", Catalog}, {"repository.indexPackTx", Catalog}, {"repository.lookupTx", Catalog},
	{"repository.encodeSegment", Catalog}, {"repository.(*Session).PutDisk", Catalog},
	{"repository.(*Session).commit", Catalog},
	{"repository.(*Repository).appendBlob", PackW}, {"repository.(*Repository).writePackTail", PackW},
	{"repository.(*Repository).finalize", PackW}, {"bufio.(*Writer)", PackW}, {"repository/storage", PackW},
}

var restoreRules = []rule{
	{"repository.(*Repository).readPackAt", ReadPack},
	{"zeebo/blake3", Verify}, {"repository.(*codec).id", Verify},
	{"klauspost/compress", Decompress},
	{"crypto/aes", Open}, {"crypto/cipher", Open}, {"fips140/aes", Open},
	{"repository.(*seqWriter)", Write}, {"internal/directio", Write}, {"os.(*File).WriteAt", Write},
	{"go.etcd.io/bbolt", Plan}, {"repository.(*DiskReader).planJobs", Plan}, {"repository.(*streamJob).add", Plan},
	{"repository.(*codec).decode", Copy},
}

// Classify names the stage of one sampled stack (innermost frame first).
func Classify(restore bool, stack []string) string {
	rules := backupRules
	if restore {
		rules = restoreRules
	}
	runtimeOnly := true
	for _, f := range stack {
		for _, r := range runtimeRules {
			if strings.Contains(f, r.match) {
				return r.stage
			}
		}
		for _, r := range rules {
			if strings.Contains(f, r.match) {
				return r.stage
			}
		}
		if !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "syscall.") && !strings.HasPrefix(f, "internal/") {
			runtimeOnly = false
		}
	}
	if runtimeOnly {
		return Runtime
	}
	return Other
}

// ParseTraces reads the output of `go tool pprof -traces` and adds each
// sample's value to the stage Classify gives its stack.
func ParseTraces(r io.Reader, restore bool) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var val time.Duration
	var stack []string
	inTrace := false
	flush := func() {
		if inTrace && len(stack) > 0 {
			out[Classify(restore, stack)] += val
		}
		stack, inTrace = stack[:0], false
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			inTrace = true
			val = -1
			continue
		}
		if !inTrace {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if val < 0 {
			d, err := time.ParseDuration(f[0])
			if err != nil {
				if strings.HasPrefix(f[0], "bytes:") || strings.Contains(line, ":") && len(f) == 1 {
					continue // a label line
				}
				return nil, fmt.Errorf("pprof traces: sample value %q: %w", f[0], err)
			}
			val = d
			f = f[1:]
			if len(f) == 0 {
				continue
			}
		}
		stack = append(stack, f[0])
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("pprof traces: %w", err)
	}
	return out, nil
}
