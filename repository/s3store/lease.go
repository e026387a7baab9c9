package s3store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// leaseName is the lock object of a repository on S3. A lease is JSON
// naming its holder and when it expires; the holder renews it every
// LeaseTTL/3. A writer that finds an unexpired lease of someone else
// waits or fails; an expired one (its holder died) is taken over.
const leaseName = "locks/lease"

// LeaseTTL is how long a lease lives without renewal.
var LeaseTTL = 2 * time.Minute

// Lease is the content of locks/lease.
type Lease struct {
	Holder  string    `json:"holder"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// LockedError says who holds the lease.
type LockedError struct{ Lease Lease }

func (e *LockedError) Error() string {
	return fmt.Sprintf("repository is locked by %s (pid %d on %s) until %s", e.Lease.Holder, e.Lease.PID, e.Lease.Host, e.Lease.Expires.Format(time.RFC3339))
}

// AcquireLease takes the repository's lease (waiting up to wait for a live
// one to go) and keeps renewing it until the returned release is called.
// It uses If-None-Match: * so that of two writers racing for a free lease
// exactly one wins on servers that support conditional writes.
func (s *Store) AcquireLease(ctx context.Context, holder string, wait time.Duration) (release func() error, err error) {
	host, _ := os.Hostname()
	l := Lease{Holder: holder, Host: host, PID: os.Getpid(), Token: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}
	deadline := time.Now().Add(wait)
	for {
		l.Expires = time.Now().Add(LeaseTTL).UTC()
		b, _ := json.Marshal(l)
		err := s.put(ctx, leaseName, bytes.NewReader(b), int64(len(b)), true, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrExists) {
			return nil, fmt.Errorf("lock %s: %w", s.t.URL(), err)
		}
		cur, rerr := s.readLease(ctx)
		if rerr == nil && (time.Now().After(cur.Expires) || deadHere(cur, host)) {
			// Its holder stopped renewing, or it was a process of this host
			// that no longer runs (killed): take it over.
			if err := s.Delete(ctx, leaseName); err != nil {
				return nil, fmt.Errorf("lock %s: remove expired lease: %w", s.t.URL(), err)
			}
			continue
		}
		if time.Now().After(deadline) {
			if rerr != nil {
				return nil, fmt.Errorf("lock %s: lease unreadable: %w", s.t.URL(), rerr)
			}
			return nil, &LockedError{Lease: cur}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // renews the lease; owned by release
		defer wg.Done()
		t := time.NewTicker(LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				l.Expires = time.Now().Add(LeaseTTL).UTC()
				b, _ := json.Marshal(l)
				_, _ = s.c.PutObject(context.Background(), s.t.Bucket, s.key(leaseName), bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{SendContentMd5: true})
			}
		}
	}()
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() {
			close(stop)
			wg.Wait()
			if cur, rerr := s.readLease(context.Background()); rerr == nil && cur.Token != l.Token {
				return // taken over after we stalled: not ours to delete
			}
			err = s.Delete(context.Background(), leaseName)
		})
		return err
	}, nil
}

// deadHere reports whether l was taken by a process of this host that is
// gone (a kill -9 leaves its lease behind until it expires otherwise).
func deadHere(l Lease, host string) bool {
	if l.Host == "" || l.Host != host || l.PID <= 0 || l.PID == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(l.PID, 0), syscall.ESRCH)
}

func (s *Store) readLease(ctx context.Context) (Lease, error) {
	b, err := s.GetRange(ctx, leaseName, 0, -1)
	if err != nil {
		return Lease{}, err
	}
	var l Lease
	if err := json.Unmarshal(b, &l); err != nil {
		return Lease{}, fmt.Errorf("lease: %w", err)
	}
	return l, nil
}
