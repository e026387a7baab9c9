package main

// GET /tags (web.TagSource) over the inventory's vAPI reading, cached like
// the console's inventory tree (serve_targets.go).

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/vmvault/vmvault/inventory"
	"github.com/vmvault/vmvault/web"
)

// tagsTTL is how long one tag listing (a vAPI login, a few calls and a
// logout) serves the console: the job wizard and jobs list ask on every visit.
const tagsTTL = 15 * time.Second

// tagLister is the one inventory call the cache needs; *inventory.Inventory has it.
type tagLister interface {
	Tags(ctx context.Context) ([]inventory.Tag, error)
}

// tagCache implements web.TagSource. Reads within ttl share one listing;
// concurrent misses share one read; a failed read is not cached.
type tagCache struct {
	src tagLister
	ttl time.Duration
	now func() time.Time

	group singleflight.Group
	mu    sync.Mutex
	tags  []web.Tag
	at    time.Time
	reads int // listings done (tests)
}

func newTagCache(src tagLister) *tagCache {
	return &tagCache{src: src, ttl: tagsTTL, now: time.Now}
}

// Tags implements web.TagSource.
func (c *tagCache) Tags(ctx context.Context) ([]web.Tag, error) {
	c.mu.Lock()
	if c.tags != nil && c.now().Sub(c.at) < c.ttl {
		t := c.tags
		c.mu.Unlock()
		return t, nil
	}
	c.mu.Unlock()
	ch := c.group.DoChan("tags", func() (any, error) {
		// Not the first caller's context: its cancellation must not fail
		// the others waiting on the same read.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		ts, err := c.src.Tags(rctx)
		if err != nil {
			return nil, err
		}
		out := make([]web.Tag, len(ts))
		for i, t := range ts {
			out[i] = web.Tag{ID: t.ID, Name: t.Name, Category: t.Category}
		}
		c.mu.Lock()
		c.tags, c.at = out, c.now()
		c.reads++
		c.mu.Unlock()
		return out, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]web.Tag), nil
	}
}
