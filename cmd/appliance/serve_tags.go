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
	TagListing(ctx context.Context) ([]inventory.Tag, map[string][]string, error)
}

// tagCache implements web.TagSource and web.VMTagSource (the tags of the
// console's inventory tree). Reads within ttl share one listing;
// concurrent misses share one read; a failed read is not cached.
type tagCache struct {
	src tagLister
	ttl time.Duration
	now func() time.Time

	group singleflight.Group
	mu    sync.Mutex
	tags  []web.Tag
	byVM  map[string][]string
	at    time.Time
	reads int // listings done (tests)
}

func newTagCache(src tagLister) *tagCache {
	return &tagCache{src: src, ttl: tagsTTL, now: time.Now}
}

// tagListing is one cached listing.
type tagListing struct {
	tags []web.Tag
	byVM map[string][]string
}

// Tags implements web.TagSource.
func (c *tagCache) Tags(ctx context.Context) ([]web.Tag, error) {
	l, err := c.listing(ctx)
	return l.tags, err
}

// VMTags implements web.VMTagSource: tag ids by VM managed object id.
func (c *tagCache) VMTags(ctx context.Context) (map[string][]string, error) {
	l, err := c.listing(ctx)
	return l.byVM, err
}

func (c *tagCache) listing(ctx context.Context) (tagListing, error) {
	c.mu.Lock()
	if c.tags != nil && c.now().Sub(c.at) < c.ttl {
		l := tagListing{c.tags, c.byVM}
		c.mu.Unlock()
		return l, nil
	}
	c.mu.Unlock()
	ch := c.group.DoChan("tags", func() (any, error) {
		// Not the first caller's context: its cancellation must not fail
		// the others waiting on the same read.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		ts, byVM, err := c.src.TagListing(rctx)
		if err != nil {
			return nil, err
		}
		l := tagListing{tags: make([]web.Tag, len(ts)), byVM: byVM}
		for i, t := range ts {
			l.tags[i] = web.Tag{ID: t.ID, Name: t.Name, Category: t.Category}
		}
		c.mu.Lock()
		c.tags, c.byVM, c.at = l.tags, l.byVM, c.now()
		c.reads++
		c.mu.Unlock()
		return l, nil
	})
	select {
	case <-ctx.Done():
		return tagListing{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return tagListing{}, r.Err
		}
		return r.Val.(tagListing), nil
	}
}
