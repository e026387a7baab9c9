package repos

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/web/api"
)

// A repository added at runtime is listed, its points found, while readers
// run concurrently (-race); a name in use is refused and changes nothing.
func TestAddAtRuntime(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	second := repository.TestRepository(t)
	p := commitPoint(t, second, policy.VM{InstanceUUID: "vm-second", Name: "db01"}, "", time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC))

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.set.Points(ctx, api.PointFilter{}); err != nil {
					t.Error(err)
					return
				}
				if _, err := f.set.Repositories(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	if err := f.set.Add("second", second); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()

	if got := f.set.Names(); len(got) != 2 || got[0] != "main" || got[1] != "second" {
		t.Fatalf("names %v", got)
	}
	if !f.set.Has("second") {
		t.Fatal("Has(second) false after Add")
	}
	rp, err := f.set.Point(ctx, p.ID)
	if err != nil || rp.Repository != "second" {
		t.Fatalf("point of the added repository: %+v, %v", rp, err)
	}
	if err := f.set.Add("main", second); !errors.Is(err, ErrExists) {
		t.Fatalf("adding a name in use: %v, want ErrExists", err)
	}
	if n := len(f.set.Names()); n != 2 {
		t.Fatalf("a refused Add changed the set: %d names", n)
	}
}
