package overlay

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
)

const diskSize = 1 << 20

func base() []byte {
	b := make([]byte, diskSize)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// crash drops the store's in-memory state without Close: the files stay
// as the last Sync left them (plus whatever write() put in the page cache,
// which a real crash may or may not keep; Open must cope with both).
func crash(s *Store) {
	s.data.Close()
	s.journal.Close()
}

func readAll(t *testing.T, s *Store, b []byte) []byte {
	t.Helper()
	out := make([]byte, s.Size())
	if n, err := s.ReadAt(out, 0, bytes.NewReader(b)); err != nil || n != len(out) {
		t.Fatalf("read: %d, %v", n, err)
	}
	return out
}

func TestMergeAndReopen(t *testing.T) {
	dir := t.TempDir()
	b := base()
	want := bytes.Clone(b)
	s, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 500; i++ {
		off := r.Int64N(diskSize - 1)
		n := 1 + r.Int64N(min(9000, diskSize-off))
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		if _, err := s.WriteAt(p, off); err != nil {
			t.Fatal(err)
		}
		copy(want[off:], p)
		if i%50 == 0 {
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !bytes.Equal(readAll(t, s, b), want) {
		t.Fatal("merged read differs")
	}
	// Reads at odd offsets and lengths, straddling extents and the end.
	for i := 0; i < 200; i++ {
		off := r.Int64N(diskSize)
		p := make([]byte, r.IntN(20000))
		n, err := s.ReadAt(p, off, bytes.NewReader(b))
		if off+int64(len(p)) > diskSize {
			if err == nil || n != int(diskSize-off) {
				t.Fatalf("read past the end: %d %v", n, err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p[:n], want[off:off+int64(n)]) {
			t.Fatalf("read at %d differs", off)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	used := s.Used()
	crash(s)
	s2, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Used() != used {
		t.Fatalf("used %d after reopen, %d before", s2.Used(), used)
	}
	if !bytes.Equal(readAll(t, s2, b), want) {
		t.Fatal("read after crash differs")
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean close compacted the journal into the snapshot.
	if fi, err := os.Stat(Paths(dir, "d0")[2]); err != nil || fi.Size() != 0 {
		t.Fatalf("journal after close: %v %v", fi, err)
	}
	s3, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if !bytes.Equal(readAll(t, s3, b), want) {
		t.Fatal("read after close and reopen differs")
	}
}

func TestUnsyncedWriteNeverClaimed(t *testing.T) {
	dir := t.TempDir()
	b := base()
	s, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteAtSync(bytes.Repeat([]byte{1}, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteAt(bytes.Repeat([]byte{2}, 4096), 8192); err != nil {
		t.Fatal(err)
	}
	crash(s)
	s2, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got := readAll(t, s2, b)
	want := bytes.Clone(b)
	copy(want, bytes.Repeat([]byte{1}, 4096))
	if !bytes.Equal(got, want) {
		t.Fatal("after a crash: the synced write must be there, the unsynced one must read as the base")
	}
}

func TestTornJournalTail(t *testing.T) {
	dir := t.TempDir()
	b := base()
	s, _ := Open(dir, "d0", diskSize, Options{})
	s.WriteAtSync([]byte("hello"), 100)
	crash(s)
	f, _ := os.OpenFile(Paths(dir, "d0")[2], os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0xff}) // a torn record
	f.Close()
	s2, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Used() != 5 {
		t.Fatalf("used %d", s2.Used())
	}
	got := readAll(t, s2, b)
	if string(got[100:105]) != "hello" || !bytes.Equal(got[:100], b[:100]) {
		t.Fatal("content after torn tail")
	}
	// Writing after the truncated tail keeps the journal parseable.
	s2.WriteAtSync([]byte("again"), 200)
	crash(s2)
	s3, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if s3.Used() != 10 {
		t.Fatalf("used %d", s3.Used())
	}
}

func TestCorruptSnapshotRefused(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, "d0", diskSize, Options{})
	s.WriteAtSync([]byte("x"), 1)
	s.Close()
	p := Paths(dir, "d0")[1]
	m, _ := os.ReadFile(p)
	m[len(m)-6] ^= 1
	os.WriteFile(p, m, 0o600)
	if _, err := Open(dir, "d0", diskSize, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}

func TestLimit(t *testing.T) {
	dir := t.TempDir()
	b := base()
	s, err := Open(dir, "d0", diskSize, Options{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.WriteAtSync(bytes.Repeat([]byte{7}, 8000), 0); err != nil {
		t.Fatal(err)
	}
	// Rewriting written bytes costs nothing.
	if _, err := s.WriteAtSync(bytes.Repeat([]byte{8}, 8000), 0); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, s, b)
	_, err = s.WriteAtSync(bytes.Repeat([]byte{9}, 4000), 6000) // 2000 new of 4000: 10000 fits
	if err != nil {
		t.Fatalf("write up to the limit: %v", err)
	}
	before = readAll(t, s, b)
	_, err = s.WriteAtSync(bytes.Repeat([]byte{9}, 10), 20000)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrNoSpace) {
		t.Fatalf("write past the limit: %v", err)
	}
	if !bytes.Equal(readAll(t, s, b), before) || s.Used() != 10000 {
		t.Fatal("a refused write changed the overlay")
	}
	if _, err := s.WriteAt([]byte{1}, diskSize); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("write past the disk: %v", err)
	}
}

func TestGroupCommitConcurrent(t *testing.T) {
	dir := t.TempDir()
	b := base()
	s, _ := Open(dir, "d0", diskSize, Options{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				off := int64(g*100000 + i*1000)
				if _, err := s.WriteAtSync(bytes.Repeat([]byte{byte(g + 1)}, 500), off); err != nil {
					t.Error(err)
				}
				p := make([]byte, 700)
				s.ReadAt(p, off, bytes.NewReader(b))
			}
		}()
	}
	wg.Wait()
	crash(s)
	s2, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Used() != 8*50*500 {
		t.Fatalf("used %d", s2.Used())
	}
}

func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	b := base()
	want := bytes.Clone(b)
	s, _ := Open(dir, "d0", diskSize, Options{NoSync: true})
	for i := 0; i < compactAfter+10; i++ {
		off := int64(i*200) % (diskSize - 10)
		s.WriteAtSync([]byte{byte(i), byte(i >> 8)}, off)
		want[off], want[off+1] = byte(i), byte(i>>8)
	}
	if s.jrecs >= compactAfter {
		t.Fatalf("journal not compacted: %d records", s.jrecs)
	}
	crash(s)
	s2, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !bytes.Equal(readAll(t, s2, b), want) {
		t.Fatal("content after compaction and crash")
	}
}

// TestRewindAfterFailedAppend: a failed journal append (here: a torn
// record left at the end) is cut off before the next, so the records
// after it stay visible to Open.
func TestRewindAfterFailedAppend(t *testing.T) {
	dir := t.TempDir()
	b := base()
	s, _ := Open(dir, "d0", diskSize, Options{})
	s.WriteAtSync([]byte("one"), 10)
	f, _ := os.OpenFile(Paths(dir, "d0")[2], os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{1, 2, 3, 4, 5}) // what a failed write may leave
	f.Close()
	s.rewindJournal()
	s.WriteAtSync([]byte("two"), 20)
	crash(s)
	s2, err := Open(dir, "d0", diskSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got := readAll(t, s2, b)
	if string(got[10:13]) != "one" || string(got[20:23]) != "two" {
		t.Fatal("a record after the failed append was lost")
	}
}
