package topology

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/cache"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/service/inventory"
	"github.com/vmvault/vmvault/web/api"
)

type countingTags struct {
	mu    sync.Mutex
	calls int
	err   error
}

func (c *countingTags) TagListing(context.Context) ([]inventory.Tag, map[string][]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return nil, nil, c.err
	}
	return []inventory.Tag{{ID: "urn:t:1", Name: "production", Category: "Environment"}}, map[string][]string{"vm-1": {"urn:t:1"}}, nil
}

func TestTagCache(t *testing.T) {
	ctx := context.Background()
	src := &countingTags{}
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	c := NewTagCache(src, cache.WithClock(clk))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Tags(ctx)
			if err != nil || len(got) != 1 || got[0] != (api.Tag{ID: "urn:t:1", Name: "production", Category: "Environment"}) {
				t.Errorf("Tags = %+v, %v", got, err)
			}
		}()
	}
	wg.Wait()
	if src.calls < 1 || src.calls > 8 {
		t.Fatalf("%d listings", src.calls)
	}
	before := src.calls
	if _, err := c.Tags(ctx); err != nil || src.calls != before {
		t.Fatalf("a read within the TTL listed again (%d -> %d, %v)", before, src.calls, err)
	}
	if byVM, err := c.VMTags(ctx); err != nil || src.calls != before || len(byVM["vm-1"]) != 1 {
		t.Fatalf("VMTags within the TTL = %v, %v (%d -> %d listings)", byVM, err, before, src.calls)
	}
	clk.Advance(tagsTTL)
	src.err = errors.New("vAPI login refused")
	if _, err := c.Tags(ctx); err == nil || src.calls != before+1 {
		t.Fatalf("an expired cache must list again and report its error: %v (%d calls)", err, src.calls)
	}
	src.err = nil
	if got, err := c.Tags(ctx); err != nil || len(got) != 1 || src.calls != before+2 {
		t.Fatalf("a failed listing must not be cached: %+v, %v, %d calls", got, err, src.calls)
	}
}
