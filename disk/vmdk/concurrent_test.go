package vmdk

import (
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentReadAt reads one streamOptimized disk from several
// goroutines (io.ReaderAt allows it); run with -race.
func TestConcurrentReadAt(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "r.raw")
	img := makeRandomImage(t, raw, 4<<20, 77)
	p := filepath.Join(dir, "s.vmdk")
	qemuConvert(t, raw, p, "streamOptimized")
	d, err := Open(p)
	must(t, err)
	defer d.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			buf := make([]byte, 70000)
			for range 200 {
				off := r.Int64N(d.Size() - int64(len(buf)))
				if _, err := d.ReadAt(buf, off); err != nil {
					errs <- err
					return
				}
				for i := range buf {
					if buf[i] != img[off+int64(i)] {
						errs <- &mismatch{off + int64(i)}
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

type mismatch struct{ at int64 }

func (m *mismatch) Error() string { return "data mismatch at " + itoa(m.at) }
