package images

import (
	"context"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// prefetch is the source manifest (and config) of an image that CopyAll
// fetches while the images before it copy: when a slot frees, the copy
// starts with the image's blobs instead of a chain of requests to the
// source. Its blobs are later read through the fetcher it made, so its
// retries count toward the image's result, and its waits are the
// image's (w: one Retry-After budget, Copy's). A failed prefetch is the
// copy's failure.
type prefetch struct {
	done    chan struct{}
	desc    *remote.Descriptor
	it      *item
	err     error
	retries atomic.Int64
	w       *waits
}

// prefetch starts fetching t's source.
func (c *Copier) prefetch(ctx context.Context, t Task) {
	p := &prefetch{done: make(chan struct{}), w: &waits{}}
	if _, loaded := c.prefetched.LoadOrStore(t, p); loaded {
		return
	}
	go func() {
		defer close(p.done)
		src, err := ParseReference(t.Source, c.opts.Insecure)
		if err != nil {
			p.err = err
			return
		}
		var sent atomic.Int64
		ctx := context.WithValue(ctx, waitsKey{}, p.w)
		opts := c.remoteOptions(ctx, &p.retries, &sent)
		p.desc, p.it, p.err = c.fetch(ctx, src, opts)
	}()
}

// fetch gets src's manifest (get) and makes it an item (source); the
// repository's tags (cosign's) are listed meanwhile, for the referrers.
func (c *Copier) fetch(ctx context.Context, src name.Reference, opts []remote.Option) (*remote.Descriptor, *item, error) {
	if !c.opts.Referrers.None {
		go func() { _, _ = c.sha256Tags(ctx, src.Context(), opts) }()
	}
	desc, err := get(src, opts)
	if err != nil {
		return nil, nil, err
	}
	it, err := c.source(desc)
	if err != nil {
		return nil, nil, err
	}
	return desc, it, nil
}

// takePrefetch takes t's prefetch, if CopyAll started one, once it is
// done (nil if ctx ends first).
func (c *Copier) takePrefetch(ctx context.Context, t Task) *prefetch {
	v, ok := c.prefetched.LoadAndDelete(t)
	if !ok {
		return nil
	}
	p := v.(*prefetch)
	select {
	case <-p.done:
		return p
	case <-ctx.Done():
		return nil
	}
}
