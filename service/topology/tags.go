package topology

// GET /tags (web.TagSource) over the inventory's vAPI reading, cached like
// the console's inventory tree (topology.go).

import (
	"context"
	"time"

	"github.com/vmvault/vmvault/internal/cache"
	"github.com/vmvault/vmvault/service/inventory"
	"github.com/vmvault/vmvault/web/api"
)

// tagsTTL is how long one tag listing (a vAPI login, a few calls and a
// logout) serves the console: the job wizard and jobs list ask on every visit.
const tagsTTL = 15 * time.Second

// TagLister is the one inventory call the cache needs; *inventory.Inventory has it.
type TagLister interface {
	TagListing(ctx context.Context) ([]inventory.Tag, map[string][]string, error)
}

// TagCache implements web.TagSource and web.VMTagSource (the tags of the
// console's inventory tree). Reads within tagsTTL share one listing;
// concurrent misses share one read; a failed read is not cached.
type TagCache struct {
	cache *cache.TTL[struct{}, tagListing]
}

// NewTagCache returns the cache over src; opts go to internal/cache
// (cache.WithClock in tests).
func NewTagCache(src TagLister, opts ...cache.Option) *TagCache {
	load := func(ctx context.Context, _ struct{}) (tagListing, error) {
		ts, byVM, err := src.TagListing(ctx)
		if err != nil {
			return tagListing{}, err
		}
		l := tagListing{tags: make([]api.Tag, len(ts)), byVM: byVM}
		for i, t := range ts {
			l.tags[i] = api.Tag{ID: t.ID, Name: t.Name, Category: t.Category}
		}
		return l, nil
	}
	return &TagCache{cache: cache.New(tagsTTL, load, opts...)}
}

// tagListing is one cached listing.
type tagListing struct {
	tags []api.Tag
	byVM map[string][]string
}

// Tags implements web.TagSource.
func (c *TagCache) Tags(ctx context.Context) ([]api.Tag, error) {
	l, err := c.cache.Get(ctx, struct{}{})
	return l.tags, err
}

// VMTags implements web.VMTagSource: tag ids by VM managed object id.
func (c *TagCache) VMTags(ctx context.Context) (map[string][]string, error) {
	l, err := c.cache.Get(ctx, struct{}{})
	return l.byVM, err
}
