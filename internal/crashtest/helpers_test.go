package crashtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
)

var password = []byte(repository.TestPassword)

// Small chunks and packs: one backup of a few MiB crosses dozens of pack
// boundaries and catalog transactions, so every step runs many times.
var testChunker = repository.ChunkerConfig{Algorithm: "cdc", Polynomial: 0x3DA3358B4DC173, MinSize: 4 << 10, AvgSize: 16 << 10, MaxSize: 64 << 10}

const testPackSize = 64 << 10

func initRepo(t testing.TB, dir string) {
	t.Helper()
	err := repository.Init(context.Background(), dir, password, repository.InitOptions{
		Chunker: testChunker, KDF: repository.TestKDF, PackSize: testPackSize, CompressionLevel: "fastest"})
	if err != nil {
		t.Fatalf("init repository: %v", err)
	}
}

// openRepo opens with fsync on: the product's write order, not the tests'.
func openRepo(ctx context.Context, dir string) (*repository.Repository, error) {
	return repository.Open(ctx, dir, password, repository.OpenOptions{CacheBytes: 8 << 20})
}

// backupImage backs up one image file as a restore point of vm, the way
// `appliance image backup` does (backup.WriteDisk into a session, PutDisk,
// Commit), and returns the point id.
func backupImage(ctx context.Context, r *repository.Repository, image, vm string) (string, error) {
	f, err := os.Open(image)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	c := r.Config().Chunker
	chunker, err := dedup.New(dedup.Params{Algorithm: c.Algorithm, Polynomial: c.Polynomial, MinSize: c.MinSize, AvgSize: c.AvgSize, MaxSize: c.MaxSize})
	if err != nil {
		return "", err
	}
	sess, err := r.NewSession(ctx)
	if err != nil {
		return "", err
	}
	defer sess.Abort()
	res, err := backup.WriteDisk(ctx, sess, chunker, backup.DiskInput{Source: f, Size: st.Size()}, backup.Options{Workers: 2})
	if err != nil {
		return "", fmt.Errorf("write disk: %w", err)
	}
	root, err := sess.PutDisk(ctx, st.Size(), res.Extents)
	if err != nil {
		return "", fmt.Errorf("put disk: %w", err)
	}
	p, err := sess.Commit(ctx, repository.NewPoint{VM: repository.VMIdentity{Name: vm}, Time: time.Now().UTC(),
		Disks: []repository.NewDisk{{Key: 0, Label: "disk0", Capacity: st.Size(), Map: root}}})
	if err != nil {
		return "", err
	}
	return p.ID, nil
}

// image is a disk image file whose content the test controls and hashes.
type image struct {
	path string
	data []byte
	rng  *rand.Rand
}

func newImage(path string, size int, seed uint64) (*image, error) {
	im := &image{path: path, data: make([]byte, size), rng: rand.New(rand.NewPCG(seed, 7))}
	im.renew()
	return im, im.write()
}

// renew gives the image entirely new content (a new disk).
func (im *image) renew() {
	for i := range im.data {
		im.data[i] = byte(im.rng.Uint32())
	}
	// A zero run in the middle, like the unused part of a VM disk.
	size := len(im.data)
	clear(im.data[size/2 : size/2+size/8])
}

func (im *image) write() error { return os.WriteFile(im.path, im.data, 0o600) }

// scribble overwrites a few random ranges with new bytes, as a guest
// writing between two backups does, and returns the new content's hash.
func (im *image) scribble(n int) ([32]byte, error) {
	for range n {
		l := 4<<10 + im.rng.IntN(48<<10)
		off := im.rng.IntN(len(im.data) - l)
		for i := off; i < off+l; i++ {
			im.data[i] = byte(im.rng.Uint32())
		}
	}
	return im.sum(), im.write()
}

func (im *image) sum() [32]byte { return sha256.Sum256(im.data) }

// verifier keeps what must survive: every committed point and its hash.
type verifier struct {
	points  map[string][32]byte // committed point id -> content hash
	byVM    map[string][32]byte // VM name -> hash of the image that run backed up
	losses  int
	lossLog []string
}

func newVerifier() *verifier {
	return &verifier{points: map[string][32]byte{}, byVM: map[string][32]byte{}}
}

// pruneTo deletes the oldest of pts (oldest first) until keep are left,
// forgets them, and reclaims: the next operation after a kill must work.
// what names the repository in a loss ("" or "local ").
func (v *verifier) pruneTo(ctx context.Context, r *repository.Repository, pts []repository.Point, keep int, what string) {
	for len(pts) > keep {
		if err := r.Delete(ctx, pts[0].ID); err != nil {
			v.loss("delete %s%s: %v", what, pts[0].ID, err)
			return
		}
		delete(v.points, pts[0].ID)
		pts = pts[1:]
	}
	if _, err := r.Reclaim(ctx, nil); err != nil {
		v.loss("%snext reclaim failed: %v", what, err)
	}
}

func (v *verifier) loss(format string, args ...any) {
	v.losses++
	if len(v.lossLog) < 20 {
		v.lossLog = append(v.lossLog, fmt.Sprintf(format, args...))
	}
}

// verify opens dir and proves the contract: the repository opens, check
// --read-data is clean, every committed point (mayVanish excepted: a point
// whose deletion was under way) is listed and restores byte-identical.
// Points that appeared since the last verify (committed by a killed run
// before it could say so) must belong to a run the test knows and restore
// its image; they join the committed set.
func (v *verifier) verify(ctx context.Context, dir, mayVanish, when string) error {
	r, err := openRepo(ctx, dir)
	if err != nil {
		v.loss("%s: repository does not open: %v", when, err)
		return err
	}
	defer r.Close()
	return v.verifyOpen(ctx, r, mayVanish, when)
}

func (v *verifier) verifyOpen(ctx context.Context, r *repository.Repository, mayVanish, when string) error {
	rep, err := r.Check(ctx, repository.CheckOptions{ReadData: true}, nil)
	if err != nil {
		v.loss("%s: check: %v", when, err)
		return err
	}
	if !rep.Clean() {
		var ps []string
		for _, p := range rep.Problems {
			ps = append(ps, p.String())
		}
		v.loss("%s: check --read-data: %s", when, strings.Join(ps, "; "))
		return errors.New("check not clean")
	}
	pts, err := r.List(ctx)
	if err != nil {
		v.loss("%s: list: %v", when, err)
		return err
	}
	listed := map[string]repository.Point{}
	for _, p := range pts {
		listed[p.ID] = p
	}
	for id := range v.points {
		if _, ok := listed[id]; !ok {
			if id == mayVanish {
				delete(v.points, id)
				continue
			}
			v.loss("%s: committed point %s is gone", when, id)
			delete(v.points, id)
		}
	}
	for id, p := range listed {
		want, known := v.points[id]
		if !known {
			h, ok := v.byVM[p.VM.Name]
			if !ok {
				v.loss("%s: point %s of unknown run %q appeared", when, id, p.VM.Name)
				continue
			}
			want = h
			v.points[id] = h
		}
		got, err := restoreSum(ctx, r, id)
		if err != nil {
			v.loss("%s: restore %s: %v", when, id, err)
			continue
		}
		if got != want {
			v.loss("%s: point %s restores different bytes", when, id)
		}
	}
	return nil
}

func restoreSum(ctx context.Context, r *repository.Repository, id string) ([32]byte, error) {
	dr, err := r.OpenDisk(ctx, id, 0)
	if err != nil {
		return [32]byte{}, err
	}
	defer dr.Close()
	h := sha256.New()
	if _, err := dr.StreamTo(ctx, h, nil); err != nil {
		return [32]byte{}, err
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, nil
}

// oldest returns the committed points sorted by time, oldest first.
func oldest(ctx context.Context, r *repository.Repository) ([]repository.Point, error) {
	pts, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].Time.Before(pts[j].Time) })
	return pts, nil
}

// fastDir is where the walk keeps its repository: tmpfs when there is one,
// because a SIGKILL loses nothing the page cache holds (fsync still runs,
// its failpoints are still hit), and thousands of fsyncs on a shared
// virtual disk would dominate the run.
func fastDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "vmvault-crashtest-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}
